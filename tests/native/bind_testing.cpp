// specgen._testing: native helpers of the test suite, a separate extension so that test-only code stays
// out of the library and of specgen._core: the lossy block rule and the Monte Carlo driver
// (verify_testing.h), the kernels under a chosen ISA (bind_kernels.cpp), NanoSpec's set and other
// speculation internals (bind_speculative.cpp), the batched forward (bind_batch.cpp). It links its own
// copy of the library: objects of specgen._core (a Generator) may be passed in, but state such as the
// kernel ISA is this module's own.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <string>
#include <tuple>

#include "common/error.h"
#include "python/bindings.h"
#include "testing_bindings.h"
#include "verify_testing.h"

namespace nb = nanobind;
using namespace specgen;

using f32_2d = nb::ndarray<const float, nb::ndim<2>, nb::c_contig, nb::device::cpu>;

NB_MODULE(_testing, m) {
    m.doc() = "specgen test helpers (tests/native): not part of the library";
    specgen::python::bind_errors(m);
    specgen::python::bind_quant(m);
    testing::bind_kernels(m);
    testing::bind_speculative(m);
    testing::bind_batch(m);
    testing::bind_eagle3(m);
    m.def(
        "verify_simulate",
        [](const std::string& method, int32_t gamma, f32_2d p_tree, f32_2d q_tree, int64_t n_draws, uint64_t seed) {
            const int32_t v = static_cast<int32_t>(p_tree.shape(1));
            if (q_tree.shape(1) != p_tree.shape(1))
                throw invalid_argument_error("verify_simulate: p_tree and q_tree differ in vocabulary");
            // off(gamma+1) rows of p and off(gamma) rows of q, checked before reading them.
            int64_t off_g = 0, width = 1;
            for (int32_t l = 0; l < gamma; ++l, width *= v) off_g += width;
            if (static_cast<int64_t>(q_tree.shape(0)) != off_g || static_cast<int64_t>(p_tree.shape(0)) != off_g + width)
                throw invalid_argument_error("verify_simulate: p_tree needs " + std::to_string(off_g + width) +
                                             " rows and q_tree " + std::to_string(off_g) + " rows");
            testing::check_method(method);
            testing::verify_simulation sim;
            {
                nb::gil_scoped_release release;
                sim = testing::verify_simulate(method, v, gamma, p_tree.data(), q_tree.data(), n_draws, seed);
            }
            return std::make_tuple(sim.emitted, sim.completed, sim.sum_accepted);
        },
        nb::arg("method"), nb::arg("gamma"), nb::arg("p_tree"), nb::arg("q_tree"), nb::arg("n_draws"), nb::arg("seed"),
        "Monte Carlo of n_draws rounds on a tree model (layout in tests/native/verify_testing.h); method 'token', "
        "'block' or 'block_uncapped' (lossy). Returns (emitted counts [off(g+2)-1], completed counts [V^(g+1)], "
        "sum of n_accepted).");
}
