// Q5_0: blocks of 32 five-bit values with one fp16 scale, x = d*(q-16); the low nibbles are packed
// like Q4_0 and bit j of the little-endian uint32 qh is element j's fifth bit (layout in kernels.h).
// Dequantize, quantize (d = signed extreme / -16, ggml's rule) and the scalar reference dot
// Q5_0 x Q8_0 (exact int32 per block, float across blocks).
#include <algorithm>
#include <cmath>

#include "quant/kernels.h"
#include "quant/quant.h"

namespace specgen {
namespace quant {

void dequant_q5_0(const void* src, float* dst, int64_t n) {
    const block_q5_0* b = static_cast<const block_q5_0*>(src);
    for (int64_t i = 0; i < n / QK; ++i) {
        const float d = fp16_to_fp32(b[i].d);
        uint32_t qh;
        std::memcpy(&qh, b[i].qh, 4);
        for (int j = 0; j < QK; ++j) dst[i * QK + j] = d * (q5_value(b[i].qs, qh, j) - 16);
    }
}

void quant_q5_0(const float* src, void* dst, int64_t n) {
    block_q5_0* b = static_cast<block_q5_0*>(dst);
    for (int64_t i = 0; i < n / QK; ++i) {
        const float* x = src + i * QK;
        float ext = 0;
        for (int j = 0; j < QK; ++j)
            if (std::fabs(x[j]) > std::fabs(ext)) ext = x[j];
        const float d = ext / -16.0f;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        b[i].d = fp32_to_fp16(d);
        uint32_t qh = 0;
        for (int j = 0; j < 16; ++j) {
            const int q0 = std::min(31, static_cast<int>(x[j] * id + 16.5f));
            const int q1 = std::min(31, static_cast<int>(x[j + 16] * id + 16.5f));
            b[i].qs[j] = static_cast<uint8_t>((q0 & 15) | ((q1 & 15) << 4));
            qh |= static_cast<uint32_t>(q0 >> 4) << j;
            qh |= static_cast<uint32_t>(q1 >> 4) << (j + 16);
        }
        std::memcpy(b[i].qh, &qh, 4);
    }
}

float dot_q5_0_ref(int64_t n, const void* w, const void* x) {
    const block_q5_0* a = static_cast<const block_q5_0*>(w);
    const block_q8_0* b = static_cast<const block_q8_0*>(x);
    float s = 0;
    for (int64_t i = 0; i < n / QK; ++i) {
        uint32_t qh;
        std::memcpy(&qh, a[i].qh, 4);
        int32_t is = 0;
        for (int j = 0; j < QK; ++j) is += (q5_value(a[i].qs, qh, j) - 16) * b[i].qs[j];
        s += fp16_to_fp32(a[i].d) * fp16_to_fp32(b[i].d) * static_cast<float>(is);
    }
    return s;
}

}  // namespace quant
}  // namespace specgen
