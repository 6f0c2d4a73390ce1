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

// Elements of one block, a block's bytes in the GGUF layout, and one row's bytes of a block in the
// rows16 layout (a record is kRows16 of them).
bool is_k_quant(ggml_type type) { return type == ggml_type::Q4_K || type == ggml_type::Q5_K || type == ggml_type::Q6_K; }
int64_t block_elems(ggml_type type) { return is_k_quant(type) ? QK_K : QK; }

size_t std_block_bytes(ggml_type type) {
    switch (type) {
        case ggml_type::Q8_0: return sizeof(block_q8_0);
        case ggml_type::Q5_0: return sizeof(block_q5_0);
        case ggml_type::Q4_0: return sizeof(block_q4_0);
        case ggml_type::Q4_K: return sizeof(block_q4_k);
        case ggml_type::Q5_K: return sizeof(block_q5_k);
        case ggml_type::Q6_K: return sizeof(block_q6_k);
        default: throw invalid_argument_error(std::string("rows16: no packed layout for ") + ggml_traits(type).name);
    }
}

size_t lane_bytes(ggml_type type) {
    if (type == ggml_type::Q4_K) return kRows16Q4kRecord / kRows16;
    if (type == ggml_type::Q5_K) return kRows16Q5kRecord / kRows16;
    return std_block_bytes(type);
}

void check_cols(ggml_type type, int64_t n_cols) {
    std_block_bytes(type);  // names an unsupported type first
    if (n_cols <= 0 || n_cols % block_elems(type) != 0)
        throw invalid_argument_error("rows16: n_cols = " + std::to_string(n_cols) + " is not a positive multiple of " +
                                     std::to_string(block_elems(type)));
}

// Lane k of a Q4_K record (rows16.h) from a block's fields: scales and mins unpacked, the mins
// interleaved in pairs. Q5_K records start the same way.
void pack_lane_q4_k_fields(uint16_t d, uint16_t dmin, const uint8_t* scales, const uint8_t* qs, int k, uint8_t* rec) {
    std::memcpy(rec + 2 * k, &d, 2);
    std::memcpy(rec + 32 + 2 * k, &dmin, 2);
    uint8_t sc[8], m[8];
    unpack_k_scales(scales, sc, m);
    for (int s = 0; s < 8; ++s) rec[64 + 16 * s + k] = sc[s];
    for (int i = 0; i < 4; ++i)
        for (int t = 0; t < 2; ++t) rec[192 + 32 * i + 2 * k + t] = m[2 * i + t];
    for (int c = 0; c < 4; ++c)
        for (int j = 0; j < 8; ++j) std::memcpy(rec + 320 + 64 * (8 * c + j) + 4 * k, qs + 32 * c + 4 * j, 4);
}

void pack_lane_q4_k(const uint8_t* blk, int k, uint8_t* rec) {
    static const block_q4_k zero = {};
    const block_q4_k& b = blk ? *reinterpret_cast<const block_q4_k*>(blk) : zero;
    pack_lane_q4_k_fields(b.d, b.dmin, b.scales, b.qs, k, rec);
}

// Lane k of a Q5_K record: the Q4_K record of its nibbles, then the fifth bits as 64-bit masks.
void pack_lane_q5_k(const uint8_t* blk, int k, uint8_t* rec) {
    static const block_q5_k zero = {};
    const block_q5_k& b = blk ? *reinterpret_cast<const block_q5_k*>(blk) : zero;
    pack_lane_q4_k_fields(b.d, b.dmin, b.scales, b.qs, k, rec);
    uint8_t* masks = rec + kRows16Q4kRecord;
    for (int s = 0; s < 8; ++s)
        for (int j = 0; j < 8; ++j) {
            uint64_t m;
            std::memcpy(&m, masks + 8 * (8 * s + j), 8);
            m &= ~(uint64_t(15) << (4 * k));
            for (int i = 0; i < 4; ++i) m |= uint64_t((b.qh[4 * j + i] >> s) & 1) << (4 * k + i);
            std::memcpy(masks + 8 * (8 * s + j), &m, 8);
        }
}

// Lane k of a Q6_K record (rows16.h): the block's 6-bit values regrouped by sub-block, four elements per
// lane; each packed byte is written once (packing runs over every Q6_K matrix at load).
void pack_lane_q6_k(const uint8_t* blk, int k, uint8_t* rec) {
    static const block_q6_k zero = {};
    const block_q6_k& b = blk ? *reinterpret_cast<const block_q6_k*>(blk) : zero;
    std::memcpy(rec + 2 * k, &b.d, 2);
    for (int s = 0; s < 16; ++s) rec[32 + 16 * s + k] = uint8_t(b.scales[s]);
    uint8_t q[QK_K];
    for (int e = 0; e < QK_K; ++e) q[e] = uint8_t(q6_k_value(b, e));
    uint8_t* ql = rec + 288;
    uint8_t* qh = ql + 2048;
    for (int j = 0; j < 4; ++j)
        for (int i = 0; i < 4; ++i) {
            const int e = 4 * j + i;  // the element's place inside its sub-block
            for (int c = 0; c < 8; ++c)
                ql[64 * (4 * c + j) + 4 * k + i] = uint8_t((q[32 * c + e] & 15) | (q[32 * c + 16 + e] & 15) << 4);
            for (int g = 0; g < 4; ++g) {
                int top = 0;
                for (int t = 0; t < 4; ++t) top |= (q[64 * g + 16 * t + e] >> 4) << (2 * t);
                qh[64 * (4 * g + j) + 4 * k + i] = uint8_t(top);
            }
        }
}

// Lane k of a record: block `blk` of one row (null: a padding row, zeros) in the layout of rows16.h.
void pack_lane(ggml_type type, const uint8_t* blk, int k, uint8_t* rec) {
    if (type == ggml_type::Q4_K) return pack_lane_q4_k(blk, k, rec);
    if (type == ggml_type::Q5_K) return pack_lane_q5_k(blk, k, rec);
    if (type == ggml_type::Q6_K) return pack_lane_q6_k(blk, k, rec);
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
    if (type == ggml_type::Q4_0) return q4_value(reinterpret_cast<const block_q4_0*>(blk)->qs, e) - 8;
    const block_q5_0& b = *reinterpret_cast<const block_q5_0*>(blk);
    uint32_t qh;
    std::memcpy(&qh, b.qh, 4);
    return q5_value(b.qs, qh, e) - 16;
}

// Q4_K and Q5_K share the super-block shape (8 sub-blocks of 32, 6-bit scales and mins); only how
// an element's q is stored differs.
template <typename Block, int (*value)(const Block&, int)>
float dot_rows16_order_k_min(int64_t n, const uint8_t* w, const uint8_t* x) {
    float acc = 0;
    for (int64_t b = 0; b < n / QK_K; ++b) {
        const Block& wb = reinterpret_cast<const Block*>(w)[b];
        const block_q8_k& xb = reinterpret_cast<const block_q8_k*>(x)[b];
        uint8_t sc[8], m[8];
        unpack_k_scales(wb.scales, sc, m);
        int32_t isum = 0, msum = 0;
        for (int s = 0; s < 8; ++s) {
            int32_t p = 0;
            for (int l = 0; l < 32; ++l) p += value(wb, 32 * s + l) * xb.qs[32 * s + l];
            isum += int32_t(sc[s]) * p;
            msum += int32_t(m[s]) * (xb.bsums[2 * s] + xb.bsums[2 * s + 1]);
        }
        acc = std::fmaf(float(isum), fp16_to_fp32(wb.d) * xb.d, acc);
        acc = std::fmaf(float(msum), -(fp16_to_fp32(wb.dmin) * xb.d), acc);
    }
    return acc;
}

float dot_rows16_order_q6_k(int64_t n, const uint8_t* w, const uint8_t* x) {
    float acc = 0;
    for (int64_t b = 0; b < n / QK_K; ++b) {
        const block_q6_k& wb = reinterpret_cast<const block_q6_k*>(w)[b];
        const block_q8_k& xb = reinterpret_cast<const block_q8_k*>(x)[b];
        int32_t isum = 0;
        for (int s = 0; s < 16; ++s) {
            int32_t p = 0;
            for (int l = 0; l < 16; ++l) p += (q6_k_value(wb, 16 * s + l) - 32) * xb.qs[16 * s + l];
            isum += int32_t(wb.scales[s]) * p;
        }
        acc = std::fmaf(float(isum), fp16_to_fp32(wb.d) * xb.d, acc);
    }
    return acc;
}

float dot_rows16_order(ggml_type type, int64_t n, const uint8_t* w, const uint8_t* x) {
    if (type == ggml_type::Q4_K) return dot_rows16_order_k_min<block_q4_k, q4_k_value>(n, w, x);
    if (type == ggml_type::Q5_K) return dot_rows16_order_k_min<block_q5_k, q5_k_value>(n, w, x);
    if (type == ggml_type::Q6_K) return dot_rows16_order_q6_k(n, w, x);
    const size_t bb = std_block_bytes(type);
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

// The rows16 kernel of the active ISA for `type`; nullptr when it has none.
gemm_fn rows16_kernel(ggml_type type) {
    switch (active_cpu_isa()) {
        case cpu_isa::avx512: return gemm_kernel_rows16_avx512(type);
        case cpu_isa::avx2: return gemm_kernel_rows16_avx2(type);
        default: return nullptr;
    }
}

}  // namespace

bool rows16_available(ggml_type type) { return rows16_kernel(type) != nullptr; }

bool rows16_has_layout(ggml_type type) {
    return type == ggml_type::Q8_0 || type == ggml_type::Q5_0 || type == ggml_type::Q4_0 || type == ggml_type::Q4_K ||
           type == ggml_type::Q5_K || type == ggml_type::Q6_K;
}

size_t rows16_bytes(ggml_type type, int64_t n_rows, int64_t n_cols) {
    check_cols(type, n_cols);
    return size_t((n_rows + kRows16 - 1) / kRows16) * kRows16 * size_t(n_cols / block_elems(type)) * lane_bytes(type);
}

void rows16_pack(ggml_type type, const void* W, int64_t n_rows, int64_t n_cols, void* dst, int64_t g0,
                 int64_t g1) {
    check_cols(type, n_cols);
    const int64_t nb = n_cols / block_elems(type);
    const size_t bb = std_block_bytes(type), rb = kRows16 * lane_bytes(type);
    const uint8_t* src = static_cast<const uint8_t*>(W);
    for (int64_t g = g0; g < g1; ++g) {
        uint8_t* out = static_cast<uint8_t*>(dst) + g * nb * rb;
        for (int k = 0; k < kRows16; ++k) {
            const int64_t i = kRows16 * g + k;
            for (int64_t b = 0; b < nb; ++b)
                pack_lane(type, i < n_rows ? src + (i * nb + b) * bb : nullptr, k, out + b * rb);
        }
    }
}

void rows16_pack_row(ggml_type type, const void* row, int64_t n_cols, void* dst, int64_t r) {
    check_cols(type, n_cols);
    const int64_t nb = n_cols / block_elems(type);
    const size_t bb = std_block_bytes(type), rb = kRows16 * lane_bytes(type);
    uint8_t* out = static_cast<uint8_t*>(dst) + (r / kRows16) * nb * rb;
    for (int64_t b = 0; b < nb; ++b)
        pack_lane(type, static_cast<const uint8_t*>(row) + b * bb, int(r % kRows16), out + b * rb);
}

void matmul_rows16(ggml_type type, const void* P, int64_t n_cols, const void* X, int n_tokens, float* Y,
                   int64_t y_stride, int64_t r0, int64_t r1) {
    check_cols(type, n_cols);
    if (r0 % kRows16 != 0)
        throw invalid_argument_error("matmul_rows16: r0 = " + std::to_string(r0) + " is not a group start");
    const gemm_fn k = rows16_kernel(type);
    if (!k) throw not_implemented_error("matmul_rows16: no rows16 kernel for this type on this CPU");
    if (r1 <= r0 || n_tokens <= 0) return;
    // ws: one row's share of the packed matrix, so row r0's group starts r0 * ws bytes in.
    const size_t ws = size_t(n_cols / block_elems(type)) * lane_bytes(type);
    const size_t xs = ggml_row_size(ggml_traits(type).vec_dot_type, n_cols);
    for (int64_t r = r0; r < r1; r += (1 << 30))
        k(n_cols, static_cast<const uint8_t*>(P) + r * ws, ws, int(std::min<int64_t>(r1 - r, 1 << 30)), X, xs,
          n_tokens, Y + r, y_stride);
}

void matmul_rows16_ref(ggml_type type, const void* W, int64_t n_cols, const void* X, int n_tokens, float* Y,
                       int64_t y_stride, int64_t r0, int64_t r1) {
    check_cols(type, n_cols);
    const size_t ws = size_t(n_cols / block_elems(type)) * std_block_bytes(type);
    const size_t xs = ggml_row_size(ggml_traits(type).vec_dot_type, n_cols);
    for (int t = 0; t < n_tokens; ++t)
        for (int64_t r = r0; r < r1; ++r)
            Y[t * y_stride + r] = dot_rows16_order(type, n_cols, static_cast<const uint8_t*>(W) + r * ws,
                                                   static_cast<const uint8_t*>(X) + t * xs);
}

}  // namespace specgen
