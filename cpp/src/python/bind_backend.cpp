// Single backend operations on a chosen device, for the kernel tests (tests/test_cuda.py runs
// every weight type through the CPU and CUDA backends on ragged shapes) and for debugging. Each
// call creates the backend, uploads its inputs, runs one op and downloads the result.
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include "backend/backend.h"
#include "common/error.h"
#include "python/bindings.h"

namespace nb = nanobind;

namespace specgen::python {

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

}  // namespace

void bind_backend(nb::module_& m) {
    m.def(
        "backend_matmul",
        [](const std::string& device, int w_type, u8_vec W, int64_t n_rows, int64_t n_cols, f32_vec x, int n_tokens) {
            const weight_view wv = checked_weights(w_type, W, n_rows, n_cols, "backend_matmul");
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
        nb::arg("n_tokens"),
        "backend.matmul on `device`: x is float32 [n_tokens * n_cols]; returns float32 (n_tokens, n_rows).");

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
}

}  // namespace specgen::python
