// Dequantization of one 32-element group of a weight row on the device: the building block of the
// matmul and get_rows kernels. Group g holds row elements [32g, 32g + 32). Block layouts are the
// structs of cpp/src/quant/kernels.h (ggml's, byte for byte); each case mirrors the scalar
// dequant_<type> of cpp/src/quant/<type>.cpp and is checked against it through the model tests
// (tests/test_cuda.py: GPU logits vs CPU logits).
//
// A Q8_0/Q5_0 block is one group; a K-quant super-block of 256 is eight groups (sub-blocks).
// Float types (F32, F16, BF16) have no blocks: their last group may be partial (n_cols % 32 != 0)
// and elements past the row end read as 0. Every block size is even and rows start at multiples
// of their block size from a 256-byte aligned base, so the uint16 fields are aligned.
#pragma once
#include <type_traits>
#include "cuda_common.cuh"
#include "quant/kernels.h"

namespace specgen::cuda {

// The j-th 6-bit scale and min of a K-quant scale field (quant::unpack_k_scales, one entry).
__device__ __forceinline__ void k_scale_min(int j, const uint8_t* s, float& sc, float& m) {
    if (j < 4) {
        sc = float(s[j] & 63);
        m = float(s[j + 4] & 63);
    } else {
        sc = float((s[j + 4] & 15) | ((s[j - 4] >> 6) << 4));
        m = float((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
    }
}

template <ggml_type T>
__device__ __forceinline__ void load_group(const uint8_t* row, int64_t g, int64_t n_cols, float w[32]) {
    using namespace specgen::quant;
    if constexpr (T == ggml_type::F32 || T == ggml_type::F16 || T == ggml_type::BF16) {
        const int64_t c0 = g * 32;
#pragma unroll
        for (int j = 0; j < 32; ++j) {
            const int64_t c = c0 + j;
            if (c >= n_cols) { w[j] = 0.0f; continue; }
            if constexpr (T == ggml_type::F32) w[j] = reinterpret_cast<const float*>(row)[c];
            else if constexpr (T == ggml_type::F16) w[j] = fp16_bits_to_float(reinterpret_cast<const uint16_t*>(row)[c]);
            else w[j] = bf16_bits_to_float(reinterpret_cast<const uint16_t*>(row)[c]);
        }
    } else if constexpr (T == ggml_type::Q8_0) {
        const block_q8_0& b = reinterpret_cast<const block_q8_0*>(row)[g];
        const float d = fp16_bits_to_float(b.d);
#pragma unroll
        for (int j = 0; j < 32; ++j) w[j] = d * float(b.qs[j]);
    } else if constexpr (T == ggml_type::Q5_0) {
        const block_q5_0& b = reinterpret_cast<const block_q5_0*>(row)[g];
        const float d = fp16_bits_to_float(b.d);
        const uint32_t qh = uint32_t(b.qh[0]) | (uint32_t(b.qh[1]) << 8) | (uint32_t(b.qh[2]) << 16) |
                            (uint32_t(b.qh[3]) << 24);
#pragma unroll
        for (int j = 0; j < 16; ++j) {
            const int lo = b.qs[j] & 15, hi = b.qs[j] >> 4;
            w[j] = d * float((lo | int(((qh >> j) & 1) << 4)) - 16);
            w[j + 16] = d * float((hi | int(((qh >> (j + 16)) & 1) << 4)) - 16);
        }
    } else if constexpr (T == ggml_type::Q4_K || T == ggml_type::Q5_K) {
        // Sub-block s of super-block i: chunk c = s/2 of qs, low nibbles for even s, high for odd;
        // Q5_K's fifth bit of element 32s+l is bit s of qh[l].
        using block = std::conditional_t<T == ggml_type::Q4_K, block_q4_k, block_q5_k>;
        const block& b = reinterpret_cast<const block*>(row)[g / 8];
        const int s = int(g % 8), c = s / 2, shift = (s & 1) * 4;
        float sc, m;
        k_scale_min(s, b.scales, sc, m);
        const float d = fp16_bits_to_float(b.d) * sc, dm = fp16_bits_to_float(b.dmin) * m;
#pragma unroll
        for (int l = 0; l < 32; ++l) {
            int q = (b.qs[32 * c + l] >> shift) & 15;
            if constexpr (T == ggml_type::Q5_K) q |= ((b.qh[l] >> s) & 1) << 4;
            w[l] = d * float(q) - dm;
        }
    } else if constexpr (T == ggml_type::Q6_K) {
        // Element e = 32s+l: half h = s/4, k = s%4; low nibble from ql[64h + l + 32(k&1)] (high
        // nibble when k >= 2), bits 4-5 from qh[32h + l] >> 2k; scale scales[8h + 2k + l/16].
        const block_q6_k& b = reinterpret_cast<const block_q6_k*>(row)[g / 8];
        const int s = int(g % 8), h = s / 4, k = s % 4;
        const float d = fp16_bits_to_float(b.d);
        const float d0 = d * float(b.scales[8 * h + 2 * k]), d1 = d * float(b.scales[8 * h + 2 * k + 1]);
        const uint8_t* ql = b.ql + 64 * h + 32 * (k & 1);
        const uint8_t* qh = b.qh + 32 * h;
        const int lshift = (k >> 1) * 4, hshift = 2 * k;
#pragma unroll
        for (int l = 0; l < 32; ++l) {
            const int q = ((ql[l] >> lshift) & 15) | (((qh[l] >> hshift) & 3) << 4);
            w[l] = (l < 16 ? d0 : d1) * float(q - 32);
        }
    }
}

}  // namespace specgen::cuda
