// Binds the generator: Python's specgen.Generator (python/specgen/generator.py) drives it.
// Every call that computes releases the GIL, so two Generators run in parallel from two threads and
// Ctrl-C is seen between steps.
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/vector.h>

#include "engine/generator.h"
#include "gguf/gguf_reader.h"
#include "python/bindings.h"
#include "quant/quant.h"

namespace nb = nanobind;

namespace specgen::python {

void bind_engine(nb::module_& m) {
    m.def("cuda_device_count", &cuda_device_count,
          "CUDA devices usable by this build (0 when CUDA is not compiled in or no device is present).");
    m.def("build_info", [] {
        nb::dict d;
        d["cuda"] = cuda_compiled();
        d["cpu_isa"] = std::string(cpu_isa_name(best_cpu_isa()));
        return d;
    }, "What this build of the native core contains: {'cuda': bool, 'cpu_isa': str}.");

    nb::class_<request>(m, "Request", "One request on a Generator, as its readers see it (engine/request.h).")
        .def("step", &request::step, nb::call_guard<nb::gil_scoped_release>(),
             "Waits for the engine's next step of this request; returns the text it made safe to show.")
        .def("next",
             [](request& g, double timeout_s) {
                 bool ready = false;
                 std::string piece;
                 {
                     nb::gil_scoped_release release;
                     piece = g.next(timeout_s, &ready);
                 }
                 return std::make_pair(ready, nb::bytes(piece.data(), piece.size()));
             },
             nb::arg("timeout_s"), "(ready, text bytes): as step(), waiting at most timeout_s seconds (< 0: forever).")
        .def_prop_ro("seed", &request::seed)
        .def("cancel", &request::cancel, nb::arg("wait") = true, nb::call_guard<nb::gil_scoped_release>(),
             "Ends it (finish_reason 'cancelled'); wait: until the engine has freed its slot.")
        .def_prop_ro("done", &request::done)
        .def_prop_ro("finish_reason", [](const request& g) { return std::string(finish_reason_name(g.reason())); })
        .def_prop_ro("tokens", [](const request& g) { return g.tokens(); })
        .def_prop_ro("text", [](const request& g) { return g.text(); })
        .def("stats", [](const request& g) {
            const generation_stats s = g.stats();
            return make_stats(s);
        })
        .def("logprobs",
             [](const request& g, size_t start) {
                 // Entries from `start` on (streams read only what is new):
                 // (token, logprob, top_ids, top_logprobs), one per emitted token.
                 nb::list out;
                 const std::vector<token_logprob> all = g.logprobs(start);
                 for (const token_logprob& e : all) out.append(nb::make_tuple(e.token, e.logprob, e.top_ids, e.top_logprobs));
                 return out;
             },
             nb::arg("start") = 0,
             "Log-probabilities of the emitted tokens from index `start` on (GenerateParams.logprobs >= 0).");

    nb::class_<generator>(m, "Generator")
        .def(nb::init<const generator_params&>(), nb::call_guard<nb::gil_scoped_release>())
        .def("start", &generator::start, nb::arg("prompt"), nb::arg("params"),
             nb::call_guard<nb::gil_scoped_release>(), nb::keep_alive<0, 1>(),
             "Submits a request; it waits in the queue while every slot is busy (QueueFullError beyond "
             "max_queued). engine/scheduler.h states the rule.")
        .def("tokenize",
             [](const generator& g, const std::string& text, bool add_special, bool parse_special) {
                 nb::gil_scoped_release release;
                 return g.tok().encode(text, add_special, parse_special);
             },
             nb::arg("text"), nb::arg("add_special") = true, nb::arg("parse_special") = false)
        .def("detokenize",
             [](const generator& g, const std::vector<int32_t>& ids, bool skip_special) {
                 const std::string s = g.tok().decode(ids, skip_special);
                 return nb::bytes(s.data(), s.size());
             },
             nb::arg("ids"), nb::arg("skip_special") = false)
        .def("token_bytes", [](const generator& g, int32_t id) {
            const std::string& s = g.tok().token_bytes(id);
            return nb::bytes(s.data(), s.size());
        })
        .def("is_eog", [](const generator& g, int32_t id) { return g.tok().is_eog(id); })
        .def_prop_ro("seed_ids", &generator::seed_ids, "The ids NanoSpec's prompt seed ranks its top-k over (empty: every id).")
        .def("logits",
             [](generator& g, const std::vector<int32_t>& tokens, int batch_size) {
                 std::vector<float>* out;
                 {
                     nb::gil_scoped_release release;
                     out = new std::vector<float>(g.logits(tokens, batch_size));
                 }
                 nb::capsule owner(out, [](void* p) noexcept { delete static_cast<std::vector<float>*>(p); });
                 size_t shape[2] = {tokens.size(), size_t(g.n_vocab())};
                 return nb::ndarray<nb::numpy, float, nb::ndim<2>>(out->data(), 2, shape, owner);
             },
             nb::arg("tokens"), nb::arg("batch_size") = 128)
        .def("hidden_states",
             [](generator& g, const std::vector<int32_t>& tokens, const std::vector<int>& layers, int batch_size) {
                 auto* out = new generator::hidden_states_result;
                 try {
                     nb::gil_scoped_release release;
                     *out = g.hidden_states(tokens, layers, batch_size);
                 } catch (...) {
                     delete out;
                     throw;
                 }
                 nb::capsule owner(out, [](void* p) noexcept { delete static_cast<generator::hidden_states_result*>(p); });
                 const size_t n = tokens.size(), E = size_t(g.target().hp().n_embd);
                 size_t f_shape[3] = {n, layers.size(), E}, h_shape[2] = {n, E};
                 return nb::make_tuple(nb::ndarray<nb::numpy, float, nb::ndim<3>>(out->features.data(), 3, f_shape, owner),
                                       nb::ndarray<nb::numpy, float, nb::ndim<2>>(out->final_hidden.data(), 2, h_shape, owner));
             },
             nb::arg("tokens"), nb::arg("layers"), nb::arg("batch_size") = 128,
             "(features [n, len(layers), n_embd]: the inputs of those layers; final [n, n_embd]: the output-normed rows).")
        .def_prop_ro("n_vocab", &generator::n_vocab)
        .def_prop_ro("n_ctx", &generator::n_ctx)
        .def_prop_ro("bos_id", [](const generator& g) { return g.tok().bos_id(); })
        .def_prop_ro("eos_id", [](const generator& g) { return g.tok().eos_id(); })
        .def_prop_ro("architecture", [](const generator& g) { return std::string(model_arch_name(g.target().hp().arch)); })
        .def_prop_ro("n_layer", [](const generator& g) { return g.target().hp().n_layer; })
        .def_prop_ro("n_threads", [](const generator& g) { return g.params().n_threads; })
        .def_prop_ro("n_threads_draft", [](const generator& g) { return g.params().n_threads_draft; })
        .def_prop_ro("device", [](const generator& g) { return g.params().device; })
        .def_prop_ro("bytes_per_token", [](const generator& g) { return g.target().bytes_per_token(); })
        .def_prop_ro("file_size", [](const generator& g) { return g.file().file_size(); })
        .def_prop_ro("kv_bytes", [](const generator& g) { return g.kv_bytes(); })
        .def_prop_ro("kv_bytes_per_sequence", [](const generator& g) { return g.kv_bytes_per_sequence(); })
        .def_prop_ro("load_warnings", [](const generator& g) { return g.load_warnings(); })
        .def_prop_ro("n_parallel", &generator::n_parallel)
        .def_prop_ro("n_free_slots", &generator::n_free_slots, "slots no request holds now")
        .def_prop_ro("n_waiting", &generator::n_waiting, "requests queued for a slot")
        .def("metadata", [](const generator& g) {
            nb::dict d;
            for (const auto& [k, v] : g.file().metadata()) d[k.c_str()] = g.file().value_to_string(v);
            return d;
        });
}

}  // namespace specgen::python
