// Binds the parameter structs and the parameter table (engine/params.h): Python's Generator
// converts its keyword arguments into these structs and leaves the ranges, defaults and messages to
// the table, so that an InvalidParameterError from Python reads as the CLI's and the C API's.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cmath>

#include "common/error.h"
#include "engine/params.h"
#include "python/bindings.h"

namespace nb = nanobind;

namespace specgen::python {

namespace {

const char* type_name(param_type t) {
    switch (t) {
        case param_type::integer: return "integer";
        case param_type::number: return "number";
        case param_type::flag: return "flag";
        case param_type::choice: return "choice";
        case param_type::text: return "text";
        case param_type::toggle: return "toggle";
    }
    return "?";
}

// A Python int or float as the table's long double, exactly for integers up to 2^64.
long double as_long_double(nb::handle v) {
    if (PyLong_Check(v.ptr())) {
        int overflow = 0;
        const long long x = PyLong_AsLongLongAndOverflow(v.ptr(), &overflow);
        if (!overflow) return (long double)x;
        if (overflow < 0) return -INFINITY;
        const unsigned long long u = PyLong_AsUnsignedLongLong(v.ptr());
        if (PyErr_Occurred()) {
            PyErr_Clear();
            return INFINITY;
        }
        return (long double)u;
    }
    const double d = PyFloat_AsDouble(v.ptr());
    if (d == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        throw invalid_argument_error("expected a number");
    }
    return d;
}

}  // namespace

void bind_params(nb::module_& m) {
    m.def("version", &version, "The library version (CMake's project(VERSION)).");
    m.attr("__version__") = version();
    m.def("random_seed", &random_seed, "A fresh random 63-bit seed (what seed=None / -1 draws).");
    m.def("param_specs", [] {
        nb::list out;
        for (const param_spec& s : param_specs()) {
            nb::dict d;
            d["name"] = s.name;
            d["scope"] = s.scope == param_scope::generator ? "generator" : "generate";
            d["type"] = type_name(s.type);
            if (s.type == param_type::integer || s.type == param_type::number) {
                d["min"] = s.min;
                d["max"] = s.max;
                d["min_open"] = s.min_open;
                d["range"] = param_range_text(s);
            }
            if (s.type == param_type::choice || s.type == param_type::toggle) {
                nb::list choices;
                std::string all = s.choices;
                for (size_t at = 0; at <= all.size();) {
                    const size_t bar = std::min(all.find('|', at), all.size());
                    choices.append(all.substr(at, bar - at));
                    at = bar + 1;
                }
                d["choices"] = choices;
            }
            d["default"] = s.default_value;
            d["doc"] = s.doc;
            d["flags"] = param_flag_names(s);
            d["group"] = s.group == param_group::engine ? "engine" : s.group == param_group::speculative ? "speculative" : "sampling";
            out.append(d);
        }
        return out;
    }, "The parameter table: one dict per knob {name, scope, type, min, max, range, choices, default, doc, flags, group}.");
    m.def(
        "check_param",
        [](const std::string& name, nb::handle value) {
            check_param_range(param_spec_of(name), as_long_double(value), "", nb::cast<std::string>(nb::repr(value)));
        },
        nb::arg("name"), nb::arg("value"),
        "Raises InvalidParameterError (the table's message) when a number is outside the range of `name`.");
    m.def(
        "parse_choice",
        [](const std::string& name, const std::string& text) {
            const param_spec& s = param_spec_of(name);
            if (s.type != param_type::choice && s.type != param_type::toggle)
                throw invalid_argument_error(name + " is not a choice");
            return int(parse_param_text(s, text, name));
        },
        nb::arg("name"), nb::arg("text"), "The index of `text` among the choices of `name`; InvalidParameterError naming them.");
    m.def(
        "parse_draft_kind", [](const std::string& s) { return parse_draft_kind(s); }, nb::arg("name"),
        "none | ngram | self | model; InvalidParameterError naming the valid kinds otherwise.");
    m.def("parse_device", [](const std::string& s) { parse_device(s); }, nb::arg("device"),
          "Checks a device string (cpu, cuda, cuda:N); InvalidParameterError otherwise.");

    nb::enum_<verify_mode>(m, "VerifyMode").value("token", verify_mode::token).value("block", verify_mode::block);
    nb::enum_<ssd_schedule>(m, "SsdSchedule").value("uniform", ssd_schedule::uniform).value("geometric", ssd_schedule::geometric);
    nb::enum_<ssd_backup_mode>(m, "SsdBackup").value("neural", ssd_backup_mode::neural).value("fast", ssd_backup_mode::fast);
    nb::enum_<kv_type>(m, "KvType").value("f32", kv_type::f32).value("f16", kv_type::f16).value("q8_0", kv_type::q8_0);
    nb::enum_<toggle>(m, "Toggle").value("off", toggle::off).value("on", toggle::on).value("auto", toggle::automatic);
    nb::enum_<draft_kind>(m, "DraftKind")
        .value("none", draft_kind::none)
        .value("ngram", draft_kind::ngram)
        .value("self", draft_kind::self)
        .value("model", draft_kind::model)
        .value("auto", draft_kind::automatic);

    nb::class_<generator_params>(m, "GeneratorParams")
        .def(nb::init<>())
        .def_rw("model_path", &generator_params::model_path)
        .def_rw("n_ctx", &generator_params::n_ctx)
        .def_rw("n_threads", &generator_params::n_threads)
        .def_rw("n_threads_draft", &generator_params::n_threads_draft)
        .def_rw("device", &generator_params::device)
        .def_ro("draft_kind", &generator_params::draft_type)
        .def_ro("draft_model", &generator_params::draft_model)
        .def_ro("draft", &generator_params::draft)
        .def("set_draft", &generator_params::set_draft, nb::arg("kind"), nb::arg("model_path") = "")
        .def_rw("verify", &generator_params::verify)
        .def_rw("draft_max", &generator_params::draft_max)
        .def_rw("draft_min", &generator_params::draft_min)
        .def_rw("draft_p_min", &generator_params::draft_p_min)
        .def_rw("draft_adaptive", &generator_params::draft_adaptive)
        .def_rw("self_layers", &generator_params::self_layers)
        .def_rw("ngram_max", &generator_params::ngram_max)
        .def_rw("ngram_min", &generator_params::ngram_min)
        .def_rw("ngram_chain", &generator_params::ngram_chain)
        .def_rw("nanospec", &generator_params::nanospec)
        .def_rw("nanospec_capacity", &generator_params::nanospec_capacity)
        .def_rw("nanospec_topk", &generator_params::nanospec_topk)
        .def_rw("frspec", &generator_params::frspec)
        .def_rw("frspec_path", &generator_params::frspec_path)
        .def_rw("draft_head", &generator_params::draft_head)
        .def_rw("reuse_draft_hidden", &generator_params::reuse_draft_hidden)
        .def_rw("ssd", &generator_params::ssd)
        .def_rw("ssd_fanout", &generator_params::ssd_fanout)
        .def_rw("ssd_fanout_schedule", &generator_params::ssd_fanout_schedule)
        .def_rw("ssd_backup", &generator_params::ssd_backup)
        .def_rw("ssd_budget", &generator_params::ssd_budget)
        .def_rw("saguaro_c", &generator_params::saguaro_c)
        .def_rw("n_parallel", &generator_params::n_parallel)
        .def_rw("max_queued", &generator_params::max_queued)
        .def_rw("type_k", &generator_params::type_k)
        .def_rw("type_v", &generator_params::type_v)
        .def_rw("batch_draft_policy", &generator_params::batch_draft_policy)
        .def("validate", &generator_params::validate);

    nb::class_<generate_params>(m, "GenerateParams")
        .def(nb::init<>())
        .def_rw("max_tokens", &generate_params::max_tokens)
        .def_rw("sampling", &generate_params::sampling)
        .def_rw("stop", &generate_params::stop)
        .def_rw("seed", &generate_params::seed)
        .def_rw("add_bos", &generate_params::add_bos)
        .def_rw("ignore_eos", &generate_params::ignore_eos)
        .def_rw("logprobs", &generate_params::logprobs)
        .def("validate", &generate_params::validate);
}

}  // namespace specgen::python
