// specgen._testing's EAGLE-3 internals (tests/test_eagle3.py): a head loaded for a Generator's target
// (speculative/drafters/eagle3_head.h) with its own KV cache and CPU backend, the target layers' inputs
// as the target's evaluator captures them, and the head's fc and decoder layer, so that a reference
// implementation can be compared with them row by row.
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <memory>
#include <tuple>

#include "common/error.h"
#include "engine/generator.h"
#include "model/model.h"
#include "speculative/draft_vocab.h"
#include "speculative/drafters/eagle3_head.h"
#include "testing_bindings.h"

namespace nb = nanobind;

namespace specgen::testing {

namespace {

using ids_1d = nb::ndarray<const int32_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using f32_2d = nb::ndarray<const float, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
using out_2d = nb::ndarray<nb::numpy, float, nb::ndim<2>>;

out_2d owned(std::vector<float>&& v, size_t rows, size_t cols) {
    auto* out = new std::vector<float>(std::move(v));
    nb::capsule owner(out, [](void* p) noexcept { delete static_cast<std::vector<float>*>(p); });
    size_t shape[2] = {rows, cols};
    return out_2d(out->data(), 2, shape, owner);
}

struct py_eagle3 {
    py_eagle3(const generator& g, const std::string& path)
        : m(g.target()), head(load_eagle3_head(path, m)), be(make_cpu_backend(1)), target_eval(m, *be),
          eval(*head, *be), cache(head->hp, g.n_ctx()) {}
    const model& m;
    std::shared_ptr<const eagle3_head> head;
    std::unique_ptr<backend> be;
    evaluator target_eval;
    eagle3_evaluator eval;
    kv_cache cache;
    int last_n = 0;  // rows of the last forward()
};

}  // namespace

void bind_eagle3(nb::module_& m) {
    nb::class_<py_eagle3>(m, "Eagle3Head", "An EAGLE-3 head over a Generator's target, run on its own KV cache.")
        .def(nb::init<const generator&, const std::string&>(), nb::arg("generator"), nb::arg("path"),
             nb::keep_alive<1, 2>())
        .def_prop_ro("target_layers", [](const py_eagle3& h) { return h.head->target_layers; })
        .def_prop_ro("d2t", [](const py_eagle3& h) { return h.head->d2t; })
        .def_prop_ro("n_embd", [](const py_eagle3& h) { return h.head->hp.n_embd; })
        .def(
            "target_features",
            [](py_eagle3& h, ids_1d tokens) {
                const int n = int(tokens.shape(0));
                if (n < 1 || n > evaluator::kChunk) throw invalid_argument_error("target_features: 1..128 tokens");
                kv_cache c(h.m.hp(), n);
                h.target_eval.capture_layers(h.head->target_layers);
                h.target_eval.forward(c, tokens.data(), n, 0, h.m.hp().n_layer);
                const size_t width = h.head->target_layers.size() * size_t(h.m.hp().n_embd);
                std::vector<float> out(h.target_eval.features(), h.target_eval.features() + size_t(n) * width);
                return owned(std::move(out), size_t(n), width);
            },
            nb::arg("tokens"), "The captured target layers' inputs of a forward over tokens from position 0 [n, 3 H_t].")
        .def(
            "fuse",
            [](py_eagle3& h, f32_2d features) {
                const int n = int(features.shape(0));
                const size_t E = size_t(h.head->hp.n_embd);
                if (features.shape(1) != h.head->target_layers.size() * size_t(h.head->target_hidden))
                    throw invalid_argument_error("fuse: features must have 3 * target_hidden_size columns");
                std::vector<float> g(size_t(n) * E);
                h.eval.fuse(features.data(), n, g.data());
                return owned(std::move(g), size_t(n), E);
            },
            nb::arg("features"), "g = fc(features) [n, H].")
        .def(
            "forward",
            [](py_eagle3& h, ids_1d tokens, f32_2d g, int pos0) {
                const int n = int(tokens.shape(0));
                const size_t E = size_t(h.head->hp.n_embd), V = size_t(h.head->n_draft_vocab());
                if (g.shape(0) != size_t(n) || g.shape(1) != E) throw invalid_argument_error("forward: g must be [n, H]");
                h.eval.forward(h.cache, tokens.data(), g.data(), n, pos0);
                h.last_n = n;
                std::vector<float> pre(h.eval.prenorm(), h.eval.prenorm() + size_t(n) * E), logits(size_t(n) * V);
                for (int i = 0; i < n; ++i) h.eval.logits(i, logits.data() + size_t(i) * V);
                return std::make_tuple(owned(std::move(pre), size_t(n), E), owned(std::move(logits), size_t(n), V));
            },
            nb::arg("tokens"), nb::arg("g"), nb::arg("pos0"),
            "The decoder layer over rows (tokens[i], g[i]) at positions pos0 + i of the head's KV cache: "
            "(pre-norm outputs [n, H], logits over the draft vocabulary [n, n_draft_vocab]).")
        .def(
            "subset_logits",
            [](py_eagle3& h, ids_1d ids) {
                // NanoSpec's S over the head (speculative/eagle3.h): target ids offered in order, those
                // with a row in the head kept; its logits over the rows of S only.
                const int64_t n_ids = int64_t(ids.shape(0));
                draft_vocab S(draft_vocab::kind::nanospec, h.head->output, int32_t(std::max<int64_t>(1, n_ids)), 0.0f, 1,
                              h.head->d2t);
                S.set_target_vocab(h.m.hp().n_vocab);
                S.add(ids.data(), n_ids);
                const size_t n_s = size_t(S.size());
                std::vector<float> logits(size_t(h.last_n) * n_s);
                if (n_s > 0)
                    for (int i = 0; i < h.last_n; ++i) h.eval.logits(i, S.head(), logits.data() + size_t(i) * n_s);
                return std::make_tuple(std::vector<int32_t>(S.ids(), S.ids() + n_s),
                                       owned(std::move(logits), size_t(h.last_n), n_s));
            },
            nb::arg("ids"),
            "NanoSpec's S over the head from target ids (those it has rows for, in order) and the logits of the "
            "last forward()'s rows over S only: (S ids, [n, |S|]).");
}

}  // namespace specgen::testing
