// AVX2 (F16C) KV row conversions of kv_convert.h, 8 lanes: the AVX-512 file's arithmetic. f16: the
// hardware's round-to-nearest-even conversion, which is what fp32_to_fp16 computes; q8_0: d * q in
// float, as the reference.
#include <immintrin.h>

#include <cstring>

#include "backend/kv_convert.h"
#include "quant/quant.h"

namespace specgen {
namespace kv {

bool from_float_avx2(ggml_type type, const float* src, void* dst, int64_t n) {
    if (type != ggml_type::F16) return false;
    uint16_t* h = static_cast<uint16_t*>(dst);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m128i v = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(h + i), v);
    }
    for (; i < n; ++i) h[i] = fp32_to_fp16(src[i]);
    return true;
}

bool to_float_avx2(ggml_type type, const void* src, float* dst, int64_t n) {
    if (type == ggml_type::F16) {
        const uint16_t* h = static_cast<const uint16_t*>(src);
        int64_t i = 0;
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))));
        for (; i < n; ++i) dst[i] = fp16_to_fp32(h[i]);
        return true;
    }
    if (type == ggml_type::Q8_0) {
        const uint8_t* b = static_cast<const uint8_t*>(src);
        for (int64_t i = 0; i < n / 32; ++i, b += 34) {
            uint16_t dh;
            std::memcpy(&dh, b, 2);
            const __m256 d = _mm256_set1_ps(fp16_to_fp32(dh));
            for (int j = 0; j < 32; j += 8) {
                const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b + 2 + j));
                _mm256_storeu_ps(dst + i * 32 + j, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q))));
            }
        }
        return true;
    }
    return false;
}

}  // namespace kv
}  // namespace specgen
