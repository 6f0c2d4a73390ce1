// specgen._core: the verifiers (speculative/verify/verify.h) and the section 5 bounds.
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <string>
#include <tuple>
#include <vector>

#include "common/error.h"
#include "python/bindings.h"
#include "speculative/bounds.h"
#include "speculative/verify/verify.h"

namespace nb = nanobind;

namespace specgen::python {

using f32_2d = nb::ndarray<const float, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
using i32_1d = nb::ndarray<const int32_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

static verify_method parse_method(const std::string& name) {
    if (name == "token") return verify_method::token;
    if (name == "block") return verify_method::block;
    throw invalid_argument_error("verify method '" + name + "': expected token or block");
}

// Dense probability rows -> sparse token_dists (zero entries are outside the support).
static void rows_to_dists(const f32_2d& rows, std::vector<token_dist>& out) {
    const size_t n = rows.shape(0), v = rows.shape(1);
    out.resize(n);
    for (size_t i = 0; i < n; ++i) {
        out[i].clear();
        for (size_t t = 0; t < v; ++t) {
            const float x = rows.data()[i * v + t];
            if (!(x >= 0.0f))
                throw invalid_argument_error("verify: probability row " + std::to_string(i) +
                                             " has entry " + std::to_string(x));
            if (x > 0.0f) {
                out[i].ids.push_back(static_cast<int32_t>(t));
                out[i].probs.push_back(x);
            }
        }
    }
}

// One draft as the verifier reads it: p [g+1, V] and q [g, V] as sparse rows, shapes checked.
struct dense_draft {
    size_t g;
    std::vector<token_dist> p, q;
};

static dense_draft read_draft(const char* what, const f32_2d& p, const f32_2d& q, const i32_1d& draft) {
    const size_t g = draft.shape(0);
    if (p.shape(0) != g + 1 || q.shape(0) != g || (g > 0 && q.shape(1) != p.shape(1)))
        throw invalid_argument_error(std::string(what) + ": shapes p [" + std::to_string(p.shape(0)) + ", " +
                                     std::to_string(p.shape(1)) + "], q [" + std::to_string(q.shape(0)) +
                                     ", " + std::to_string(q.shape(1)) + "], draft [" +
                                     std::to_string(g) + "]: need p [g+1, V], q [g, V], draft [g]");
    dense_draft d{g, {}, {}};
    rows_to_dists(p, d.p);
    rows_to_dists(q, d.q);
    return d;
}

static std::tuple<int32_t, int32_t, std::vector<std::vector<double>>> verify_dense(
    const std::string& method, f32_2d p, f32_2d q, i32_1d draft, rng& gen, bool with_stats) {
    const dense_draft d = read_draft("verify", p, q, draft);
    verifier ver(static_cast<int32_t>(p.shape(1)));
    std::vector<verify_row_stats> stats;
    const verify_result r = ver.verify(parse_method(method), draft.data(), static_cast<int32_t>(d.g),
                                       d.p.data(), d.q.data(), gen, with_stats ? &stats : nullptr);
    std::vector<std::vector<double>> rows;
    for (const auto& s : stats) rows.push_back({s.entropy, s.entropy_sq, s.alpha});
    return {r.n_accepted, r.next_token, rows};
}

static std::vector<double> verify_reach(const std::string& method, f32_2d p, f32_2d q, i32_1d draft) {
    const dense_draft d = read_draft("verify_reach", p, q, draft);
    verifier ver(static_cast<int32_t>(p.shape(1)));
    std::vector<double> reach;
    ver.acceptance_reach(parse_method(method), draft.data(), static_cast<int32_t>(d.g), d.p.data(), d.q.data(),
                         reach);
    return reach;
}

void bind_verify(nb::module_& m) {
    m.def("verify_dense", &verify_dense, nb::arg("method"), nb::arg("p"), nb::arg("q"), nb::arg("draft"),
          nb::arg("rng"), nb::arg("with_stats") = false,
          "method: 'token' | 'block'. p: float32 [g+1, V], "
          "q: float32 [g, V] (zeros = outside the support), draft: int32 [g]. Returns (n_accepted, "
          "next_token, stats) with stats [[entropy, entropy_sq, alpha], ...] per emitted token when "
          "with_stats.");

    m.def("verify_reach", &verify_reach, nb::arg("method"), nb::arg("p"), nb::arg("q"), nb::arg("draft"),
          "method: 'token' | 'block'; shapes as verify_dense. Returns [g]: P(n_accepted >= i + 1 | draft), "
          "exact over the verifier's coins.");

    m.def("expected_tokens_per_call", &expected_tokens_per_call, nb::arg("alpha"), nb::arg("gamma"));
    m.def("tokens_per_call_limit", &tokens_per_call_limit, nb::arg("alpha"));
    m.def("expected_speedup", &expected_speedup, nb::arg("alpha"), nb::arg("gamma"), nb::arg("cost_ratio"));
    m.def("pankratov_alistarh_bound", &pankratov_alistarh_bound, nb::arg("mu"), nb::arg("mu2"),
          nb::arg("max_verified"));
    m.def("dist_entropy", [](const std::vector<int32_t>& ids, const std::vector<float>& probs) {
        token_dist d{ids, probs};
        double h, h2;
        dist_entropy(d, h, h2);
        return std::make_tuple(h, h2);
    }, nb::arg("ids"), nb::arg("probs"));

    nb::class_<bound_accumulator>(m, "BoundAccumulator")
        .def(nb::init<>())
        .def("add_row", &bound_accumulator::add_row, nb::arg("entropy"), nb::arg("entropy_sq"))
        .def("add_alpha", &bound_accumulator::add_alpha, nb::arg("alpha"))
        .def("merge", &bound_accumulator::merge, nb::arg("other"))
        .def("reset", &bound_accumulator::reset)
        .def_prop_ro("mu", &bound_accumulator::mu)
        .def_prop_ro("mu2", &bound_accumulator::mu2)
        .def_prop_ro("alpha", &bound_accumulator::alpha)
        .def_ro("n_rows", &bound_accumulator::n_rows)
        .def_ro("n_alpha", &bound_accumulator::n_alpha);
}

}  // namespace specgen::python
