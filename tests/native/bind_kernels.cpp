// specgen._testing's kernels: the kernel ISA (set_cpu_isa: scalar, avx2, avx512), weight-row dot
// products and matmuls in the GGUF and rows16 layouts (tests/test_quant.py, tools/bench_quant.py,
// tools/bench_matmul.py), the element-wise kernels (vec_*: tests/test_vec_math.py), and single backend
// operations on a chosen device (backend_*: tests/test_cuda.py runs every weight type through the CPU
// and CUDA backends on ragged shapes). Each backend_* call creates the backend, uploads its inputs, runs
// one op and downloads the result.
//
// _testing links its own copy of the library: set_cpu_isa() selects the kernels of this module's calls
// (quantize_row and dequantize_row are bound here too for that), never specgen._core's.
#include <nanobind/ndarray.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>

#include <algorithm>
#include <vector>
#include <string>

#include "backend/backend.h"
#include "backend/vec_math.h"
#include "common/error.h"
#include "quant/quant.h"
#include "quant/rows16.h"
#include "testing_bindings.h"

namespace nb = nanobind;

namespace specgen::testing {

namespace {

using f32_vec = nb::ndarray<const float, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using i32_vec = nb::ndarray<const int32_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using u8_vec = nb::ndarray<const uint8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

weight_view checked_weights(int type, const u8_vec& W, int64_t n_rows, int64_t n_cols, const char* what) {
    const ggml_type_traits* tr = type >= 0 ? ggml_traits(uint32_t(type)) : nullptr;
    if (!tr || !tr->supported) throw invalid_argument_error(std::string(what) + ": unsupported ggml type " + std::to_string(type));
    if (n_rows < 1 || n_cols < 1 || n_cols % tr->block_size != 0)
        throw invalid_argument_error(std::string(what) + ": bad shape [" + std::to_string(n_rows) + ", " + std::to_string(n_cols) + "]");
    const ggml_type t = static_cast<ggml_type>(type);
    if (W.shape(0) != size_t(n_rows) * ggml_row_size(t, n_cols))
        throw invalid_argument_error(std::string(what) + ": W has " + std::to_string(W.shape(0)) + " bytes, expected " +
                                     std::to_string(size_t(n_rows) * ggml_row_size(t, n_cols)));
    return weight_view{t, n_rows, n_cols, W.data()};
}

nb::ndarray<nb::numpy, float> owned(size_t rows, size_t cols, float** data) {
    float* p = new float[rows * cols];
    nb::capsule owner(p, [](void* q) noexcept { delete[] static_cast<float*>(q); });
    *data = p;
    return nb::ndarray<nb::numpy, float>(p, {rows, cols}, owner);
}

nb::ndarray<nb::numpy, float> owned_vec(size_t n, float** data) {
    float* p = new float[n ? n : 1];
    nb::capsule owner(p, [](void* q) noexcept { delete[] static_cast<float*>(q); });
    *data = p;
    return nb::ndarray<nb::numpy, float>(p, {n}, owner);
}

// A new float32 vector holding a copy of x, for the kernels that work in place.
nb::ndarray<nb::numpy, float> owned_copy(f32_vec x, float** data) {
    auto arr = owned_vec(x.shape(0), data);
    std::copy(x.data(), x.data() + x.shape(0), *data);
    return arr;
}

// y = f(x) over a float32 vector with a vec_math.h row kernel of the active ISA.
template <void (*F)(const float*, int64_t, float*)>
nb::ndarray<nb::numpy, float> vec_map(f32_vec x) {
    float* y;
    auto arr = owned_vec(x.shape(0), &y);
    F(x.data(), int64_t(x.shape(0)), y);
    return arr;
}

template <void (*F)(const float*, const float*, int64_t, float*)>
nb::ndarray<nb::numpy, float> vec_map_mul(f32_vec gate, f32_vec up) {
    if (gate.shape(0) != up.shape(0)) throw invalid_argument_error("gate and up must have the same length");
    float* y;
    auto arr = owned_vec(gate.shape(0), &y);
    F(gate.data(), up.data(), int64_t(gate.shape(0)), y);
    return arr;
}

ggml_type checked_type(int type, const char* what) {
    if (type < 0 || !ggml_traits(static_cast<uint32_t>(type)))
        throw invalid_argument_error(std::string(what) + ": unknown ggml type " + std::to_string(type));
    return static_cast<ggml_type>(type);
}

int64_t block_size(ggml_type t) { return ggml_traits(t).block_size; }

void check_multiple(ggml_type t, int64_t n, const char* what) {
    if (n < 0 || n % block_size(t) != 0)
        throw invalid_argument_error(std::string(what) + ": n = " + std::to_string(n) + " is not a multiple of " +
                                     ggml_type_name(t) + "'s block size " + std::to_string(block_size(t)));
}

void check_bytes(size_t have, size_t want, const char* what, const char* name) {
    if (have != want)
        throw invalid_argument_error(std::string(what) + ": " + name + " has " + std::to_string(have) +
                                     " bytes, expected " + std::to_string(want));
}

template <typename T>
nb::ndarray<nb::numpy, T> owned_array(size_t n, T** data, std::initializer_list<size_t> shape) {
    T* p = new T[n];
    nb::capsule owner(p, [](void* q) noexcept { delete[] static_cast<T*>(q); });
    *data = p;
    return nb::ndarray<nb::numpy, T>(p, shape, owner);
}

cpu_isa isa_from_name(const std::string& name) {
    if (name == "scalar") return cpu_isa::scalar;
    if (name == "avx2") return cpu_isa::avx2;
    if (name == "avx512") return cpu_isa::avx512;
    throw invalid_argument_error("set_cpu_isa: unknown ISA '" + name + "' (scalar, avx2 or avx512)");
}

}  // namespace

void bind_kernels(nb::module_& m) {
    m.def(
        "vec_dot",
        [](int w_type, int64_t n, u8_vec w, u8_vec x) {
            const ggml_type t = checked_type(w_type, "vec_dot");
            check_multiple(t, n, "vec_dot");
            check_bytes(w.shape(0), ggml_row_size(t, n), "vec_dot", "w");
            check_bytes(x.shape(0), ggml_row_size(ggml_traits(t).vec_dot_type, n), "vec_dot", "x");
            return vec_dot(t, n, w.data(), x.data());
        },
        nb::arg("w_type"), nb::arg("n"), nb::arg("w"), nb::arg("x"),
        "Dot product of a weight row with an activation row already in the weight type's vec_dot_type.");

    m.def(
        "matmul_rows",
        [](int w_type, u8_vec W, int64_t n_rows, int64_t n_cols, u8_vec X, int64_t n_tokens) {
            const ggml_type t = checked_type(w_type, "matmul_rows");
            check_multiple(t, n_cols, "matmul_rows");
            if (n_rows < 0 || n_tokens < 0 || n_tokens > (1 << 30))
                throw invalid_argument_error("matmul_rows: negative or huge n_rows / n_tokens");
            check_bytes(W.shape(0), n_rows * ggml_row_size(t, n_cols), "matmul_rows", "W");
            check_bytes(X.shape(0), n_tokens * ggml_row_size(ggml_traits(t).vec_dot_type, n_cols), "matmul_rows",
                        "X");
            float* out;
            auto arr = owned_array<float>(static_cast<size_t>(n_tokens * n_rows), &out,
                                          {static_cast<size_t>(n_tokens), static_cast<size_t>(n_rows)});
            {
                nb::gil_scoped_release release;
                matmul_rows(t, W.data(), n_cols, X.data(), static_cast<int>(n_tokens), out, n_rows, 0, n_rows);
            }
            return arr;
        },
        nb::arg("w_type"), nb::arg("W"), nb::arg("n_rows"), nb::arg("n_cols"), nb::arg("X"), nb::arg("n_tokens"),
        "Y[t, r] = vec_dot(W[r], X[t]); returns float32 of shape (n_tokens, n_rows).");

    // The rows16 layout (quant/rows16.h), for tests and kernel benchmarks.
    m.def("rows16_available", [](int type) { return rows16_available(checked_type(type, "rows16_available")); },
          nb::arg("type"), "Whether the active ISA has a rows16 kernel for GGUF type `type`.");
    m.def(
        "rows16_pack",
        [](int type, u8_vec W, int64_t n_rows, int64_t n_cols) {
            const ggml_type t = checked_type(type, "rows16_pack");
            if (n_rows < 0) throw invalid_argument_error("rows16_pack: negative n_rows");
            check_multiple(t, n_cols, "rows16_pack");
            check_bytes(W.shape(0), n_rows * ggml_row_size(t, n_cols), "rows16_pack", "W");
            const size_t bytes = rows16_bytes(t, n_rows, n_cols);
            uint8_t* out;
            auto arr = owned_array<uint8_t>(bytes, &out, {bytes});
            {
                nb::gil_scoped_release release;
                rows16_pack(t, W.data(), n_rows, n_cols, out, 0, (n_rows + kRows16 - 1) / kRows16);
            }
            return arr;
        },
        nb::arg("type"), nb::arg("W"), nb::arg("n_rows"), nb::arg("n_cols"),
        "Packs a [n_rows, n_cols] matrix of type `type` into the rows16 layout; returns the bytes.");
    for (const bool packed : {true, false}) {
        m.def(
            packed ? "matmul_rows16" : "matmul_rows16_ref",
            [packed](int w_type, u8_vec W, int64_t n_rows, int64_t n_cols, u8_vec X, int64_t n_tokens) {
                const char* what = packed ? "matmul_rows16" : "matmul_rows16_ref";
                const ggml_type t = checked_type(w_type, what);
                check_multiple(t, n_cols, what);
                if (n_rows < 0 || n_tokens < 0 || n_tokens > (1 << 30))
                    throw invalid_argument_error(std::string(what) + ": negative or huge n_rows / n_tokens");
                check_bytes(W.shape(0), packed ? rows16_bytes(t, n_rows, n_cols) : n_rows * ggml_row_size(t, n_cols),
                            what, "W");
                check_bytes(X.shape(0), n_tokens * ggml_row_size(ggml_traits(t).vec_dot_type, n_cols), what, "X");
                float* out;
                auto arr = owned_array<float>(static_cast<size_t>(n_tokens * n_rows), &out,
                                              {static_cast<size_t>(n_tokens), static_cast<size_t>(n_rows)});
                {
                    nb::gil_scoped_release release;
                    (packed ? matmul_rows16 : matmul_rows16_ref)(t, W.data(), n_cols, X.data(), int(n_tokens), out,
                                                               n_rows, 0, n_rows);
                }
                return arr;
            },
            nb::arg("w_type"), nb::arg("W"), nb::arg("n_rows"), nb::arg("n_cols"), nb::arg("X"), nb::arg("n_tokens"),
            packed ? "Y[t, r] of a rows16-packed matrix (rows16_pack); float32 of shape (n_tokens, n_rows)."
                   : "The rows16 summation order in scalar code, from the standard layout.");
    }

    m.def("set_cpu_isa", [](const std::string& name) { set_cpu_isa(isa_from_name(name)); }, nb::arg("name"),
          "Forces the kernel ISA: 'scalar', 'avx2' or 'avx512'. Raises if this machine cannot run it.");
    m.def("best_cpu_isa", [] { return std::string(cpu_isa_name(best_cpu_isa())); });
    m.def("active_cpu_isa", [] { return std::string(cpu_isa_name(active_cpu_isa())); });
    m.def(
        "backend_matmul",
        [](const std::string& device, int w_type, u8_vec W, int64_t n_rows, int64_t n_cols, f32_vec x, int n_tokens,
           bool repack) {
            weight_view wv = checked_weights(w_type, W, n_rows, n_cols, "backend_matmul");
            weight_repack slot;  // as a model's matrices have: the backend may keep its own layout
            if (repack) wv.repack = &slot;
            if (n_tokens < 1 || x.shape(0) != size_t(n_tokens) * size_t(n_cols))
                throw invalid_argument_error("backend_matmul: x must hold n_tokens * n_cols floats");
            float* out;
            auto arr = owned(size_t(n_tokens), size_t(n_rows), &out);
            {
                nb::gil_scoped_release release;
                auto be = make_backend(device, 1);
                backend_buffer<float> xd(*be), yd(*be);  // destroyed before the backend
                xd.reserve(x.shape(0));
                yd.reserve(size_t(n_tokens) * n_rows);
                be->upload(xd.data(), x.data(), x.shape(0) * sizeof(float));
                be->matmul(wv, xd.data(), n_tokens, yd.data());
                be->download(out, yd.data(), size_t(n_tokens) * n_rows * sizeof(float));
            }
            return arr;
        },
        nb::arg("device"), nb::arg("w_type"), nb::arg("W"), nb::arg("n_rows"), nb::arg("n_cols"), nb::arg("x"),
        nb::arg("n_tokens"), nb::arg("repack") = false,
        "backend.matmul on `device`: x is float32 [n_tokens * n_cols]; returns float32 (n_tokens, n_rows). "
        "repack: W comes with a weight_repack slot, as a model's matrices do.");

    m.def(
        "backend_matmul_selected",
        [](const std::string& device, int w_type, u8_vec W, int64_t n_rows, int64_t n_cols, f32_vec x, int n_tokens,
           i32_vec rows, bool repack) {
            weight_view wv = checked_weights(w_type, W, n_rows, n_cols, "backend_matmul_selected");
            weight_repack slot;
            if (repack) wv.repack = &slot;
            if (n_tokens < 1 || x.shape(0) != size_t(n_tokens) * size_t(n_cols))
                throw invalid_argument_error("backend_matmul_selected: x must hold n_tokens * n_cols floats");
            const int64_t n_sel = int64_t(rows.shape(0));
            for (int64_t k = 0; k < n_sel; ++k)
                if (rows.data()[k] < 0 || rows.data()[k] >= n_rows)
                    throw invalid_argument_error("backend_matmul_selected: row " + std::to_string(rows.data()[k]) +
                                                 " out of range");
            float* out;
            auto arr = owned(size_t(n_tokens), size_t(n_sel), &out);
            {
                nb::gil_scoped_release release;
                auto be = make_backend(device, 1);
                backend_buffer<float> xd(*be), yd(*be);
                xd.reserve(x.shape(0));
                yd.reserve(size_t(n_tokens) * n_sel);
                be->upload(xd.data(), x.data(), x.shape(0) * sizeof(float));
                be->matmul_selected(wv, rows.data(), n_sel, xd.data(), n_tokens, yd.data());
                be->download(out, yd.data(), size_t(n_tokens) * n_sel * sizeof(float));
            }
            return arr;
        },
        nb::arg("device"), nb::arg("w_type"), nb::arg("W"), nb::arg("n_rows"), nb::arg("n_cols"), nb::arg("x"),
        nb::arg("n_tokens"), nb::arg("rows"), nb::arg("repack") = false,
        "backend.matmul_selected on `device`: the outputs of the listed rows; float32 (n_tokens, len(rows)).");

    m.def(
        "backend_get_rows",
        [](const std::string& device, int w_type, u8_vec W, int64_t n_rows, int64_t n_cols, i32_vec ids) {
            const weight_view wv = checked_weights(w_type, W, n_rows, n_cols, "backend_get_rows");
            const int n = int(ids.shape(0));
            if (n < 1) throw invalid_argument_error("backend_get_rows: needs at least one id");
            float* out;
            auto arr = owned(size_t(n), size_t(n_cols), &out);
            {
                nb::gil_scoped_release release;
                auto be = make_backend(device, 1);
                backend_buffer<float> yd(*be);
                yd.reserve(size_t(n) * n_cols);
                be->get_rows(wv, ids.data(), n, yd.data());
                be->download(out, yd.data(), size_t(n) * n_cols * sizeof(float));
            }
            return arr;
        },
        nb::arg("device"), nb::arg("w_type"), nb::arg("W"), nb::arg("n_rows"), nb::arg("n_cols"), nb::arg("ids"),
        "backend.get_rows on `device`; returns float32 (len(ids), n_cols).");

    // The element-wise math of the CPU backend (backend/vec_math.h), on the ISA set_cpu_isa chose.
    m.def("vec_exp", &vec_map<vec::exp_row>, nb::arg("x"), "exp_approx of each element (float32).");
    m.def("vec_tanh", &vec_map<vec::tanh_row>, nb::arg("x"), "tanh_approx of each element (float32).");
    m.def("vec_gelu_mul", &vec_map_mul<vec::gelu_mul>, nb::arg("gate"), nb::arg("up"),
          "gelu_tanh(gate) * up as the CPU backend computes it (float32).");
    m.def("vec_silu_mul", &vec_map_mul<vec::silu_mul>, nb::arg("gate"), nb::arg("up"),
          "silu(gate) * up as the CPU backend computes it (float32).");
    m.def(
        "vec_exp_sub_sum",
        [](f32_vec x, float sub) {
            float* y;
            auto arr = owned_copy(x, &y);
            const float s = vec::exp_sub_sum(y, int64_t(x.shape(0)), sub);
            return std::make_pair(arr, s);
        },
        nb::arg("x"), nb::arg("sub"),
        "The attention softmax step: (exp_approx(x - sub), its sum in the kernel's fixed order).");
    m.def(
        "vec_dot_rows",
        [](f32_vec q, f32_vec K, int n_keys) {
            const int64_t n = int64_t(q.shape(0));
            if (n_keys < 0 || int64_t(K.shape(0)) != n_keys * n)
                throw invalid_argument_error("vec_dot_rows: K must hold n_keys rows of len(q) floats");
            float* out;
            auto arr = owned_vec(size_t(n_keys), &out);
            vec::dot_rows(q.data(), K.data(), n, n_keys, n, out);
            return arr;
        },
        nb::arg("q"), nb::arg("K"), nb::arg("n_keys"),
        "Attention scores: dot(q, row j of K) for j < n_keys in the kernel's fixed order (float32).");
    m.def(
        "vec_weighted_sum_rows",
        [](f32_vec w, f32_vec V, int64_t n) {
            const int n_rows = int(w.shape(0));
            if (n < 0 || int64_t(V.shape(0)) != n_rows * n)
                throw invalid_argument_error("vec_weighted_sum_rows: V must hold len(w) rows of n floats");
            float* out;
            auto arr = owned_vec(size_t(n), &out);
            vec::weighted_sum_rows(w.data(), V.data(), n, n_rows, n, out);
            return arr;
        },
        nb::arg("w"), nb::arg("V"), nb::arg("n"),
        "Attention's value sum: sum_j w[j] * V[j] in row order (float32, n columns).");
    m.def(
        "vec_weighted_sum_rows_add",
        [](f32_vec w, f32_vec V, f32_vec o) {
            const int n_rows = int(w.shape(0));
            const int64_t n = int64_t(o.shape(0));
            if (int64_t(V.shape(0)) != n_rows * n)
                throw invalid_argument_error("vec_weighted_sum_rows_add: V must hold len(w) rows of len(o) floats");
            float* out;
            auto arr = owned_vec(size_t(n), &out);
            std::copy(o.data(), o.data() + n, out);
            vec::weighted_sum_rows_add(w.data(), V.data(), n, n_rows, n, out);
            return arr;
        },
        nb::arg("w"), nb::arg("V"), nb::arg("o"),
        "The value sum continued from o: o + w[0] * V[0] + w[1] * V[1] ... in row order (float32).");
    m.def(
        "vec_dot_rows_multi",
        [](f32_vec Q, int n_q, f32_vec K, int n_keys) {
            const int64_t n = n_q > 0 ? int64_t(Q.shape(0)) / n_q : 0;
            if (n_q < 1 || n_keys < 0 || int64_t(Q.shape(0)) != n_q * n || int64_t(K.shape(0)) != n_keys * n)
                throw invalid_argument_error("vec_dot_rows_multi: Q must hold n_q rows and K n_keys rows of the same length");
            float* out;
            auto arr = owned_vec(size_t(n_q) * size_t(n_keys), &out);
            std::vector<const float*> qs(static_cast<size_t>(n_q));
            std::vector<float*> outs(static_cast<size_t>(n_q));
            for (int i = 0; i < n_q; ++i) qs[size_t(i)] = Q.data() + i * n, outs[size_t(i)] = out + int64_t(i) * n_keys;
            vec::dot_rows_multi(qs.data(), n_q, K.data(), n, n_keys, n, outs.data());
            return arr;
        },
        nb::arg("Q"), nb::arg("n_q"), nb::arg("K"), nb::arg("n_keys"),
        "dot_rows for n_q queries (rows of Q) over the same keys: [n_q * n_keys] scores, query-major.");
    m.def(
        "vec_weighted_sum_rows_add_multi",
        [](f32_vec W, int n_o, f32_vec V, f32_vec O) {
            const int64_t n = n_o > 0 ? int64_t(O.shape(0)) / n_o : 0;
            const int n_rows = n_o > 0 ? int(W.shape(0) / size_t(n_o)) : 0;
            if (n_o < 1 || int64_t(O.shape(0)) != n_o * n || int64_t(W.shape(0)) != int64_t(n_o) * n_rows ||
                int64_t(V.shape(0)) != n_rows * n)
                throw invalid_argument_error("vec_weighted_sum_rows_add_multi: W [n_o, n_rows], V [n_rows, n], O [n_o, n]");
            float* out;
            auto arr = owned_vec(size_t(O.shape(0)), &out);
            std::copy(O.data(), O.data() + O.shape(0), out);
            std::vector<const float*> ws(static_cast<size_t>(n_o));
            std::vector<float*> os(static_cast<size_t>(n_o));
            for (int i = 0; i < n_o; ++i) ws[size_t(i)] = W.data() + int64_t(i) * n_rows, os[size_t(i)] = out + i * n;
            vec::weighted_sum_rows_add_multi(ws.data(), n_o, V.data(), n, n_rows, n, os.data());
            return arr;
        },
        nb::arg("W"), nb::arg("n_o"), nb::arg("V"), nb::arg("O"),
        "weighted_sum_rows_add for n_o outputs (rows of O, weights rows of W) over the same rows of V.");
    m.def(
        "vec_argmax_finite",
        [](f32_vec x) {
            if (x.shape(0) == 0) throw invalid_argument_error("vec_argmax_finite: empty row");
            return vec::argmax_finite(x.data(), int64_t(x.shape(0)));
        },
        nb::arg("x"), "Index of the first maximum, or -1 when x holds a NaN or +inf.");
    m.def(
        "vec_softcap",
        [](f32_vec x, float c) {
            float* y;
            auto arr = owned_copy(x, &y);
            vec::softcap_row(y, int64_t(x.shape(0)), c);
            return arr;
        },
        nb::arg("x"), nb::arg("c"), "Logit soft-capping c * tanh(x / c) as every logits path applies it.");
}

}  // namespace specgen::testing
