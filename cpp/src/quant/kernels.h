// Internal to cpp/src/quant: ggml block layouts, the per-type scalar reference kernels and the
// signature every ISA's matrix kernel implements. Not part of the library interface (see quant.h).
//
// Block layouts are ggml's, byte for byte (fp16 fields are raw IEEE half bits):
//   Q4_0 (32 el, 18 B): d; qs[16]        x[j] = d*((qs[j]&15)-8), x[j+16] = d*((qs[j]>>4)-8)
//   Q4_1 (32 el, 20 B): d, m; qs[16]     x = d*q + m
//   Q5_0 (32 el, 22 B): d; qh[4]; qs[16] 5th bit of element j is bit j of the little-endian qh
//   Q5_1 (32 el, 24 B): d, m; qh[4]; qs[16]
//   Q8_0 (32 el, 34 B): d; int8 qs[32]
//   Q4_K (256 el, 144 B): d, dmin; scales[12] (8 six-bit scales + 8 six-bit mins); qs[128]
//        64-element chunk c uses qs[32c..32c+32): low nibbles are sub-block 2c, high nibbles 2c+1;
//        x = d*sc[s]*q - dmin*m[s]
//   Q5_K (256 el, 176 B): as Q4_K plus qh[32]: the 5th bit of element 32*s+l is bit s of qh[l]
//   Q6_K (256 el, 210 B): ql[128]; qh[64]; int8 scales[16]; d. Per 128-element half h:
//        element 32*k+l (k = 0..3) takes low bits from ql[64h + l + 32*(k&1)] (nibble k>>1) and
//        high bits from qh[32h + l] (bits 2k, 2k+1); x = d*scales[8h + 2k + l/16]*(q-32)
//   Q8_K (256 el, 292 B): float d; int8 qs[256]; int16 bsums[16] (sum of each 16 qs)
#pragma once
#include <cfloat>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "quant/ggml_type.h"

namespace specgen {
namespace quant {

constexpr int QK = 32;    // elements per legacy block
constexpr int QK_K = 256; // elements per K-quant super-block

struct block_q4_0 { uint16_t d; uint8_t qs[16]; };
struct block_q4_1 { uint16_t d, m; uint8_t qs[16]; };
struct block_q5_0 { uint16_t d; uint8_t qh[4]; uint8_t qs[16]; };
struct block_q5_1 { uint16_t d, m; uint8_t qh[4]; uint8_t qs[16]; };
struct block_q8_0 { uint16_t d; int8_t qs[32]; };
struct block_q4_k { uint16_t d, dmin; uint8_t scales[12]; uint8_t qs[128]; };
struct block_q5_k { uint16_t d, dmin; uint8_t scales[12]; uint8_t qh[32]; uint8_t qs[128]; };
struct block_q6_k { uint8_t ql[128]; uint8_t qh[64]; int8_t scales[16]; uint16_t d; };
struct block_q8_k { float d; int8_t qs[256]; int16_t bsums[16]; };

static_assert(sizeof(block_q4_0) == 18 && sizeof(block_q4_1) == 20, "block layout");
static_assert(sizeof(block_q5_0) == 22 && sizeof(block_q5_1) == 24, "block layout");
static_assert(sizeof(block_q8_0) == 34 && sizeof(block_q4_k) == 144, "block layout");
static_assert(sizeof(block_q5_k) == 176 && sizeof(block_q6_k) == 210, "block layout");
static_assert(sizeof(block_q8_k) == 292, "block layout");

// Element j (0..31) as stored (unsigned) of a Q4_0 / Q4_1 block's qs, and of a Q5_0 / Q5_1 block's
// with bit j of the little-endian qh as its fifth bit.
inline int q4_value(const uint8_t* qs, int j) { return j < 16 ? qs[j] & 15 : qs[j - 16] >> 4; }
inline int q5_value(const uint8_t* qs, uint32_t qh, int j) { return q4_value(qs, j) | int((qh >> j) & 1u) << 4; }
// q (0..15) of element e (0..255) of a Q4_K super-block; e lies in sub-block e / 32.
inline int q4_k_value(const block_q4_k& b, int e) {
    const int s = e / 32, l = e % 32;
    const uint8_t q = b.qs[32 * (s / 2) + l];
    return (s & 1) ? (q >> 4) : (q & 15);
}
// q (0..31) of element e (0..255) of a Q5_K super-block: the Q4_K nibble plus bit s of qh[l].
inline int q5_k_value(const block_q5_k& b, int e) {
    const int s = e / 32, l = e % 32, c = s / 2;
    const int lo = (s & 1) ? (b.qs[32 * c + l] >> 4) : (b.qs[32 * c + l] & 15);
    return lo | (((b.qh[l] >> s) & 1) << 4);
}
// q (0..63, stored + 32) of element e (0..255) of a Q6_K super-block; e lies in sub-block e / 16.
inline int q6_k_value(const block_q6_k& b, int e) {
    const int h = e / 128, k = (e % 128) / 32, l = e % 32;
    const uint8_t lo = b.ql[64 * h + l + 32 * (k & 1)];
    const int low = (k >> 1) ? (lo >> 4) : (lo & 15);
    return low | (((b.qh[32 * h + l] >> (2 * k)) & 3) << 4);
}

// Unpacks the 12-byte K-quant scale field into 8 scales and 8 mins (each 0..63).
//   bytes 0-3: low 6 bits sc[0..3], top 2 bits = bits 4-5 of sc[4..7]
//   bytes 4-7: low 6 bits m[0..3],  top 2 bits = bits 4-5 of m[4..7]
//   bytes 8-11: low nibble = bits 0-3 of sc[4..7], high nibble = bits 0-3 of m[4..7]
inline void unpack_k_scales(const uint8_t* s, uint8_t sc[8], uint8_t m[8]) {
    for (int j = 0; j < 4; ++j) {
        sc[j] = s[j] & 63;
        m[j] = s[j + 4] & 63;
        sc[j + 4] = (s[j + 8] & 15) | ((s[j] >> 6) << 4);
        m[j + 4] = (s[j + 8] >> 4) | ((s[j + 4] >> 6) << 4);
    }
}
// Inverse of unpack_k_scales; every value must be < 64.
inline void pack_k_scales(const uint8_t sc[8], const uint8_t m[8], uint8_t* s) {
    for (int j = 0; j < 4; ++j) {
        s[j] = (sc[j] & 63) | ((sc[j + 4] >> 4) << 6);
        s[j + 4] = (m[j] & 63) | ((m[j + 4] >> 4) << 6);
        s[j + 8] = (sc[j + 4] & 15) | ((m[j + 4] & 15) << 4);
    }
}

// The activation quantizers' scales (quant_q8_0 / quant_q8_k and their SIMD versions in
// quantize_act_*.cpp use exactly these, so all give the same bytes). q = round(x * id), with
// d = amax / 127 stored. A block so small that the inverse overflows (amax < ~4e-37) gets id = 0
// and quantizes to zeros: inf * x has no int8.
inline float q8_0_inverse_scale(float d) { return d != 0 && 1.0f / d <= FLT_MAX ? 1.0f / d : 0.0f; }
inline float q8_k_inverse_scale(float amax) { return amax > 0 && 127.0f / amax <= FLT_MAX ? 127.0f / amax : 0.0f; }

// One matrix kernel per (type, ISA):
//   Y[t*y_stride + r] = dot(W row r, X row t) for r < n_rows, t < n_tok
//   W: n_rows rows of w_stride bytes, X: n_tok rows of x_stride bytes, n elements per row.
// Every output is computed with the same instruction sequence whatever n_rows/n_tok are, so
// n_rows = n_tok = 1 is the vec_dot of that ISA (batch invariance).
using gemm_fn = void (*)(int64_t n, const void* W, size_t w_stride, int n_rows, const void* X,
                         size_t x_stride, int n_tok, float* Y, int64_t y_stride);
using dot_fn = float (*)(int64_t n, const void* w, const void* x);
using dequant_fn = void (*)(const void* src, float* dst, int64_t n);
using quant_fn = void (*)(const float* src, void* dst, int64_t n);

// Scalar references (each in the file of its type).
void dequant_f32(const void*, float*, int64_t);
void dequant_f16(const void*, float*, int64_t);
void dequant_bf16(const void*, float*, int64_t);
void dequant_q4_0(const void*, float*, int64_t);
void dequant_q4_1(const void*, float*, int64_t);
void dequant_q5_0(const void*, float*, int64_t);
void dequant_q5_1(const void*, float*, int64_t);
void dequant_q8_0(const void*, float*, int64_t);
void dequant_q4_k(const void*, float*, int64_t);
void dequant_q5_k(const void*, float*, int64_t);
void dequant_q6_k(const void*, float*, int64_t);
void dequant_q8_k(const void*, float*, int64_t);

void quant_f32(const float*, void*, int64_t);
void quant_f16(const float*, void*, int64_t);
void quant_bf16(const float*, void*, int64_t);
void quant_q4_0(const float*, void*, int64_t);
void quant_q5_0(const float*, void*, int64_t);
void quant_q8_0(const float*, void*, int64_t);
void quant_q4_k(const float*, void*, int64_t);
void quant_q5_k(const float*, void*, int64_t);
void quant_q6_k(const float*, void*, int64_t);
void quant_q8_k(const float*, void*, int64_t);

float dot_f32_ref(int64_t n, const void* w, const void* x);
float dot_f16_ref(int64_t n, const void* w, const void* x);
float dot_bf16_ref(int64_t n, const void* w, const void* x);
float dot_q4_0_ref(int64_t n, const void* w, const void* x);
float dot_q4_1_ref(int64_t n, const void* w, const void* x);
float dot_q5_0_ref(int64_t n, const void* w, const void* x);
float dot_q5_1_ref(int64_t n, const void* w, const void* x);
float dot_q8_0_ref(int64_t n, const void* w, const void* x);
float dot_q4_k_ref(int64_t n, const void* w, const void* x);
float dot_q5_k_ref(int64_t n, const void* w, const void* x);
float dot_q6_k_ref(int64_t n, const void* w, const void* x);

// SIMD matrix kernels; nullptr where that ISA has none for the type (the reference is used).
gemm_fn gemm_kernel_avx2(ggml_type w_type);
gemm_fn gemm_kernel_avx512(ggml_type w_type);
// Kernels of the rows16 layout (rows16.h; W addressed by original row size, groups of 16 rows).
gemm_fn gemm_kernel_rows16_avx2(ggml_type w_type);
gemm_fn gemm_kernel_rows16_avx512(ggml_type w_type);
// SIMD activation quantizers (Q8_0, Q8_K), byte-identical to quant_q8_0 / quant_q8_k; nullptr for
// every other type.
quant_fn quant_kernel_avx2(ggml_type type);
quant_fn quant_kernel_avx512(ggml_type type);

}  // namespace quant
}  // namespace specgen
