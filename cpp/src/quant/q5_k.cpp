// Q5_K: as Q4_K with a fifth bit per element in qh[32] (bit s of qh[l] for element 32*s+l), q in
// 0..31 (layout in kernels.h). Dequantize, quantize (kquant_search.cpp) and the scalar reference
// dot Q5_K x Q8_K (exact integer sums per super-block, scaled by d*d_x and dmin*d_x).
#include "quant/kernels.h"
#include "quant/kquant_search.h"
#include "quant/quant.h"

namespace specgen {
namespace quant {

void dequant_q5_k(const void* src, float* dst, int64_t n) {
    const block_q5_k* b = static_cast<const block_q5_k*>(src);
    for (int64_t i = 0; i < n / QK_K; ++i) {
        const float d = fp16_to_fp32(b[i].d), dmin = fp16_to_fp32(b[i].dmin);
        uint8_t sc[8], m[8];
        unpack_k_scales(b[i].scales, sc, m);
        for (int s = 0; s < 8; ++s) {
            const float ds = d * sc[s], dm = dmin * m[s];
            for (int l = 0; l < 32; ++l) dst[i * QK_K + 32 * s + l] = ds * q5_k_value(b[i], 32 * s + l) - dm;
        }
    }
}

void quant_q5_k(const float* src, void* dst, int64_t n) {
    block_q5_k* b = static_cast<block_q5_k*>(dst);
    uint8_t q[256];
    for (int64_t i = 0; i < n / QK_K; ++i) {
        quantize_k_superblock(src + i * QK_K, 31, &b[i].d, &b[i].dmin, b[i].scales, q);
        std::memset(b[i].qh, 0, 32);
        for (int c = 0; c < 4; ++c)
            for (int l = 0; l < 32; ++l)
                b[i].qs[32 * c + l] = static_cast<uint8_t>((q[64 * c + l] & 15) | ((q[64 * c + 32 + l] & 15) << 4));
        for (int s = 0; s < 8; ++s)
            for (int l = 0; l < 32; ++l) b[i].qh[l] |= static_cast<uint8_t>((q[32 * s + l] >> 4) << s);
    }
}

float dot_q5_k_ref(int64_t n, const void* w, const void* x) {
    const block_q5_k* a = static_cast<const block_q5_k*>(w);
    const block_q8_k* b = static_cast<const block_q8_k*>(x);
    float s = 0;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        uint8_t sc[8], m[8];
        unpack_k_scales(a[i].scales, sc, m);
        int32_t sumi = 0, summ = 0;
        for (int sb = 0; sb < 8; ++sb) {
            int32_t is = 0;
            for (int l = 0; l < 32; ++l) is += q5_k_value(a[i], 32 * sb + l) * b[i].qs[32 * sb + l];
            sumi += sc[sb] * is;
            summ += m[sb] * (b[i].bsums[2 * sb] + b[i].bsums[2 * sb + 1]);
        }
        s += fp16_to_fp32(a[i].d) * b[i].d * static_cast<float>(sumi);
        s -= fp16_to_fp32(a[i].dmin) * b[i].d * static_cast<float>(summ);
    }
    return s;
}

}  // namespace quant
}  // namespace specgen
