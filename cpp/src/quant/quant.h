// Quantized block formats: dequantize, quantize and dot-product kernels.
//
// Every kernel has a scalar reference (*_ref) and SIMD versions (AVX2/FMA, AVX-512) chosen once at
// start-up from what the CPU and OS allow; set_cpu_isa() forces a path so tests can run every version
// the machine supports against the reference.
//
// Matrix products follow ggml: the activations x are first quantized to the weight type's
// vec_dot_type (Q8_0 for Q4_0/Q4_1/Q5_0/Q5_1/Q8_0, Q8_K for the K-quants, F32 for float weights), then
// each output is vec_dot(weight row, x row). Batch invariance: an output's accumulation order never
// depends on how many rows or tokens are computed together.
#pragma once
#include <cstddef>
#include <cstdint>

#include "quant/ggml_type.h"

namespace specgen {

enum class cpu_isa : int { scalar = 0, avx2 = 1, avx512 = 2 };

const char* cpu_isa_name(cpu_isa isa);
cpu_isa best_cpu_isa();    // highest ISA the CPU and OS allow (AVX-512 needs OS-enabled ZMM state)
cpu_isa active_cpu_isa();  // the one in use
// Forces a path (tests, benchmarks). Throws invalid_argument_error if the machine cannot run it.
void set_cpu_isa(cpu_isa isa);

// dst[0..n) = dequantized src; n a multiple of the block size.
void dequantize_row(ggml_type type, const void* src, float* dst, int64_t n);
// Quantizes n floats into `type` (F32, F16, BF16, Q8_0, Q8_K, Q4_0, Q5_0, Q4_K, Q5_K, Q6_K).
// Throws not_implemented_error for other types.
void quantize_row(ggml_type type, const float* src, void* dst, int64_t n);
// Dot product of one weight row of `w_type` with an activation row already in its vec_dot_type.
float vec_dot(ggml_type w_type, int64_t n, const void* w_row, const void* x_row);

// Y[t, r] = vec_dot(W[r], X[t]) for rows r in [r0, r1) and tokens t in [0, n_tokens).
//   W: [n_rows, n_cols] in w_type, rows of ggml_row_size(w_type, n_cols) bytes
//   X: [n_tokens, n_cols] in vec_dot_type(w_type), rows of ggml_row_size(vec_dot_type, n_cols) bytes
//   Y: [n_tokens, y_stride] floats
// Results are bit-identical to calling vec_dot per element (may process several tokens per weight
// load for speed, but never changes the per-output accumulation order).
void matmul_rows(ggml_type w_type, const void* W, int64_t n_cols, const void* X, int n_tokens,
                 float* Y, int64_t y_stride, int64_t r0, int64_t r1);

// fp16 / bf16 scalar conversions (IEEE half, round to nearest even).
float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);
float bf16_to_fp32(uint16_t h);
uint16_t fp32_to_bf16(float f);

}  // namespace specgen
