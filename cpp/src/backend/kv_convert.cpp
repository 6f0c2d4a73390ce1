#include "backend/kv_convert.h"

#include <cmath>
#include <cstring>
#include <string>

#include "common/error.h"
#include "quant/quant.h"

namespace specgen {
namespace kv {

namespace {

[[noreturn]] void unsupported(ggml_type type) {
    throw invalid_argument_error(std::string("KV cache type ") + ggml_type_name(type) + " is not one of f32, f16, q8_0");
}

struct q8_0_block {  // ggml's block_q8_0
    uint16_t d;
    int8_t qs[32];
};
static_assert(sizeof(q8_0_block) == 34, "block layout");

}  // namespace

void from_float_ref(ggml_type type, const float* src, void* dst, int64_t n) {
    switch (type) {
        case ggml_type::F32: std::memcpy(dst, src, size_t(n) * sizeof(float)); return;
        case ggml_type::F16: {
            uint16_t* h = static_cast<uint16_t*>(dst);
            for (int64_t i = 0; i < n; ++i) h[i] = fp32_to_fp16(src[i]);
            return;
        }
        case ggml_type::Q8_0: {
            // As quant/q8_0.cpp's reference (d = amax / 127, q = round(x / d)).
            q8_0_block* b = static_cast<q8_0_block*>(dst);
            for (int64_t i = 0; i < n / 32; ++i) {
                const float* x = src + i * 32;
                float amax = 0;
                for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[j]));
                const float d = amax / 127.0f;
                const float id = d != 0 && 1.0f / d <= 3.40282347e38f ? 1.0f / d : 0.0f;
                b[i].d = fp32_to_fp16(d);
                for (int j = 0; j < 32; ++j) b[i].qs[j] = static_cast<int8_t>(std::round(x[j] * id));
            }
            return;
        }
        default: unsupported(type);
    }
}

void to_float_ref(ggml_type type, const void* src, float* dst, int64_t n) {
    switch (type) {
        case ggml_type::F32: std::memcpy(dst, src, size_t(n) * sizeof(float)); return;
        case ggml_type::F16: {
            const uint16_t* h = static_cast<const uint16_t*>(src);
            for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(h[i]);
            return;
        }
        case ggml_type::Q8_0: {
            const q8_0_block* b = static_cast<const q8_0_block*>(src);
            for (int64_t i = 0; i < n / 32; ++i) {
                const float d = fp16_to_fp32(b[i].d);
                for (int j = 0; j < 32; ++j) dst[i * 32 + j] = d * b[i].qs[j];
            }
            return;
        }
        default: unsupported(type);
    }
}

void from_float(ggml_type type, const float* src, void* dst, int64_t n) {
    if (type == ggml_type::F32) { std::memcpy(dst, src, size_t(n) * sizeof(float)); return; }
    if (type == ggml_type::Q8_0) { quantize_row(type, src, dst, n); return; }  // SIMD, same bytes as the reference
    const cpu_isa isa = active_cpu_isa();
    if (isa == cpu_isa::avx512 && from_float_avx512(type, src, dst, n)) return;
    if (isa == cpu_isa::avx2 && from_float_avx2(type, src, dst, n)) return;
    from_float_ref(type, src, dst, n);
}

void to_float(ggml_type type, const void* src, float* dst, int64_t n) {
    if (type == ggml_type::F32) { std::memcpy(dst, src, size_t(n) * sizeof(float)); return; }
    const cpu_isa isa = active_cpu_isa();
    if (isa == cpu_isa::avx512 && to_float_avx512(type, src, dst, n)) return;
    if (isa == cpu_isa::avx2 && to_float_avx2(type, src, dst, n)) return;
    to_float_ref(type, src, dst, n);
}

}  // namespace kv
}  // namespace specgen
