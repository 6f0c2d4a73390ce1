// Q6_K: 256-element super-blocks of sixteen 16-element groups with int8 scales and one fp16 d,
// x = d*sc*(q-32), q in 0..63 split into ql nibbles and qh bit pairs (layout in kernels.h).
// Dequantize, quantize (symmetric candidate-scale search, kquant_search.cpp) and the scalar reference
// dot Q6_K x Q8_K: the exact integer sum_g sc_g*sum((q-32)*xq), scaled by d*d_x.
#include <algorithm>
#include <cmath>

#include "quant/kernels.h"
#include "quant/kquant_search.h"
#include "quant/quant.h"

namespace specgen {
namespace quant {

void dequant_q6_k(const void* src, float* dst, int64_t n) {
    const block_q6_k* b = static_cast<const block_q6_k*>(src);
    for (int64_t i = 0; i < n / QK_K; ++i) {
        const float d = fp16_to_fp32(b[i].d);
        for (int g = 0; g < 16; ++g) {
            const float dg = d * b[i].scales[g];
            for (int l = 0; l < 16; ++l) dst[i * QK_K + 16 * g + l] = dg * (q6_k_value(b[i], 16 * g + l) - 32);
        }
    }
}

void quant_q6_k(const float* src, void* dst, int64_t n) {
    block_q6_k* b = static_cast<block_q6_k*>(dst);
    for (int64_t i = 0; i < n / QK_K; ++i) {
        const float* x = src + i * QK_K;
        float sc_f[16], amax = 0;
        for (int g = 0; g < 16; ++g) {
            sc_f[g] = fit_symmetric(x + 16 * g, 16, 32);
            amax = std::max(amax, std::fabs(sc_f[g]));
        }
        b[i].d = fp32_to_fp16(amax / 127);
        const float d = fp16_to_fp32(b[i].d);
        uint8_t q[256];
        for (int g = 0; g < 16; ++g) {
            const int sc = d > 0 ? std::clamp(nearest_int(sc_f[g] / d), -128, 127) : 0;
            b[i].scales[g] = static_cast<int8_t>(sc);
            const float dg = d * sc;
            for (int l = 0; l < 16; ++l) {
                const int v = dg != 0 ? nearest_int(x[16 * g + l] / dg) : 0;
                q[16 * g + l] = static_cast<uint8_t>(std::clamp(v, -32, 31) + 32);
            }
        }
        std::memset(b[i].ql, 0, 128);
        std::memset(b[i].qh, 0, 64);
        for (int e = 0; e < 256; ++e) {
            const int h = e / 128, k = (e % 128) / 32, l = e % 32;
            b[i].ql[64 * h + l + 32 * (k & 1)] |= static_cast<uint8_t>((q[e] & 15) << (4 * (k >> 1)));
            b[i].qh[32 * h + l] |= static_cast<uint8_t>((q[e] >> 4) << (2 * k));
        }
    }
}

float dot_q6_k_ref(int64_t n, const void* w, const void* x) {
    const block_q6_k* a = static_cast<const block_q6_k*>(w);
    const block_q8_k* b = static_cast<const block_q8_k*>(x);
    float s = 0;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        int32_t sumi = 0;
        for (int g = 0; g < 16; ++g) {
            int32_t is = 0;
            for (int l = 0; l < 16; ++l) is += (q6_k_value(a[i], 16 * g + l) - 32) * b[i].qs[16 * g + l];
            sumi += a[i].scales[g] * is;
        }
        s += fp16_to_fp32(a[i].d) * b[i].d * static_cast<float>(sumi);
    }
    return s;
}

}  // namespace quant
}  // namespace specgen
