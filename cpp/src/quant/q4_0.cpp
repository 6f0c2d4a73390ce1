// Q4_0: blocks of 32 four-bit values with one fp16 scale, x = d*(q-8) (layout in kernels.h).
// Dequantize, quantize (d = signed extreme / -8, so the extreme maps to q = 0 exactly; same rule as
// ggml's reference) and the scalar reference dot Q4_0 x Q8_0 (exact int32 per block, float across).
#include <algorithm>
#include <cmath>

#include "quant/kernels.h"
#include "quant/quant.h"

namespace specgen {
namespace quant {

void dequant_q4_0(const void* src, float* dst, int64_t n) {
    const block_q4_0* b = static_cast<const block_q4_0*>(src);
    for (int64_t i = 0; i < n / QK; ++i) {
        const float d = fp16_to_fp32(b[i].d);
        for (int j = 0; j < 16; ++j) {
            dst[i * QK + j] = d * ((b[i].qs[j] & 15) - 8);
            dst[i * QK + j + 16] = d * ((b[i].qs[j] >> 4) - 8);
        }
    }
}

void quant_q4_0(const float* src, void* dst, int64_t n) {
    block_q4_0* b = static_cast<block_q4_0*>(dst);
    for (int64_t i = 0; i < n / QK; ++i) {
        const float* x = src + i * QK;
        float ext = 0;
        for (int j = 0; j < QK; ++j)
            if (std::fabs(x[j]) > std::fabs(ext)) ext = x[j];
        const float d = ext / -8.0f;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        b[i].d = fp32_to_fp16(d);
        for (int j = 0; j < 16; ++j) {
            const int q0 = std::min(15, static_cast<int>(x[j] * id + 8.5f));
            const int q1 = std::min(15, static_cast<int>(x[j + 16] * id + 8.5f));
            b[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
        }
    }
}

float dot_q4_0_ref(int64_t n, const void* w, const void* x) {
    const block_q4_0* a = static_cast<const block_q4_0*>(w);
    const block_q8_0* b = static_cast<const block_q8_0*>(x);
    float s = 0;
    for (int64_t i = 0; i < n / QK; ++i) {
        int32_t is = 0;
        for (int j = 0; j < 16; ++j)
            is += ((a[i].qs[j] & 15) - 8) * b[i].qs[j] + ((a[i].qs[j] >> 4) - 8) * b[i].qs[j + 16];
        s += fp16_to_fp32(a[i].d) * fp16_to_fp32(b[i].d) * static_cast<float>(is);
    }
    return s;
}

}  // namespace quant
}  // namespace specgen
