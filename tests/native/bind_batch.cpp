// specgen._testing.BatchEvaluator: the multi-sequence KV cache (model/kv_cache.h) and the ragged batched
// forward (evaluator::forward_batch) over a loaded Generator's target model, with a private CPU
// backend, for tests and tools (tests/test_batch_forward.py). The engine's scheduler owns its own.
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <tuple>

#include "common/error.h"
#include "engine/generator.h"
#include "model/batch.h"
#include "model/kv_cache.h"
#include "testing_bindings.h"

namespace nb = nanobind;

namespace specgen::testing {

namespace {

struct py_batch_evaluator {
    py_batch_evaluator(const generator& g, int n_seq, int n_ctx, const std::string& type_k, const std::string& type_v,
                       int n_threads)
        : m(g.target()),
          be(make_cpu_backend(n_threads > 0 ? n_threads : g.params().n_threads)),
          eval(m, *be),
          cache(m.hp(), n_ctx > 0 ? n_ctx : g.n_ctx(), n_seq, kv_cache_type_from_name(type_k),
                kv_cache_type_from_name(type_v)) {
        cache.allocate(*be);
    }
    const model& m;
    std::unique_ptr<backend> be;
    evaluator eval;
    kv_cache cache;
    batch b;
    int n_rows = 0;  // rows of the last forward
};

nb::ndarray<nb::numpy, float, nb::ndim<2>> owned_2d(std::vector<float>&& v, size_t rows, size_t cols) {
    auto* out = new std::vector<float>(std::move(v));
    nb::capsule owner(out, [](void* p) noexcept { delete static_cast<std::vector<float>*>(p); });
    size_t shape[2] = {rows, cols};
    return nb::ndarray<nb::numpy, float, nb::ndim<2>>(out->data(), 2, shape, owner);
}

using entry_list = std::vector<std::tuple<int, std::vector<int32_t>, int>>;

}  // namespace

void bind_batch(nb::module_& m) {
    nb::class_<py_batch_evaluator>(
        m, "BatchEvaluator",
        "n_seq sequences over one Generator's target model: a multi-sequence KV cache (types f32 / f16 / "
        "q8_0) and one batched forward per call over a ragged batch of (seq, tokens, pos0) entries.")
        .def(nb::init<const generator&, int, int, const std::string&, const std::string&, int>(), nb::arg("generator"),
             nb::arg("n_seq"), nb::arg("n_ctx") = 0, nb::arg("type_k") = "f32", nb::arg("type_v") = "f32",
             nb::arg("n_threads") = 0, nb::keep_alive<1, 2>(),
             "n_ctx 0: the generator's; n_threads 0: the generator's.")
        .def_prop_ro("n_seq", [](const py_batch_evaluator& e) { return e.cache.n_seq(); })
        .def_prop_ro("n_ctx", [](const py_batch_evaluator& e) { return e.cache.n_ctx(); })
        .def_prop_ro("bytes_per_sequence", [](const py_batch_evaluator& e) { return e.cache.bytes_per_sequence(); })
        .def_prop_ro("kv_bytes", [](const py_batch_evaluator& e) { return e.cache.bytes(); })
        .def("clear", [](py_batch_evaluator& e, int seq) { e.cache.clear(seq); }, nb::arg("seq"))
        .def("copy_prefix", [](py_batch_evaluator& e, int src, int dst, int n) { e.cache.copy_prefix(src, dst, n); },
             nb::arg("src"), nb::arg("dst"), nb::arg("n"))
        .def(
            "forward",
            [](py_batch_evaluator& e, const entry_list& entries) {
                e.b.clear();
                for (const auto& [seq, tokens, pos0] : entries) {
                    if (tokens.empty()) throw invalid_argument_error("forward: every entry needs at least one token");
                    e.b.add(seq, tokens.data(), int(tokens.size()), pos0);
                }
                {
                    nb::gil_scoped_release release;
                    e.eval.forward_batch(e.cache, e.b, e.m.hp().n_layer);
                }
                e.n_rows = e.b.n_rows();
                const int E = e.m.hp().n_embd;
                return owned_2d(std::vector<float>(e.eval.hidden(), e.eval.hidden() + size_t(e.n_rows) * E), e.n_rows, E);
            },
            nb::arg("entries"),
            "One batched forward of [(seq, tokens, pos0), ...]: keys and values go to each sequence's rows "
            "pos0...; returns the output-normed hidden rows [R, n_embd] in the entries' order.")
        .def(
            "logits",
            [](py_batch_evaluator& e, const std::vector<int>& rows) {
                const int E = e.m.hp().n_embd, V = e.m.hp().n_vocab;
                std::vector<float> h(rows.size() * size_t(E)), out(rows.size() * size_t(V));
                for (size_t i = 0; i < rows.size(); ++i) {
                    if (rows[i] < 0 || rows[i] >= e.n_rows)
                        throw invalid_argument_error("logits: row " + std::to_string(rows[i]) + " outside the last forward's " +
                                                     std::to_string(e.n_rows) + " rows");
                    std::copy_n(e.eval.hidden() + size_t(rows[i]) * E, E, h.data() + i * E);
                }
                if (!rows.empty()) {
                    nb::gil_scoped_release release;
                    e.eval.logits(h.data(), int(rows.size()), out.data());
                }
                return owned_2d(std::move(out), rows.size(), V);
            },
            nb::arg("rows"), "Logits [len(rows), n_vocab] of the given rows of the last forward.")
        .def(
            "head",
            [](py_batch_evaluator& e, nb::ndarray<const float, nb::ndim<2>, nb::c_contig, nb::device::cpu> hidden) {
                if (int64_t(hidden.shape(1)) != e.m.hp().n_embd) throw invalid_argument_error("head: hidden must be [n, n_embd]");
                const size_t n = hidden.shape(0), V = size_t(e.m.hp().n_vocab);
                std::vector<float> out(n * V);
                if (n) {
                    nb::gil_scoped_release release;
                    e.eval.logits(hidden.data(), int(n), out.data());
                }
                return owned_2d(std::move(out), n, V);
            },
            nb::arg("hidden"), "Logits [n, n_vocab] of hidden rows [n, n_embd] (e.g. a solo run's).");
}

}  // namespace specgen::testing
