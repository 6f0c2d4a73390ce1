// Row conversion between float and the KV cache types (f32, f16, q8_0): SIMD versions chosen with
// the active CPU ISA (quant.h), each giving the same bits as its scalar reference (tests/cpp/
// test_kv_convert.cpp checks them against each other), so the ISA never changes a cached row.
#pragma once
#include <cstdint>

#include "quant/ggml_type.h"

namespace specgen {
namespace kv {

// dst = src converted to `type`; n elements (a multiple of 32 for Q8_0). F32 copies.
void from_float(ggml_type type, const float* src, void* dst, int64_t n);
// dst = src (in `type`) as floats.
void to_float(ggml_type type, const void* src, float* dst, int64_t n);

// The scalar references (fp32_to_fp16 / fp16_to_fp32 and quant.h's Q8_0 reference, element by element).
void from_float_ref(ggml_type type, const float* src, void* dst, int64_t n);
void to_float_ref(ggml_type type, const void* src, float* dst, int64_t n);

// AVX2 (F16C) and AVX-512 versions (kv_convert_avx2.cpp, kv_convert_avx512.cpp); return false where
// they have none for `type`.
bool from_float_avx2(ggml_type type, const float* src, void* dst, int64_t n);
bool to_float_avx2(ggml_type type, const void* src, float* dst, int64_t n);
bool from_float_avx512(ggml_type type, const float* src, void* dst, int64_t n);
bool to_float_avx512(ggml_type type, const void* src, float* dst, int64_t n);

}  // namespace kv
}  // namespace specgen
