// The rows4 layout: a CPU re-layout of Q8_0 / Q5_0 / Q4_0 matrices with four weight rows side by side,
// so one vpdpbusd multiplies 4 rows x 16 elements and the float work of a block (convert, scale, fma)
// is shared by the 4 rows. Batched steps are compute-bound on that float work (docs/DESIGN.md,
// "Kernels"); the layout cuts it from 8 to 5 vector operations per 4 rows x 32 elements and token.
//
// Layout: groups of 4 rows (the last group padded with zero rows); group g holds rows 4g..4g+3 and
// starts 4g row-sizes into the buffer, so a group boundary is addressed as a row of the original.
// Inside a group, block b of the 4 rows is one record of 4 x the block size:
//   Q8_0 (136 B): d[4] | lo[64] | hi[64]   lo[16k + j] = qs_k[j] ^ 0x80, hi[16k + j] = qs_k[16 + j] ^ 0x80
//   Q4_0  (72 B): d[4] | qs[64]            qs[16k + j] = qs_k[j] (low nibble: element j, high: 16 + j)
//   Q5_0  (88 B): d[4] | mlo | mhi | qs[64]  mlo / mhi: 64-bit masks, bit 16k + j = fifth bit of
//                                            element j / 16 + j of row k
// (d_k: row k's fp16 scale). Weights are stored unsigned (Q8_0 + 128; Q4_0 / Q5_0 as in ggml, + 8 / + 16).
//
// Each output is computed in one fixed order, whichever rows and tokens share a tile (batch
// invariance): for lanes l = 0..3, p_l = the exact integer sum of w[e] * x[e] over
// e in {4l..4l+3} U {16+4l..16+4l+3} of a block, acc_l = fma(float(p_l), d_w * d_x, acc_l) over the
// blocks in order, y = (acc_0 + acc_1) + (acc_2 + acc_3). matmul_rows4_ref is that order in scalar
// code; the SIMD kernel (rows4_avx512.cpp) is tested bit-exact against it (tests/test_quant.py). The
// order differs from vec_dot's on the original layout, so a packed matrix is always computed packed.
#pragma once
#include <cstddef>
#include <cstdint>

#include "quant/ggml_type.h"

namespace specgen {

// True when the active ISA has a rows4 kernel for `type` (AVX-512 VNNI; Q8_0, Q5_0, Q4_0).
bool rows4_available(ggml_type type);
// Bytes of a packed [n_rows, n_cols] matrix (rows rounded up to a multiple of 4).
size_t rows4_bytes(ggml_type type, int64_t n_rows, int64_t n_cols);
// Packs groups [g0, g1) of W (n_rows rows of n_cols in `type`'s standard layout) into dst, a buffer of
// rows4_bytes(type, n_rows, n_cols); groups are independent, so ranges can be packed in parallel.
void rows4_pack(ggml_type type, const void* W, int64_t n_rows, int64_t n_cols, void* dst, int64_t g0, int64_t g1);
// Y[t, r] for rows r in [r0, r1) (r0 a multiple of 4) and tokens t < n_tokens of a packed matrix, in
// the order above. X as for matmul_rows (Q8_0 activations). Requires rows4_available(type).
void matmul_rows4(ggml_type type, const void* P, int64_t n_cols, const void* X, int n_tokens, float* Y,
                  int64_t y_stride, int64_t r0, int64_t r1);
// The same outputs from the standard layout in scalar code (the reference the kernel is tested against).
void matmul_rows4_ref(ggml_type type, const void* W, int64_t n_cols, const void* X, int n_tokens, float* Y,
                      int64_t y_stride, int64_t r0, int64_t r1);

}  // namespace specgen
