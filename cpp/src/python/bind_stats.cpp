// Binds the statistics of a generation as specgen.GenerationStats: attribute access for every field
// of the one list in engine/stats.h, to_dict(), and read-only mapping access (stats["n_rounds"],
// `in`, keys(), dict(stats)) for code written against the earlier plain dict.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "engine/stats.h"
#include "python/bindings.h"

namespace nb = nanobind;

namespace specgen::python {

namespace {

// What Python sees: the engine's counters plus the seed the request ran with.
struct published_stats {
    generation_stats s;
    uint64_t seed = 0;
};

nb::dict to_dict(const published_stats& p) {
    const generation_stats& s = p.s;
    nb::dict d;
#define SPECGEN_X(type, name, member, doc) d[#name] = s.member;
    SPECGEN_STATS_FIELDS(SPECGEN_X)
#undef SPECGEN_X
#define SPECGEN_X(name, doc) d[#name] = s.name();
    SPECGEN_STATS_DERIVED(SPECGEN_X)
#undef SPECGEN_X
#define SPECGEN_X(name, doc) d[#name] = s.name;
    SPECGEN_STATS_POSITIONS(SPECGEN_X)
#undef SPECGEN_X
#define SPECGEN_X(old_name, name) d[#old_name] = d[#name];
    SPECGEN_STATS_ALIASES(SPECGEN_X)
#undef SPECGEN_X
    d["seed"] = p.seed;
    return d;
}

}  // namespace

nb::object make_stats(const generation_stats& s) { return nb::cast(published_stats{s, 0}); }

void bind_stats(nb::module_& m) {
    auto cls = nb::class_<published_stats>(m, "GenerationStats",
                                           "Statistics of one generation (the field list of docs/DESIGN.md section 7). "
                                           "Attributes, to_dict(), and stats['name'] as a read-only mapping.");
    cls.def(nb::init<>());
#define SPECGEN_X(type, name, member, doc) \
    cls.def_prop_ro(#name, [](const published_stats& p) { return p.s.member; }, doc);
    SPECGEN_STATS_FIELDS(SPECGEN_X)
#undef SPECGEN_X
#define SPECGEN_X(name, doc) cls.def_prop_ro(#name, [](const published_stats& p) { return p.s.name(); }, doc);
    SPECGEN_STATS_DERIVED(SPECGEN_X)
#undef SPECGEN_X
#define SPECGEN_X(name, doc) cls.def_prop_ro(#name, [](const published_stats& p) { return p.s.name; }, doc);
    SPECGEN_STATS_POSITIONS(SPECGEN_X)
#undef SPECGEN_X
#define SPECGEN_X(old_name, name) \
    cls.def_prop_ro(#old_name, [](nb::handle self) { return self.attr(#name); }, "earlier name of " #name);
    SPECGEN_STATS_ALIASES(SPECGEN_X)
#undef SPECGEN_X
    cls.def_rw("seed", &published_stats::seed, "the sampling seed the request ran with");
    cls.def("to_dict", &to_dict, "Every field, derived value, alias and the seed as a plain dict.");
    cls.def("__getitem__", [](const published_stats& p, const std::string& key) -> nb::object {
        nb::dict d = to_dict(p);
        if (!d.contains(key.c_str())) throw nb::key_error(key.c_str());
        return d[key.c_str()];
    });
    cls.def("get", [](const published_stats& p, const std::string& key, nb::object fallback) -> nb::object {
        nb::dict d = to_dict(p);
        return d.contains(key.c_str()) ? nb::object(d[key.c_str()]) : fallback;
    }, nb::arg("key"), nb::arg("default") = nb::none());
    cls.def("__contains__", [](const published_stats& p, nb::handle key) { return to_dict(p).contains(key); });
    cls.def("keys", [](const published_stats& p) { return to_dict(p).keys(); });
    cls.def("items", [](const published_stats& p) { return to_dict(p).items(); });
    cls.def("values", [](const published_stats& p) { return to_dict(p).values(); });
    cls.def("__iter__", [](const published_stats& p) { return nb::iter(to_dict(p)); });
    cls.def("__len__", [](const published_stats& p) { return nb::len(to_dict(p)); });
    cls.def("__repr__", [](const published_stats& p) {
        return "GenerationStats(" + nb::cast<std::string>(nb::repr(to_dict(p))) + ")";
    });
    cls.def_static("fields", [] {
        nb::list out;
#define SPECGEN_X(type, name, member, doc) out.append(nb::make_tuple(#name, doc));
        SPECGEN_STATS_FIELDS(SPECGEN_X)
#undef SPECGEN_X
#define SPECGEN_X(name, doc) out.append(nb::make_tuple(#name, doc));
        SPECGEN_STATS_DERIVED(SPECGEN_X)
        SPECGEN_STATS_POSITIONS(SPECGEN_X)
#undef SPECGEN_X
        return out;
    }, "The documented field list: (name, doc) for every counter, derived value and per-position count.");
}

}  // namespace specgen::python
