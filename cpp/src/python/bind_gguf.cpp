#include "python/bindings.h"

namespace nb = nanobind;

namespace specgen::python {
void bind_gguf(nb::module_& m) {}
}  // namespace specgen::python
