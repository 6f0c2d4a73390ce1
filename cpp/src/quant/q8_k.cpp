// Q8_K: the activation format for K-quant dots: 256 int8 with a float scale and the sums of each
// 16 values (bsums, used for the K-quants' min/offset terms). Layout in kernels.h.
// Quantize (d = max|x|/127, q = round(x/d)) and dequantize; checked by round trip in tests.
// quantize_act_*.cpp repeat quant_q8_k byte for byte, so change them together.
#include <algorithm>
#include <cmath>

#include "quant/kernels.h"
#include "quant/kquant_search.h"
#include "quant/quant.h"

namespace specgen {
namespace quant {

void dequant_q8_k(const void* src, float* dst, int64_t n) {
    const block_q8_k* b = static_cast<const block_q8_k*>(src);
    for (int64_t i = 0; i < n / QK_K; ++i)
        for (int j = 0; j < QK_K; ++j) dst[i * QK_K + j] = b[i].d * b[i].qs[j];
}

void quant_q8_k(const float* src, void* dst, int64_t n) {
    block_q8_k* b = static_cast<block_q8_k*>(dst);
    for (int64_t i = 0; i < n / QK_K; ++i) {
        const float* x = src + i * QK_K;
        float amax = 0;
        for (int j = 0; j < QK_K; ++j) amax = std::max(amax, std::fabs(x[j]));
        const float d = amax / 127.0f;
        const float id = q8_k_inverse_scale(amax);
        b[i].d = d;
        for (int j = 0; j < QK_K; ++j) b[i].qs[j] = static_cast<int8_t>(std::clamp(nearest_int(x[j] * id), -127, 127));
        for (int g = 0; g < 16; ++g) {
            int sum = 0;
            for (int l = 0; l < 16; ++l) sum += b[i].qs[16 * g + l];
            b[i].bsums[g] = static_cast<int16_t>(sum);
        }
    }
}

}  // namespace quant
}  // namespace specgen
