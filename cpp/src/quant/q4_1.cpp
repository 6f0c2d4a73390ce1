// Q4_1: blocks of 32 four-bit values with fp16 scale and min, x = d*q + m (layout in kernels.h).
// Dequantize and the scalar reference dot Q4_1 x Q8_0: d_w*d_x*sum(q*xq) + m*d_x*sum(xq) per block.
// (No quantizer: specgen never writes Q4_1.)
#include "quant/kernels.h"
#include "quant/quant.h"

namespace specgen {
namespace quant {

void dequant_q4_1(const void* src, float* dst, int64_t n) {
    const block_q4_1* b = static_cast<const block_q4_1*>(src);
    for (int64_t i = 0; i < n / QK; ++i) {
        const float d = fp16_to_fp32(b[i].d), m = fp16_to_fp32(b[i].m);
        for (int j = 0; j < 16; ++j) {
            dst[i * QK + j] = d * (b[i].qs[j] & 15) + m;
            dst[i * QK + j + 16] = d * (b[i].qs[j] >> 4) + m;
        }
    }
}

float dot_q4_1_ref(int64_t n, const void* w, const void* x) {
    const block_q4_1* a = static_cast<const block_q4_1*>(w);
    const block_q8_0* b = static_cast<const block_q8_0*>(x);
    float s = 0;
    for (int64_t i = 0; i < n / QK; ++i) {
        int32_t is = 0, sx = 0;
        for (int j = 0; j < 16; ++j) {
            is += (a[i].qs[j] & 15) * b[i].qs[j] + (a[i].qs[j] >> 4) * b[i].qs[j + 16];
            sx += b[i].qs[j] + b[i].qs[j + 16];
        }
        const float dx = fp16_to_fp32(b[i].d);
        s += fp16_to_fp32(a[i].d) * dx * static_cast<float>(is) + fp16_to_fp32(a[i].m) * dx * static_cast<float>(sx);
    }
    return s;
}

}  // namespace quant
}  // namespace specgen
