// rows4 layout (rows4.h): packing, the scalar reference of its summation order, and dispatch to the
// SIMD kernel of the active ISA.
#include "quant/rows4.h"

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
        default: throw invalid_argument_error(std::string("rows4: no packed layout for ") + ggml_traits(type).name);
    }
}

void check_cols(int64_t n_cols) {
    if (n_cols <= 0 || n_cols % QK != 0)
        throw invalid_argument_error("rows4: n_cols = " + std::to_string(n_cols) + " is not a positive multiple of 32");
}

// One record: block b of rows k = 0..3 (`rows[k]` null for padding rows) in the layout of rows4.h.
void pack_record(ggml_type type, const uint8_t* const rows[4], int64_t b, uint8_t* out) {
    const size_t bb = block_bytes(type);
    std::memset(out, 0, 4 * bb);
    uint16_t* d = reinterpret_cast<uint16_t*>(out);
    for (int k = 0; k < 4; ++k) {
        if (!rows[k]) continue;
        const uint8_t* blk = rows[k] + b * bb;
        std::memcpy(&d[k], blk, 2);  // every one of these types starts with its fp16 scale
        if (type == ggml_type::Q8_0) {
            const block_q8_0& q = *reinterpret_cast<const block_q8_0*>(blk);
            for (int j = 0; j < 16; ++j) {
                out[8 + 16 * k + j] = uint8_t(q.qs[j]) ^ 0x80;
                out[72 + 16 * k + j] = uint8_t(q.qs[16 + j]) ^ 0x80;
            }
        } else if (type == ggml_type::Q4_0) {
            std::memcpy(out + 8 + 16 * k, reinterpret_cast<const block_q4_0*>(blk)->qs, 16);
        } else {
            const block_q5_0& q = *reinterpret_cast<const block_q5_0*>(blk);
            uint32_t qh;
            std::memcpy(&qh, q.qh, 4);
            uint64_t mlo, mhi;
            std::memcpy(&mlo, out + 8, 8);
            std::memcpy(&mhi, out + 16, 8);
            mlo |= uint64_t(qh & 0xffffu) << (16 * k);
            mhi |= uint64_t(qh >> 16) << (16 * k);
            std::memcpy(out + 8, &mlo, 8);
            std::memcpy(out + 16, &mhi, 8);
            std::memcpy(out + 24 + 16 * k, q.qs, 16);
        }
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

float dot_rows4_order(ggml_type type, int64_t n, const uint8_t* w, const uint8_t* x) {
    const size_t bb = block_bytes(type);
    float acc[4] = {0, 0, 0, 0};
    for (int64_t b = 0; b < n / QK; ++b) {
        const uint8_t* wb = w + b * bb;
        const block_q8_0& xb = reinterpret_cast<const block_q8_0*>(x)[b];
        uint16_t dw;
        std::memcpy(&dw, wb, 2);
        const float d = fp16_to_fp32(dw) * fp16_to_fp32(xb.d);
        for (int l = 0; l < 4; ++l) {
            int32_t p = 0;
            for (int e = 4 * l; e < 4 * l + 4; ++e)
                p += weight_int(type, wb, e) * xb.qs[e] + weight_int(type, wb, 16 + e) * xb.qs[16 + e];
            acc[l] = std::fmaf(float(p), d, acc[l]);
        }
    }
    return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

}  // namespace

bool rows4_available(ggml_type type) {
    return active_cpu_isa() == cpu_isa::avx512 && gemm_kernel_rows4_avx512(type) != nullptr;
}

size_t rows4_bytes(ggml_type type, int64_t n_rows, int64_t n_cols) {
    check_cols(n_cols);
    return size_t((n_rows + 3) / 4) * 4 * size_t(n_cols / QK) * block_bytes(type);
}

void rows4_pack(ggml_type type, const void* W, int64_t n_rows, int64_t n_cols, void* dst, int64_t g0, int64_t g1) {
    check_cols(n_cols);
    const size_t bb = block_bytes(type), row = size_t(n_cols / QK) * bb;
    const uint8_t* src = static_cast<const uint8_t*>(W);
    for (int64_t g = g0; g < g1; ++g) {
        const uint8_t* rows[4];
        for (int k = 0; k < 4; ++k) rows[k] = 4 * g + k < n_rows ? src + (4 * g + k) * row : nullptr;
        uint8_t* out = static_cast<uint8_t*>(dst) + 4 * g * row;
        for (int64_t b = 0; b < n_cols / QK; ++b) pack_record(type, rows, b, out + 4 * b * bb);
    }
}

void matmul_rows4(ggml_type type, const void* P, int64_t n_cols, const void* X, int n_tokens, float* Y,
                  int64_t y_stride, int64_t r0, int64_t r1) {
    check_cols(n_cols);
    if (r0 % 4 != 0) throw invalid_argument_error("matmul_rows4: r0 = " + std::to_string(r0) + " is not a group start");
    const gemm_fn k = active_cpu_isa() == cpu_isa::avx512 ? gemm_kernel_rows4_avx512(type) : nullptr;
    if (!k) throw not_implemented_error("matmul_rows4: no rows4 kernel for this type on this CPU");
    if (r1 <= r0 || n_tokens <= 0) return;
    const size_t ws = size_t(n_cols / QK) * block_bytes(type);
    const size_t xs = ggml_row_size(ggml_type::Q8_0, n_cols);
    for (int64_t r = r0; r < r1; r += (1 << 30))
        k(n_cols, static_cast<const uint8_t*>(P) + r * ws, ws, int(std::min<int64_t>(r1 - r, 1 << 30)), X, xs,
          n_tokens, Y + r, y_stride);
}

void matmul_rows4_ref(ggml_type type, const void* W, int64_t n_cols, const void* X, int n_tokens, float* Y,
                      int64_t y_stride, int64_t r0, int64_t r1) {
    check_cols(n_cols);
    const size_t ws = size_t(n_cols / QK) * block_bytes(type);
    const size_t xs = ggml_row_size(ggml_type::Q8_0, n_cols);
    for (int t = 0; t < n_tokens; ++t)
        for (int64_t r = r0; r < r1; ++r)
            Y[t * y_stride + r] = dot_rows4_order(type, n_cols, static_cast<const uint8_t*>(W) + r * ws,
                                                  static_cast<const uint8_t*>(X) + t * xs);
}

}  // namespace specgen
