// specgen._testing's speculation internals: NanoSpecVocab, NanoSpec's in-context vocabulary and gathered
// draft head (speculative/draft_vocab.h) over a loaded Generator's LM head (the engine owns its own sets
// inside the speculators; this object is a separate one over the same weights), top_ids, FR-Spec's
// table reader and Saguaro's reweighting (tests/test_nanospec.py, tests/test_ssd.py).
#include <nanobind/ndarray.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstring>

#include "common/error.h"
#include "engine/generator.h"
#include "speculative/ssd/saguaro.h"
#include "testing_bindings.h"
#include "speculative/frspec_table.h"
#include "speculative/draft_vocab.h"

namespace nb = nanobind;

namespace specgen::testing {

namespace {

using ids_array = nb::ndarray<const int32_t, nb::c_contig, nb::device::cpu>;
using f32_2d = nb::ndarray<const float, nb::ndim<2>, nb::c_contig, nb::device::cpu>;

nb::ndarray<nb::numpy, float, nb::ndim<2>> owned_2d(std::vector<float>&& v, size_t rows, size_t cols) {
    auto* out = new std::vector<float>(std::move(v));
    nb::capsule owner(out, [](void* p) noexcept { delete static_cast<std::vector<float>*>(p); });
    size_t shape[2] = {rows, cols};
    return nb::ndarray<nb::numpy, float, nb::ndim<2>>(out->data(), 2, shape, owner);
}

// A set over the generator's head plus a private evaluator (1 thread) to compute hidden states.
struct py_vocab {
    py_vocab(const generator& g, int32_t capacity, bool frspec, int top_k)
        : m(g.target()), be(make_cpu_backend(1)), eval(m, *be), cache(m.hp(), g.n_ctx()),
          vocab(frspec ? draft_vocab::kind::frspec : draft_vocab::kind::nanospec, m.output(), capacity,
                m.hp().final_softcap, top_k) {}
    const model& m;
    std::unique_ptr<backend> be;
    evaluator eval;
    kv_cache cache;
    draft_vocab vocab;
};

// Rows of k = top_k() ids each.
int64_t topk_rows(const draft_vocab& v, const ids_array& a) {
    if (a.size() % size_t(v.top_k()) != 0)
        throw invalid_argument_error("topk must have " + std::to_string(v.top_k()) + " ids per row");
    return int64_t(a.size()) / v.top_k();
}

}  // namespace

void bind_speculative(nb::module_& m) {
    m.def(
        "saguaro_reweight",
        [](const std::vector<int32_t>& ids, const std::vector<float>& probs, int f, float c) {
            token_dist q{ids, probs}, out;
            saguaro_reweight(q, f, c, out);
            return std::make_pair(out.ids, out.probs);
        },
        nb::arg("ids"), nb::arg("probs"), nb::arg("f"), nb::arg("c"),
        "Saguaro sampling (docs/ALGORITHMS.md section 4.5): weight c on the f most probable tokens, renormalised. "
        "Returns (ids, probs); the C++ function the SSD drafter samples from.");
    m.def("top_ids",
          [](nb::ndarray<const float, nb::ndim<1>, nb::c_contig, nb::device::cpu> logits, int k) {
              if (k < 1 || size_t(k) > logits.shape(0)) throw invalid_argument_error("top_ids: k out of [1, len(logits)]");
              std::vector<int32_t> out(static_cast<size_t>(k));
              top_ids(logits.data(), int64_t(logits.shape(0)), k, out.data());
              return out;
          },
          nb::arg("logits"), nb::arg("k") = 3, "Ids of the k largest logits, best first (ties: lowest id).");
    m.def("read_frspec_table", &read_frspec_table, nb::arg("path"), nb::arg("n_vocab"), nb::arg("n"),
          "The first n ids of an FR-Spec table (tools/build_frspec_table.py), checked.");

    nb::class_<py_vocab>(m, "NanoSpecVocab",
                         "NanoSpec's token set S with its head rows gathered (docs/ALGORITHMS.md section 3).")
        .def(nb::init<const generator&, int32_t, bool, int>(), nb::arg("generator"), nb::arg("capacity") = 3072,
             nb::arg("frspec") = false, nb::arg("top_k") = 3, nb::keep_alive<1, 2>())
        .def("reset", [](py_vocab& v) { v.vocab.reset(); })
        .def("add", [](py_vocab& v, int32_t id) { return v.vocab.add(id); }, nb::arg("id"))
        .def("add_many", [](py_vocab& v, ids_array ids) { return v.vocab.add(ids.data(), int64_t(ids.size())); },
             nb::arg("ids"))
        .def("seed",
             [](py_vocab& v, ids_array prompt, ids_array topk) {
                 v.vocab.seed(prompt.data(), int64_t(prompt.size()), topk.data(), topk_rows(v.vocab, topk));
             },
             nb::arg("prompt"), nb::arg("topk"))
        .def("grow",
             [](py_vocab& v, ids_array topk, ids_array emitted, ids_array drafted) {
                 v.vocab.grow(topk.data(), topk_rows(v.vocab, topk), emitted.data(), int64_t(emitted.size()),
                              drafted.data(), int64_t(drafted.size()));
             },
             nb::arg("topk"), nb::arg("emitted"), nb::arg("drafted"))
        .def_prop_ro("ids", [](const py_vocab& v) { return std::vector<int32_t>(v.vocab.ids(), v.vocab.ids() + v.vocab.size()); })
        .def_prop_ro("size", [](const py_vocab& v) { return v.vocab.size(); })
        .def_prop_ro("capacity", [](const py_vocab& v) { return v.vocab.capacity(); })
        .def_prop_ro("full", [](const py_vocab& v) { return v.vocab.full(); })
        .def("__contains__", [](const py_vocab& v, int32_t id) { return v.vocab.contains(id); })
        .def("gathered",
             [](const py_vocab& v) {
                 const weight_view w = v.vocab.head();
                 return nb::bytes(static_cast<const char*>(w.data), size_t(w.n_rows) * w.row_bytes());
             },
             "W_S as stored: size rows of the head's quantized rows.")
        .def("head_rows",
             [](const py_vocab& v, ids_array ids) {
                 const weight_view& w = v.m.output();
                 std::string out;
                 for (size_t i = 0; i < ids.size(); ++i) {
                     const int32_t id = ids.data()[i];
                     if (id < 0 || id >= w.n_rows) throw invalid_argument_error("token id " + std::to_string(id) + " out of range");
                     out.append(static_cast<const char*>(w.data) + size_t(id) * w.row_bytes(), w.row_bytes());
                 }
                 return nb::bytes(out.data(), out.size());
             },
             nb::arg("ids"), "The full head's rows for `ids`, as stored (reference for gathered()).")
        .def("hidden",
             [](py_vocab& v, const std::vector<int32_t>& tokens) {
                 if (tokens.empty() || int64_t(tokens.size()) > v.cache.n_ctx())
                     throw invalid_argument_error("hidden() needs 1..n_ctx tokens");
                 const int E = v.m.hp().n_embd;
                 {
                     nb::gil_scoped_release nogil;
                     v.eval.forward(v.cache, tokens.data(), int(tokens.size()), 0, v.m.hp().n_layer);
                 }
                 std::vector<float> h(v.eval.hidden(), v.eval.hidden() + tokens.size() * E);
                 return owned_2d(std::move(h), tokens.size(), size_t(E));
             },
             nb::arg("tokens"), "Output-normed final hidden states of `tokens` in a fresh context: [n, n_embd].")
        .def("logits",
             [](py_vocab& v, f32_2d hidden) {
                 if (int64_t(hidden.shape(1)) != v.m.hp().n_embd) throw invalid_argument_error("hidden must be [n, n_embd]");
                 const size_t n = hidden.shape(0);
                 std::vector<float> out(n * size_t(v.vocab.size()));
                 v.vocab.logits(*v.be, hidden.data(), int(n), out.data());
                 return owned_2d(std::move(out), n, size_t(v.vocab.size()));
             },
             nb::arg("hidden"), "Draft logits over S: [n, size], column k for ids[k].");
}

}  // namespace specgen::testing
