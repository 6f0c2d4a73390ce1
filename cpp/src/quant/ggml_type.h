// Tensor element types as numbered in GGUF/ggml, and their block geometry.
#pragma once
#include <cstddef>
#include <cstdint>

namespace specgen {

enum class ggml_type : uint32_t {
    F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
    Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15, I32 = 26, I64 = 27, BF16 = 30,
};

struct ggml_type_traits {
    const char* name;
    int64_t block_size;   // elements per block (1 for float types)
    size_t type_size;     // bytes per block
    bool supported;       // specgen can dequantize and multiply it
    ggml_type vec_dot_type;  // format the activations are quantized to for vec_dot
};

// Returns nullptr for a type number specgen does not know (callers turn that into an error).
const ggml_type_traits* ggml_traits(uint32_t type);
const ggml_type_traits& ggml_traits(ggml_type type);
const char* ggml_type_name(ggml_type type);

// Bytes of a row of n elements; n must be a multiple of the block size.
inline size_t ggml_row_size(ggml_type type, int64_t n) {
    const ggml_type_traits& t = ggml_traits(type);
    return static_cast<size_t>(n / t.block_size) * t.type_size;
}

}  // namespace specgen
