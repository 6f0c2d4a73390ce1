// rows16 layout (rows16.h): packing, the scalar reference of its summation order, and dispatch to
// the SIMD kernel of the active ISA.
#include "quant/rows16.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "common/error.h"
#include "quant/kernels.h"
#include "quant/quant.h"

namespace specgen {

using namespace quant;

namespace {

size_t block_bytes(ggml_type type) {
    switch (type) {
        case ggml_type::Q8_0: return sizeof(block_q8_0);
        case ggml_type::Q5_0: return sizeof(block_q5_0);
        case ggml_type::Q4_0: return sizeof(block_q4_0);
        default: throw invalid_argument_error(std::string("rows16: no packed layout for ") + ggml_traits(type).name);
    }
}

void check_cols(int64_t n_cols) {
    if (n_cols <= 0 || n_cols % QK != 0)
        throw invalid_argument_error("rows16: n_cols = " + std::to_string(n_cols) + " is not a positive multiple of 32");
}

// Lane k of a record: block `blk` of one row (null: a padding row, zeros) in the layout of rows16.h.
void pack_lane(ggml_type type, const uint8_t* blk, int k, uint8_t* rec) {
    const bool q5 = type == ggml_type::Q5_0;
    uint8_t* q = rec + 2 * kRows16 + (q5 ? 64 : 0);
    static const uint8_t zero_block[sizeof(block_q8_0)] = {};
    if (!blk) blk = zero_block;
    std::memcpy(rec + 2 * k, blk, 2);  // each of these types starts with its fp16 scale
    if (type == ggml_type::Q8_0) {
        const int8_t* qs = reinterpret_cast<const block_q8_0*>(blk)->qs;
        for (int j = 0; j < 8; ++j)
            for (int i = 0; i < 4; ++i) q[64 * j + 4 * k + i] = uint8_t(qs[4 * j + i]) ^ 0x80;
        return;
    }
    const uint8_t* qs = q5 ? reinterpret_cast<const block_q5_0*>(blk)->qs : reinterpret_cast<const block_q4_0*>(blk)->qs;
    for (int j = 0; j < 4; ++j) std::memcpy(q + 64 * j + 4 * k, qs + 4 * j, 4);
    if (!q5) return;
    uint32_t qh;
    std::memcpy(&qh, reinterpret_cast<const block_q5_0*>(blk)->qh, 4);
    for (int j = 0; j < 8; ++j) {
        uint64_t m;
        std::memcpy(&m, rec + 2 * kRows16 + 8 * j, 8);
        m = (m & ~(uint64_t(15) << (4 * k))) | uint64_t((qh >> (4 * j)) & 15u) << (4 * k);
        std::memcpy(rec + 2 * kRows16 + 8 * j, &m, 8);
    }
}

// Signed integer weight e of a standard-layout block.
int weight_int(ggml_type type, const uint8_t* blk, int e) {
    if (type == ggml_type::Q8_0) return reinterpret_cast<const block_q8_0*>(blk)->qs[e];
    const uint8_t* qs = type == ggml_type::Q4_0 ? reinterpret_cast<const block_q4_0*>(blk)->qs
                                                : reinterpret_cast<const block_q5_0*>(blk)->qs;
    const int nib = e < 16 ? qs[e] & 15 : qs[e - 16] >> 4;
    if (type == ggml_type::Q4_0) return nib - 8;
    uint32_t qh;
    std::memcpy(&qh, reinterpret_cast<const block_q5_0*>(blk)->qh, 4);
    return (nib | int((qh >> e) & 1u) << 4) - 16;
}

float dot_rows16_order(ggml_type type, int64_t n, const uint8_t* w, const uint8_t* x) {
    const size_t bb = block_bytes(type);
    float acc = 0;
    for (int64_t b = 0; b < n / QK; ++b) {
        const uint8_t* wb = w + b * bb;
        const block_q8_0& xb = reinterpret_cast<const block_q8_0*>(x)[b];
        uint16_t dw;
        std::memcpy(&dw, wb, 2);
        int32_t p = 0;
        for (int e = 0; e < QK; ++e) p += weight_int(type, wb, e) * xb.qs[e];
        acc = std::fmaf(float(p), fp16_to_fp32(dw) * fp16_to_fp32(xb.d), acc);
    }
    return acc;
}

}  // namespace

bool rows16_available(ggml_type type) {
    return active_cpu_isa() == cpu_isa::avx512 && gemm_kernel_rows16_avx512(type) != nullptr;
}

size_t rows16_bytes(ggml_type type, int64_t n_rows, int64_t n_cols) {
    check_cols(n_cols);
    return size_t((n_rows + kRows16 - 1) / kRows16) * kRows16 * size_t(n_cols / QK) * block_bytes(type);
}

void rows16_pack(ggml_type type, const void* W, int64_t n_rows, int64_t n_cols, void* dst, int64_t g0,
                 int64_t g1) {
    check_cols(n_cols);
    const size_t bb = block_bytes(type), row = size_t(n_cols / QK) * bb;
    const uint8_t* src = static_cast<const uint8_t*>(W);
    for (int64_t g = g0; g < g1; ++g) {
        uint8_t* out = static_cast<uint8_t*>(dst) + kRows16 * g * row;
        for (int k = 0; k < kRows16; ++k) {
            const int64_t i = kRows16 * g + k;
            for (int64_t b = 0; b < n_cols / QK; ++b)
                pack_lane(type, i < n_rows ? src + i * row + b * bb : nullptr, k, out + kRows16 * b * bb);
        }
    }
}

bool rows16_has_layout(ggml_type type) {
    return type == ggml_type::Q8_0 || type == ggml_type::Q5_0 || type == ggml_type::Q4_0;
}

void rows16_pack_row(ggml_type type, const void* row, int64_t n_cols, void* dst, int64_t r) {
    check_cols(n_cols);
    const size_t bb = block_bytes(type), row_bytes = size_t(n_cols / QK) * bb;
    uint8_t* out = static_cast<uint8_t*>(dst) + (r / kRows16) * kRows16 * row_bytes;
    for (int64_t b = 0; b < n_cols / QK; ++b)
        pack_lane(type, static_cast<const uint8_t*>(row) + b * bb, int(r % kRows16), out + kRows16 * b * bb);
}

void matmul_rows16(ggml_type type, const void* P, int64_t n_cols, const void* X, int n_tokens, float* Y,
                   int64_t y_stride, int64_t r0, int64_t r1) {
    check_cols(n_cols);
    if (r0 % kRows16 != 0)
        throw invalid_argument_error("matmul_rows16: r0 = " + std::to_string(r0) + " is not a group start");
    const gemm_fn k = active_cpu_isa() == cpu_isa::avx512 ? gemm_kernel_rows16_avx512(type) : nullptr;
    if (!k) throw not_implemented_error("matmul_rows16: no rows16 kernel for this type on this CPU");
    if (r1 <= r0 || n_tokens <= 0) return;
    const size_t ws = size_t(n_cols / QK) * block_bytes(type);
    const size_t xs = ggml_row_size(ggml_type::Q8_0, n_cols);
    for (int64_t r = r0; r < r1; r += (1 << 30))
        k(n_cols, static_cast<const uint8_t*>(P) + r * ws, ws, int(std::min<int64_t>(r1 - r, 1 << 30)), X, xs,
          n_tokens, Y + r, y_stride);
}

void matmul_rows16_ref(ggml_type type, const void* W, int64_t n_cols, const void* X, int n_tokens, float* Y,
                       int64_t y_stride, int64_t r0, int64_t r1) {
    check_cols(n_cols);
    const size_t ws = size_t(n_cols / QK) * block_bytes(type);
    const size_t xs = ggml_row_size(ggml_type::Q8_0, n_cols);
    for (int t = 0; t < n_tokens; ++t)
        for (int64_t r = r0; r < r1; ++r)
            Y[t * y_stride + r] = dot_rows16_order(type, n_cols, static_cast<const uint8_t*>(W) + r * ws,
                                                   static_cast<const uint8_t*>(X) + t * xs);
}

}  // namespace specgen
