// specgen._core: Rng, SamplingParams, process_logits, sample_token (cpp/src/sampling).
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/vector.h>

#include <optional>
#include <string>

#include "common/error.h"
#include "python/bindings.h"
#include "sampling/sampling.h"

namespace nb = nanobind;

namespace specgen::python {

using f32_1d = nb::ndarray<const float, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using i32_1d = nb::ndarray<const int32_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

void bind_sampling(nb::module_& m) {
    nb::class_<rng>(m, "Rng",
                    "Portable seeded RNG (xoshiro256** seeded by splitmix64): one seed gives the same "
                    "stream on every platform.")
        .def(nb::init<uint64_t>(), nb::arg("seed") = 0)
        .def("reseed", &rng::reseed, nb::arg("seed"))
        .def("next_u64", &rng::next_u64, "Next 64 random bits.")
        .def("uniform", &rng::uniform, "Uniform float in [0, 1).")
        .def_prop_ro("seed", &rng::seed);

    nb::class_<sampling_params>(m, "SamplingParams",
                                "Logits processors: repeat penalty -> temperature (0 = greedy) -> "
                                "top-k -> top-p -> min-p.")
        .def(nb::init<>())
        .def_rw("temperature", &sampling_params::temperature)
        .def_rw("top_k", &sampling_params::top_k)
        .def_rw("top_p", &sampling_params::top_p)
        .def_rw("min_p", &sampling_params::min_p)
        .def_rw("repeat_penalty", &sampling_params::repeat_penalty)
        .def_rw("repeat_last_n", &sampling_params::repeat_last_n)
        .def("validate", &sampling_params::validate,
             "Raises InvalidParameterError naming the first field outside its domain.")
        .def_prop_ro("greedy", &sampling_params::greedy);

    m.def(
        "process_logits",
        [](f32_1d logits, const sampling_params& params, std::optional<i32_1d> history,
           std::optional<i32_1d> ids) {
            const int32_t n = static_cast<int32_t>(logits.shape(0));
            if (ids && ids->shape(0) != logits.shape(0))
                throw invalid_argument_error("process_logits: ids has " + std::to_string(ids->shape(0)) +
                                             " entries for " + std::to_string(n) + " logits");
            params.validate();
            logits_processor proc;
            token_dist out;
            proc.process(logits.data(), ids ? ids->data() : nullptr, n, params,
                         history ? history->data() : nullptr, history ? history->shape(0) : 0, out);
            return std::make_pair(out.ids, out.probs);
        },
        nb::arg("logits"), nb::arg("params"), nb::arg("history") = nb::none(), nb::arg("ids") = nb::none(),
        "logits: float32 [n] (ids 0..n-1, or `ids`: int32 [n]); history: int32 [*] previous tokens. "
        "Returns (ids, probs) of the sparse distribution.");

    m.def(
        "sample_token",
        [](const std::vector<int32_t>& ids, const std::vector<float>& probs, rng& gen) {
            if (ids.size() != probs.size())
                throw invalid_argument_error("sample_token: ids and probs differ in length");
            token_dist d{ids, probs};
            return sample_token(d, gen);
        },
        nb::arg("ids"), nb::arg("probs"), nb::arg("rng"));
}

}  // namespace specgen::python
