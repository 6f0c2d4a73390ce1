// Q4_K: 256-element super-blocks of eight 32-element sub-blocks with 6-bit scales and mins,
// x = d*sc*q - dmin*m, q in 0..15 (layout in kernels.h). Dequantize, quantize (candidate-scale
// search, kquant_search.cpp) and the scalar reference dot Q4_K x Q8_K: per super-block the exact
// integers sum_s sc_s*sum(q*xq) and sum_s m_s*bsum_s, scaled by d*d_x and dmin*d_x.
#include "quant/kernels.h"
#include "quant/kquant_search.h"
#include "quant/quant.h"

namespace specgen {
namespace quant {

void dequant_q4_k(const void* src, float* dst, int64_t n) {
    const block_q4_k* b = static_cast<const block_q4_k*>(src);
    for (int64_t i = 0; i < n / QK_K; ++i) {
        const float d = fp16_to_fp32(b[i].d), dmin = fp16_to_fp32(b[i].dmin);
        uint8_t sc[8], m[8];
        unpack_k_scales(b[i].scales, sc, m);
        float* y = dst + i * QK_K;
        for (int c = 0; c < 4; ++c) {
            const uint8_t* q = b[i].qs + 32 * c;
            const float d0 = d * sc[2 * c], m0 = dmin * m[2 * c];
            const float d1 = d * sc[2 * c + 1], m1 = dmin * m[2 * c + 1];
            for (int l = 0; l < 32; ++l) y[64 * c + l] = d0 * (q[l] & 15) - m0;
            for (int l = 0; l < 32; ++l) y[64 * c + 32 + l] = d1 * (q[l] >> 4) - m1;
        }
    }
}

void quant_q4_k(const float* src, void* dst, int64_t n) {
    block_q4_k* b = static_cast<block_q4_k*>(dst);
    uint8_t q[256];
    for (int64_t i = 0; i < n / QK_K; ++i) {
        quantize_k_superblock(src + i * QK_K, 15, &b[i].d, &b[i].dmin, b[i].scales, q);
        for (int c = 0; c < 4; ++c)
            for (int l = 0; l < 32; ++l)
                b[i].qs[32 * c + l] = static_cast<uint8_t>(q[64 * c + l] | (q[64 * c + 32 + l] << 4));
    }
}

float dot_q4_k_ref(int64_t n, const void* w, const void* x) {
    const block_q4_k* a = static_cast<const block_q4_k*>(w);
    const block_q8_k* b = static_cast<const block_q8_k*>(x);
    float s = 0;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        uint8_t sc[8], m[8];
        unpack_k_scales(a[i].scales, sc, m);
        int32_t sumi = 0, summ = 0;
        for (int c = 0; c < 4; ++c) {
            int32_t lo = 0, hi = 0;
            for (int l = 0; l < 32; ++l) {
                lo += (a[i].qs[32 * c + l] & 15) * b[i].qs[64 * c + l];
                hi += (a[i].qs[32 * c + l] >> 4) * b[i].qs[64 * c + 32 + l];
            }
            sumi += sc[2 * c] * lo + sc[2 * c + 1] * hi;
        }
        for (int j = 0; j < 8; ++j) summ += m[j] * (b[i].bsums[2 * j] + b[i].bsums[2 * j + 1]);
        s += fp16_to_fp32(a[i].d) * b[i].d * static_cast<float>(sumi);
        s -= fp16_to_fp32(a[i].dmin) * b[i].d * static_cast<float>(summ);
    }
    return s;
}

}  // namespace quant
}  // namespace specgen
