// Row (de)quantization, for the HF->GGUF converter (specgen._core) and the kernel tests (specgen._testing
// binds it too, so that it runs under that module's set_cpu_isa: tests/native/bind_kernels.cpp). Sizes
// are validated here so a bad buffer raises InvalidParameterError instead of reading out of bounds.
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include <string>

#include "common/error.h"
#include "python/bindings.h"
#include "quant/quant.h"

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
}

}  // namespace specgen::python
