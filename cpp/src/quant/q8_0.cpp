// Q8_0: blocks of 32 int8 with one fp16 scale (layout in kernels.h). Dequantize, quantize
// (d = max|x|/127, q = round(x/d), as ggml's reference, so gguf.quants.quantize matches bit for bit)
// and the scalar reference dot Q8_0 x Q8_0: per block an exact int32 sum, scaled by d_w*d_x and
// accumulated in float in block order. SIMD versions in dot_avx2.cpp / dot_avx512.cpp; quantize_act_*.cpp
// repeat quant_q8_0 byte for byte, so change them together.
#include <cmath>

#include "quant/kernels.h"
#include "quant/quant.h"

namespace specgen {
namespace quant {

void dequant_q8_0(const void* src, float* dst, int64_t n) {
    const block_q8_0* b = static_cast<const block_q8_0*>(src);
    for (int64_t i = 0; i < n / QK; ++i) {
        const float d = fp16_to_fp32(b[i].d);
        for (int j = 0; j < QK; ++j) dst[i * QK + j] = d * b[i].qs[j];
    }
}

void quant_q8_0(const float* src, void* dst, int64_t n) {
    block_q8_0* b = static_cast<block_q8_0*>(dst);
    for (int64_t i = 0; i < n / QK; ++i) {
        const float* x = src + i * QK;
        float amax = 0;
        for (int j = 0; j < QK; ++j) amax = std::fmax(amax, std::fabs(x[j]));
        const float d = amax / 127.0f;
        const float id = q8_0_inverse_scale(d);
        b[i].d = fp32_to_fp16(d);
        for (int j = 0; j < QK; ++j) b[i].qs[j] = static_cast<int8_t>(std::round(x[j] * id));
    }
}

float dot_q8_0_ref(int64_t n, const void* w, const void* x) {
    const block_q8_0* a = static_cast<const block_q8_0*>(w);
    const block_q8_0* b = static_cast<const block_q8_0*>(x);
    float s = 0;
    for (int64_t i = 0; i < n / QK; ++i) {
        int32_t is = 0;
        for (int j = 0; j < QK; ++j) is += a[i].qs[j] * b[i].qs[j];
        s += fp16_to_fp32(a[i].d) * fp16_to_fp32(b[i].d) * static_cast<float>(is);
    }
    return s;
}

}  // namespace quant
}  // namespace specgen
