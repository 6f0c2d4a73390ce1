// Q5_1: blocks of 32 five-bit values with fp16 scale and min, x = d*q + m; bits packed as Q5_0
// (layout in kernels.h). Dequantize and the scalar reference dot Q5_1 x Q8_0:
// d_w*d_x*sum(q*xq) + m*d_x*sum(xq) per block. (No quantizer: specgen never writes Q5_1.)
#include "quant/kernels.h"
#include "quant/quant.h"

namespace specgen {
namespace quant {

void dequant_q5_1(const void* src, float* dst, int64_t n) {
    const block_q5_1* b = static_cast<const block_q5_1*>(src);
    for (int64_t i = 0; i < n / QK; ++i) {
        const float d = fp16_to_fp32(b[i].d), m = fp16_to_fp32(b[i].m);
        uint32_t qh;
        std::memcpy(&qh, b[i].qh, 4);
        for (int j = 0; j < QK; ++j) dst[i * QK + j] = d * q5_value(b[i].qs, qh, j) + m;
    }
}

float dot_q5_1_ref(int64_t n, const void* w, const void* x) {
    const block_q5_1* a = static_cast<const block_q5_1*>(w);
    const block_q8_0* b = static_cast<const block_q8_0*>(x);
    float s = 0;
    for (int64_t i = 0; i < n / QK; ++i) {
        uint32_t qh;
        std::memcpy(&qh, a[i].qh, 4);
        int32_t is = 0, sx = 0;
        for (int j = 0; j < QK; ++j) {
            is += q5_value(a[i].qs, qh, j) * b[i].qs[j];
            sx += b[i].qs[j];
        }
        const float dx = fp16_to_fp32(b[i].d);
        s += fp16_to_fp32(a[i].d) * dx * static_cast<float>(is) + fp16_to_fp32(a[i].m) * dx * static_cast<float>(sx);
    }
    return s;
}

}  // namespace quant
}  // namespace specgen
