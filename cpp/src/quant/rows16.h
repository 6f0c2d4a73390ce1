// The rows16 layout: a CPU re-layout of Q8_0 / Q5_0 / Q4_0 / Q4_K / Q5_K / Q6_K matrices with sixteen weight rows side by
// side, one 32-bit lane per row. One vpdpbusd then multiplies 16 rows x 4 elements against 4 bytes of
// x broadcast to every lane, a block's exact integer dot product ends in one lane per row, and the
// float work of a block (convert, scale, fma) is one vector operation each for 16 rows. Batched steps
// are compute-bound on that float work (docs/DESIGN.md section 6.1): per 16 rows x 32 elements and
// token this spends 11 vector operations where one row per pair of blocks spends 32. AVX2 reads the
// same records eight rows per ymm (vpmaddubsw + vpmaddwd for vpdpbusd; rows16_avx2.cpp): 1.7-2.5x the
// GGUF-layout kernels' throughput on Q5_0 / Q4_K from one token up (tools/bench_matmul.py).
//
// Layout: groups of 16 rows (the last group padded with zero rows); group g holds rows 16g..16g+15 and
// starts 16g packed row-sizes into the buffer (the GGUF row size; Q4_K 148 bytes per block). Inside a
// group, block b of the 16 rows is one record of 16 x the block size:
//   Q8_0 (544 B): d[16] | q[8][64]          q[j][4r + i] = qs_r[4j + i] ^ 0x80   (elements 4j..4j+3)
//   Q4_0 (288 B): d[16] | q[4][64]          q[j][4r + i] = qs_r[4j + i]: low nibbles are elements
//                                           4j..4j+3, high nibbles 16+4j..16+4j+3
//   Q5_0 (352 B): d[16] | m[8] | q[4][64]   as Q4_0; m[j] (64 bits): bit 4r + i = the fifth bit of
//                                           element 4j + i of row r
// (d_r: row r's fp16 scale; r = 0..15, i = 0..3). Weights are stored unsigned (Q8_0 + 128; Q4_0 /
// Q5_0 as in ggml, + 8 / + 16); the offset times the block's sum of x is removed once per token.
//   Q4_K (2368 B, 148 per row: 4 more than the GGUF block, the scales unpacked):
//     d[16] | dmin[16] | sc[8][16] | m[4][32] | q[4][8][64]
//     sc[s][r]: row r's 6-bit scale of sub-block s; m[i][2r + t]: its min of sub-block 2i + t;
//     q[c][j][4r + i] = qs_r[32c + 4j + i]: low nibbles are elements 4j..4j+3 of sub-block 2c, high
//     nibbles those of sub-block 2c + 1 (x: Q8_K activations).
//   Q5_K (2880 B, 180 per row): the Q4_K record of its nibbles | h[8][8], 64-bit masks: bit 4r + i of
//     h[s][j] is the fifth bit of element 4j + i of sub-block s of row r.
//   Q6_K (3360 B, 210 per row as in the GGUF block):
//     d[16] | sc[16][16] | ql[8][4][64] | qh[4][4][64]
//     sc[s][r]: row r's int8 scale of 16-element sub-block s; ql[c][j][4r + i]: the low 4 bits of
//     element 4j + i of sub-block 2c in the low nibble, of sub-block 2c + 1 in the high nibble;
//     qh[g][j][4r + i]: bits 2k, 2k + 1 are the top 2 bits of element 4j + i of sub-block 4g + k.
//     q = low | top << 4 is stored + 32 (x: Q8_K activations).
//
// Each output has one order, whichever rows and tokens share a tile (batch invariance): per block,
// p = the exact integer dot product of the block, acc = fma(float(p), d_w * d_x, acc) over the blocks
// in order; y = acc. Q4_K: per block the exact integers isum = sum_s sc_s * (q . x over sub-block s)
// and msum = sum_s m_s * (the sub-block's sum of x), then acc = fma(float(isum), d * d_x, acc),
// acc = fma(float(msum), -(dmin * d_x), acc); Q5_K the same with 5-bit q. Q6_K: per block the exact isum = sum_s sc_s * ((q - 32) . x
// over sub-block s), then acc = fma(float(isum), d * d_x, acc). matmul_rows16_ref is that order in scalar code; the SIMD kernel
// (rows16_avx2.cpp, rows16_avx512.cpp) is tested bit-exact against it (tests/test_quant.py). It differs from
// vec_dot's order on the original layout, so a packed matrix is always computed packed.
#pragma once
#include <cstddef>
#include <cstdint>

#include "quant/ggml_type.h"

namespace specgen {

constexpr int kRows16 = 16;            // rows per group
constexpr int kRows16Q4kRecord = 2368;  // bytes of one Q4_K record (16 rows x one 256-element block)
constexpr int kRows16Q5kRecord = 2880;  // bytes of one Q5_K record
constexpr int kRows16Q6kRecord = 3360;  // bytes of one Q6_K record

// True when the active ISA has a rows16 kernel for `type` (AVX2 or AVX-512 VNNI; Q8_0, Q5_0, Q4_0, Q4_K, Q5_K, Q6_K).
bool rows16_available(ggml_type type);
// Bytes of a packed [n_rows, n_cols] matrix (rows rounded up to a multiple of 16).
size_t rows16_bytes(ggml_type type, int64_t n_rows, int64_t n_cols);
// Packs groups [g0, g1) of W (n_rows rows of n_cols in `type`'s standard layout) into dst, a buffer
// of rows16_bytes(type, n_rows, n_cols); groups are independent, so ranges can be packed in parallel.
void rows16_pack(ggml_type type, const void* W, int64_t n_rows, int64_t n_cols, void* dst, int64_t g0,
                 int64_t g1);
// True for the types with a rows16 layout (Q8_0, Q5_0, Q4_0, Q4_K, Q5_K, Q6_K), whatever the ISA.
bool rows16_has_layout(ggml_type type);
// Writes row r (one standard-layout row of n_cols) into its lane of a packed buffer: a matrix that
// grows row by row (a draft vocabulary's head) keeps its packed copy current.
void rows16_pack_row(ggml_type type, const void* row, int64_t n_cols, void* dst, int64_t r);
// Y[t, r] for rows r in [r0, r1) (r0 a multiple of 16) and tokens t < n_tokens of a packed matrix,
// in the order above. X as for matmul_rows (the type's vec_dot_type). Requires rows16_available(type).
void matmul_rows16(ggml_type type, const void* P, int64_t n_cols, const void* X, int n_tokens, float* Y,
                   int64_t y_stride, int64_t r0, int64_t r1);
// The same outputs from the standard layout in scalar code (the reference the kernel is tested against).
void matmul_rows16_ref(ggml_type type, const void* W, int64_t n_cols, const void* X, int n_tokens, float* Y,
                       int64_t y_stride, int64_t r0, int64_t r1);

}  // namespace specgen
