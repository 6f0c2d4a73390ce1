// specgen._testing is assembled from one bind_*.cpp file per area (tests/native), plus the row
// (de)quantization and the error translation of cpp/src/python, which it compiles again for its own
// copy of the library.
#pragma once
#include <nanobind/nanobind.h>

namespace specgen::testing {
void bind_kernels(nanobind::module_& m);
void bind_speculative(nanobind::module_& m);
void bind_batch(nanobind::module_& m);
void bind_eagle3(nanobind::module_& m);
}  // namespace specgen::testing
