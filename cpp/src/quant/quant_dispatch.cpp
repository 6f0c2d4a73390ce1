// The one dispatch point of cpp/src/quant: picks the ISA once (best the CPU and OS allow, or the one
// forced by set_cpu_isa), validates arguments and routes dequantize_row / quantize_row / vec_dot /
// matmul_rows to the per-type kernels. vec_dot is the 1x1 case of the same matrix kernel that
// matmul_rows uses, which is what makes results batch-invariant.
#include <algorithm>
#include <atomic>
#include <string>

#include "common/error.h"
#include "quant/kernels.h"
#include "quant/quant.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define SPECGEN_X86 1
#endif

namespace specgen {

using namespace quant;

namespace {

struct type_ops {
    dequant_fn dequant;
    quant_fn quant;
    dot_fn dot_ref;
};

// Null entries: the type lacks that operation.
type_ops ops_of(ggml_type t) {
    switch (t) {
        case ggml_type::F32: return {dequant_f32, quant_f32, dot_f32_ref};
        case ggml_type::F16: return {dequant_f16, quant_f16, dot_f16_ref};
        case ggml_type::BF16: return {dequant_bf16, quant_bf16, dot_bf16_ref};
        case ggml_type::Q4_0: return {dequant_q4_0, quant_q4_0, dot_q4_0_ref};
        case ggml_type::Q4_1: return {dequant_q4_1, nullptr, dot_q4_1_ref};
        case ggml_type::Q5_0: return {dequant_q5_0, quant_q5_0, dot_q5_0_ref};
        case ggml_type::Q5_1: return {dequant_q5_1, nullptr, dot_q5_1_ref};
        case ggml_type::Q8_0: return {dequant_q8_0, quant_q8_0, dot_q8_0_ref};
        case ggml_type::Q4_K: return {dequant_q4_k, quant_q4_k, dot_q4_k_ref};
        case ggml_type::Q5_K: return {dequant_q5_k, quant_q5_k, dot_q5_k_ref};
        case ggml_type::Q6_K: return {dequant_q6_k, quant_q6_k, dot_q6_k_ref};
        case ggml_type::Q8_K: return {dequant_q8_k, quant_q8_k, nullptr};
        default: return {nullptr, nullptr, nullptr};
    }
}

std::string type_str(ggml_type t) {
    const ggml_type_traits* tr = ggml_traits(static_cast<uint32_t>(t));
    return tr ? tr->name : "type " + std::to_string(static_cast<uint32_t>(t));
}

const ggml_type_traits& checked_traits(ggml_type t, const char* what) {
    const ggml_type_traits* tr = ggml_traits(static_cast<uint32_t>(t));
    if (!tr) throw invalid_argument_error(std::string(what) + ": unknown ggml type " + type_str(t));
    return *tr;
}

void check_n(ggml_type t, int64_t n, const char* what) {
    const ggml_type_traits& tr = checked_traits(t, what);
    if (n < 0 || n % tr.block_size != 0)
        throw invalid_argument_error(std::string(what) + ": n = " + std::to_string(n) + " is not a multiple of " +
                                     type_str(t) + "'s block size " + std::to_string(tr.block_size));
}

bool cpu_can_run(cpu_isa isa) {
    if (isa == cpu_isa::scalar) return true;
#ifdef SPECGEN_X86
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE)) return false;
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    const uint64_t xcr0 = (static_cast<uint64_t>(hi) << 32) | lo;
    const bool ymm_os = (xcr0 & 0x6) == 0x6;     // SSE + AVX state
    const bool zmm_os = (xcr0 & 0xe6) == 0xe6;   // + opmask, ZMM_Hi256, Hi16_ZMM
    __builtin_cpu_init();
    const bool avx2 = ymm_os && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                      (c & bit_F16C) && __builtin_cpu_supports("bmi2");  // clang < 15 lacks "f16c" here
    if (isa == cpu_isa::avx2) return avx2;
    if (isa == cpu_isa::avx512)
        return avx2 && zmm_os && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("avx512vnni");
#endif
    return false;
}

std::atomic<int>& isa_slot() {
    static std::atomic<int> slot{static_cast<int>(best_cpu_isa())};
    return slot;
}

// The matrix kernel of the active ISA for w_type; nullptr means the scalar reference.
gemm_fn active_gemm(ggml_type w_type) {
    switch (static_cast<cpu_isa>(isa_slot().load(std::memory_order_relaxed))) {
        case cpu_isa::avx512: return gemm_kernel_avx512(w_type);
        case cpu_isa::avx2: return gemm_kernel_avx2(w_type);
        default: return nullptr;
    }
}

// The activation quantizer of the active ISA for type; nullptr means the scalar reference. Its
// bytes equal the reference's, so the ISA never changes what the dot kernels see.
quant_fn active_quant(ggml_type type) {
    switch (static_cast<cpu_isa>(isa_slot().load(std::memory_order_relaxed))) {
        case cpu_isa::avx512: return quant_kernel_avx512(type);
        case cpu_isa::avx2: return quant_kernel_avx2(type);
        default: return nullptr;
    }
}

void gemm_ref(dot_fn dot, int64_t n, const void* W, size_t w_stride, int n_rows, const void* X, size_t x_stride,
              int n_tok, float* Y, int64_t y_stride) {
    for (int t = 0; t < n_tok; ++t)
        for (int r = 0; r < n_rows; ++r)
            Y[t * y_stride + r] = dot(n, static_cast<const uint8_t*>(W) + r * w_stride,
                                      static_cast<const uint8_t*>(X) + t * x_stride);
}

}  // namespace

const char* cpu_isa_name(cpu_isa isa) {
    switch (isa) {
        case cpu_isa::scalar: return "scalar";
        case cpu_isa::avx2: return "avx2";
        case cpu_isa::avx512: return "avx512";
    }
    return "unknown";
}

cpu_isa best_cpu_isa() {
    static const cpu_isa best = cpu_can_run(cpu_isa::avx512) ? cpu_isa::avx512
                                : cpu_can_run(cpu_isa::avx2)  ? cpu_isa::avx2
                                                              : cpu_isa::scalar;
    return best;
}

cpu_isa active_cpu_isa() { return static_cast<cpu_isa>(isa_slot().load()); }

void set_cpu_isa(cpu_isa isa) {
    if (static_cast<int>(isa) < 0 || static_cast<int>(isa) > 2)
        throw invalid_argument_error("set_cpu_isa: unknown ISA " + std::to_string(static_cast<int>(isa)));
    if (!cpu_can_run(isa))
        throw invalid_argument_error(std::string("set_cpu_isa: this CPU/OS cannot run ") + cpu_isa_name(isa));
    isa_slot().store(static_cast<int>(isa));
}

void dequantize_row(ggml_type type, const void* src, float* dst, int64_t n) {
    check_n(type, n, "dequantize_row");
    const dequant_fn f = ops_of(type).dequant;
    if (!f) throw not_implemented_error("dequantize_row: " + type_str(type) + " is not supported");
    f(src, dst, n);
}

void quantize_row(ggml_type type, const float* src, void* dst, int64_t n) {
    check_n(type, n, "quantize_row");
    const quant_fn ref = ops_of(type).quant;
    if (!ref) throw not_implemented_error("quantize_row: cannot quantize to " + type_str(type));
    const quant_fn simd = active_quant(type);
    (simd ? simd : ref)(src, dst, n);
}

float vec_dot(ggml_type w_type, int64_t n, const void* w_row, const void* x_row) {
    float y;
    matmul_rows(w_type, w_row, n, x_row, 1, &y, 1, 0, 1);
    return y;
}

void matmul_rows(ggml_type w_type, const void* W, int64_t n_cols, const void* X, int n_tokens, float* Y,
                 int64_t y_stride, int64_t r0, int64_t r1) {
    check_n(w_type, n_cols, "matmul_rows");
    const dot_fn ref = ops_of(w_type).dot_ref;
    if (!ref) throw not_implemented_error("matmul_rows: no dot product for weight type " + type_str(w_type));
    if (r1 <= r0 || n_tokens <= 0) return;
    const size_t w_stride = ggml_row_size(w_type, n_cols);
    const size_t x_stride = ggml_row_size(checked_traits(w_type, "matmul_rows").vec_dot_type, n_cols);
    const void* W0 = static_cast<const uint8_t*>(W) + r0 * w_stride;
    float* Y0 = Y + r0;
    const int64_t n_rows = r1 - r0;
    if (const gemm_fn k = active_gemm(w_type)) {
        // Kernels take an int row count; split huge ranges (does not change any output).
        for (int64_t r = 0; r < n_rows; r += (1 << 30))
            k(n_cols, static_cast<const uint8_t*>(W0) + r * w_stride, w_stride,
              static_cast<int>(std::min<int64_t>(n_rows - r, 1 << 30)), X, x_stride, n_tokens, Y0 + r, y_stride);
    } else {
        for (int64_t r = 0; r < n_rows; r += (1 << 30))
            gemm_ref(ref, n_cols, static_cast<const uint8_t*>(W0) + r * w_stride, w_stride,
                     static_cast<int>(std::min<int64_t>(n_rows - r, 1 << 30)), X, x_stride, n_tokens, Y0 + r,
                     y_stride);
    }
}

}  // namespace specgen
