// specgen._core quantization entry points: row (de)quantization for the HF->GGUF converter and
// vec_dot / matmul_rows / ISA selection for tests and benchmarks. Sizes are validated here so a bad
// buffer raises InvalidParameterError instead of reading out of bounds.
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include <string>

#include "common/error.h"
#include "python/bindings.h"
#include "quant/quant.h"
#include "quant/rows16.h"

namespace nb = nanobind;

namespace specgen::python {

namespace {

using f32_vec = nb::ndarray<const float, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using u8_vec = nb::ndarray<const uint8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

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

void bind_quant(nb::module_& m) {
    m.def(
        "quantize_row",
        [](int type, f32_vec x) {
            const ggml_type t = checked_type(type, "quantize_row");
            const int64_t n = static_cast<int64_t>(x.shape(0));
            check_multiple(t, n, "quantize_row");
            const size_t bytes = ggml_row_size(t, n);
            uint8_t* out;
            auto arr = owned_array<uint8_t>(bytes, &out, {bytes});
            {
                nb::gil_scoped_release release;
                quantize_row(t, x.data(), out, n);
            }
            return arr;
        },
        nb::arg("type"), nb::arg("x"), "Quantizes a float32 row into GGUF type `type`; returns the raw bytes.");

    m.def(
        "dequantize_row",
        [](int type, u8_vec data, int64_t n) {
            const ggml_type t = checked_type(type, "dequantize_row");
            check_multiple(t, n, "dequantize_row");
            check_bytes(data.shape(0), ggml_row_size(t, n), "dequantize_row", "data");
            float* out;
            auto arr = owned_array<float>(static_cast<size_t>(n), &out, {static_cast<size_t>(n)});
            {
                nb::gil_scoped_release release;
                dequantize_row(t, data.data(), out, n);
            }
            return arr;
        },
        nb::arg("type"), nb::arg("data"), nb::arg("n"), "Dequantizes n elements of GGUF type `type` to float32.");

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
}

}  // namespace specgen::python
