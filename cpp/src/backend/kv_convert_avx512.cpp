// AVX-512 (F16C) KV row conversions of kv_convert.h. f16: the hardware's round-to-nearest-even
// conversion, which is what fp32_to_fp16 computes; q8_0: d * q in float, as the reference.
#include <immintrin.h>

// GCC 12's avx512fintrin.h trips -W(maybe-)uninitialized on its own _mm512_undefined_* helpers.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <cstring>

#include "backend/kv_convert.h"
#include "quant/quant.h"

namespace specgen {
namespace kv {

bool from_float_avx512(ggml_type type, const float* src, void* dst, int64_t n) {
    if (type != ggml_type::F16) return false;
    uint16_t* h = static_cast<uint16_t*>(dst);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256i v = _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(h + i), v);
    }
    for (; i < n; ++i) h[i] = fp32_to_fp16(src[i]);
    return true;
}

bool to_float_avx512(ggml_type type, const void* src, float* dst, int64_t n) {
    if (type == ggml_type::F16) {
        const uint16_t* h = static_cast<const uint16_t*>(src);
        int64_t i = 0;
        for (; i + 16 <= n; i += 16)
            _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + i))));
        for (; i < n; ++i) dst[i] = fp16_to_fp32(h[i]);
        return true;
    }
    if (type == ggml_type::Q8_0) {
        const uint8_t* b = static_cast<const uint8_t*>(src);
        for (int64_t i = 0; i < n / 32; ++i, b += 34) {
            uint16_t dh;
            std::memcpy(&dh, b, 2);
            const __m512 d = _mm512_set1_ps(fp16_to_fp32(dh));
            const __m128i q0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2));
            const __m128i q1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 18));
            _mm512_storeu_ps(dst + i * 32, _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q0))));
            _mm512_storeu_ps(dst + i * 32 + 16, _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q1))));
        }
        return true;
    }
    return false;
}

}  // namespace kv
}  // namespace specgen
