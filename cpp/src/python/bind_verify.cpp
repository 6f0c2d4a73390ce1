#include "python/bindings.h"

namespace nb = nanobind;

namespace specgen::python {
void bind_verify(nb::module_& m) {}
}  // namespace specgen::python
