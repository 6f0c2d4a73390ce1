// The nanobind extension `specgen._core` is assembled from one bind_*.cpp file per area. Test-only
// bindings (kernels under a chosen ISA, NanoSpecVocab, BatchEvaluator) are in specgen._testing (tests/native).
#pragma once
#include <nanobind/nanobind.h>

namespace specgen {
struct generation_stats;
}

namespace specgen::python {
// A GenerationStats object (bind_stats.cpp) holding a copy of `s`.
nanobind::object make_stats(const generation_stats& s);
void bind_errors(nanobind::module_& m);
void bind_quant(nanobind::module_& m);
void bind_tokenizer(nanobind::module_& m);
void bind_sampling(nanobind::module_& m);
void bind_verify(nanobind::module_& m);
void bind_engine(nanobind::module_& m);
void bind_params(nanobind::module_& m);
void bind_stats(nanobind::module_& m);
}  // namespace specgen::python
