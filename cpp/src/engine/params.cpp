// The parameter table and the one validation of every knob (params.h). A front-end converts its
// types, then validate() checks each field against its table entry and the cross-field rules.
#include "engine/params.h"

#include <cctype>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <algorithm>
#include <random>

#include "common/error.h"

#ifndef SPECGEN_VERSION
#error "SPECGEN_VERSION comes from CMake's project(VERSION)"
#endif

namespace specgen {

static_assert(std::numeric_limits<long double>::digits >= 64, "integer range checks need 64-bit mantissas");

namespace {

void require(bool ok, const std::string& what) {
    if (!ok) throw invalid_argument_error(what);
}

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kI32 = 2147483647.0;
constexpr double kU64 = 18446744073709551615.0;  // 2^64 (checked as long double: 2^64 - 1 is exact there)

using S = param_scope;
using T = param_type;

using G = param_group;

// One row per knob. Defaults are the structs' member initialisers (test_params checks they agree).
// Flags: llama.cpp's spelling first where it has one; a flag-type knob also takes --no-<long name>.
const std::vector<param_spec> kSpecs = {
    // generator (fixed at load)
    {"n_ctx", S::generator, T::integer, 1, 1 << 20, false, "", "4096", "context length in tokens (per sequence)",
     "-c|--ctx-size", G::engine},
    {"n_threads", S::generator, T::integer, 0, 512, false, "", "0", "compute threads; 0: automatic (all cores, at most 8)",
     "-t|--threads", G::engine},
    {"n_threads_draft", S::generator, T::integer, 0, 512, false, "", "0",
     "drafter threads: a draft model's forwards (0: n_threads; at most n_threads, which they run on) or "
     "SSD's concurrent drafter (0: half of n_threads, the target keeps the rest)",
     "-td|--threads-draft", G::engine},
    {"device", S::generator, T::text, 0, 0, false, "", "cpu", "cpu, cuda (device 0) or cuda:N", "-dev|--device", G::engine},
    {"n_parallel", S::generator, T::integer, 1, 256, false, "", "1",
     "sequences decoded together, each in its own KV slot of n_ctx tokens", "-np|--parallel", G::engine},
    {"max_queued", S::generator, T::integer, 0, 1 << 20, false, "", "256",
     "requests waiting for a slot; one more is refused (queue full)", "--max-queued|--queue-size", G::engine},
    {"type_k", S::generator, T::choice, 0, 0, false, "f32|f16|q8_0", "f32", "KV cache key type", "-ctk|--cache-type-k",
     G::engine},
    {"type_v", S::generator, T::choice, 0, 0, false, "f32|f16|q8_0", "f32", "KV cache value type", "-ctv|--cache-type-v",
     G::engine},
    {"draft_kind", S::generator, T::choice, 0, 0, false, "none|ngram|self|model|auto", "none",
     "drafter: none (plain decoding), ngram (prompt lookup), self (the target's first self_layers layers), "
     "model (draft_model; implied by -md), auto (picks the method and gamma per round from a measured cost model)",
     "--draft", G::speculative},
    {"draft_model", S::generator, T::text, 0, 0, false, "", "",
     "draft GGUF with the target's vocabulary (draft_kind model, or auto: one more candidate)",
     "-md|--model-draft", G::speculative},
    {"draft_head", S::generator, T::text, 0, 0, false, "", "",
     "EAGLE-3 draft head GGUF (llama.cpp's eagle3 layout) drafting from the target's hidden states",
     "--draft-head", G::speculative},
    {"verify", S::generator, T::choice, 0, 0, false, "token|block", "block",
     "verification: token-wise rejection sampling or block/hierarchical (HSD)", "--verify", G::speculative},
    {"draft_max", S::generator, T::integer, 1, 64, false, "", "8", "gamma: most tokens drafted per round",
     "--draft-max|--draft-n", G::speculative},
    {"draft_min", S::generator, T::integer, 0, 64, false, "", "0",
     "rounds drafting fewer tokens fall back to plain decoding (<= draft_max)", "--draft-min|--draft-n-min", G::speculative},
    {"draft_p_min", S::generator, T::number, -1, 1, false, "", "-1",
     "stop drafting below this drafter top probability; -1: automatic (0.5 with a NanoSpec head, else 0: off)",
     "--draft-p-min", G::speculative},
    {"draft_adaptive", S::generator, T::flag, 0, 1, false, "", "true",
     "adapt gamma: shrink to the accepted length after a rejection, double after a full acceptance", "--draft-adaptive",
     G::speculative},
    {"self_layers", S::generator, T::integer, 0, kI32, false, "", "0", "self drafter: layers run before exiting; 0: all",
     "--self-layers", G::speculative},
    {"ngram_max", S::generator, T::integer, 1, 64, false, "", "4", "n-gram drafter: longest suffix matched", "--ngram-max",
     G::speculative},
    {"ngram_min", S::generator, T::integer, 1, 64, false, "", "1", "n-gram drafter: shortest suffix matched (<= ngram_max)",
     "--ngram-min", G::speculative},
    {"ngram_chain", S::generator, T::integer, 0, 64, false, "", "4",
     "with a draft model: an n-gram match of at least N tokens starts the proposal and the draft model drafts "
     "on after it (llama.cpp's --spec-type draft-simple,ngram-simple); 0: off",
     "--ngram-chain", G::speculative},
    {"nanospec", S::generator, T::toggle, 0, 0, false, "off|on|auto", "auto",
     "draft head over the in-context vocabulary (NanoSpec); auto: on for a draft model's head, off otherwise",
     "--nanospec", G::speculative},
    {"nanospec_capacity", S::generator, T::integer, 16, 1 << 20, false, "", "3072", "most ids in the NanoSpec vocabulary",
     "--nanospec-capacity", G::speculative},
    {"nanospec_topk", S::generator, T::integer, 1, 64, false, "", "16", "target top-k ids added to it per prompt/verified row",
     "--nanospec-topk", G::speculative},
    {"frspec", S::generator, T::integer, 0, kI32, false, "", "0",
     "FR-Spec baseline: draft head over the N most frequent ids; 0: off", "--frspec", G::speculative},
    {"frspec_path", S::generator, T::text, 0, 0, false, "", "",
     "FR-Spec's token frequency table (default: the one shipped for Gemma 3)", "--frspec-path", G::speculative},
    {"reuse_draft_hidden", S::generator, T::flag, 0, 1, false, "", "true",
     "all-layers self drafter: verification reuses its hidden states (off: a full verification forward)",
     "--reuse-draft-hidden", G::speculative},
    {"batch_draft_policy", S::generator, T::flag, 0, 1, false, "", "true",
     "with 2+ sequences in a step, each draft length maximises the step's tokens per second (cost model)",
     "--batch-draft-policy", G::speculative},
    {"ssd", S::generator, T::flag, 0, 1, false, "", "false",
     "SSD/Saguaro: draft concurrently with verification (a neural drafter, one sequence)", "--ssd", G::speculative},
    {"ssd_fanout", S::generator, T::integer, 1, 64, false, "", "4", "SSD bonus candidates per outcome (F, or F_0 when geometric)",
     "--ssd-fanout", G::speculative},
    {"ssd_fanout_schedule", S::generator, T::choice, 0, 0, false, "uniform|geometric", "uniform", "SSD fan-out schedule",
     "--ssd-schedule", G::speculative},
    {"ssd_backup", S::generator, T::choice, 0, 0, false, "neural|fast", "neural",
     "SSD cache miss: draft now (neural) or n-gram point masses (fast)", "--ssd-backup", G::speculative},
    {"ssd_budget", S::generator, T::integer, -1, kI32, false, "", "-1", "SSD branches drafted per round; -1: until the verdict",
     "--ssd-budget", G::speculative},
    {"saguaro_c", S::generator, T::number, 0, 1, false, "", "1", "Saguaro sampling weight on the drafter's top-F tokens; 1: off",
     "--saguaro-c", G::speculative},
    // generate (per request; a server takes them in each request's body)
    {"max_tokens", S::generate, T::integer, -1, 1 << 30, false, "", "256", "most tokens generated; -1: until EOS or the context is full",
     "-n|--n-predict", G::sampling},
    {"temperature", S::generate, T::number, 0, 1e6, false, "", "0.8", "temperature; 0: greedy", "--temp", G::sampling},
    {"top_k", S::generate, T::integer, 0, kI32, false, "", "40", "top-k; 0: off", "--top-k", G::sampling},
    {"top_p", S::generate, T::number, 0, 1, true, "", "0.95", "top-p; 1: off", "--top-p", G::sampling},
    {"min_p", S::generate, T::number, 0, 1, false, "", "0.05", "min-p; 0: off", "--min-p", G::sampling},
    {"repeat_penalty", S::generate, T::number, 0, kInf, true, "", "1", "repeat penalty; 1: off", "--repeat-penalty", G::sampling},
    {"repeat_last_n", S::generate, T::integer, -1, kI32, false, "", "64", "tokens the penalty looks back; 0: off, -1: all",
     "--repeat-last-n", G::sampling},
    {"seed", S::generate, T::integer, -1, kU64, false, "", "-1", "sampling seed; -1: a fresh random one", "-s|--seed", G::sampling},
    {"add_bos", S::generate, T::flag, 0, 1, false, "", "true", "prepend BOS when the model asks for it", "--add-bos", G::sampling},
    {"ignore_eos", S::generate, T::flag, 0, 1, false, "", "false", "keep generating past end-of-generation tokens", "--ignore-eos",
     G::sampling},
    {"stop", S::generate, T::text, 0, 0, false, "", "", "stop string, repeatable (each at most 4096 bytes; not part of the output)",
     "--stop|-r|--reverse-prompt", G::sampling},
};

std::string number_text(long double v) {
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    if (v == std::floor(v) && std::fabs(v) < 2e19L) {
        char b[32];
        if (v < 0) std::snprintf(b, sizeof b, "%lld", (long long)v);
        else std::snprintf(b, sizeof b, "%llu", (unsigned long long)v);
        return b;
    }
    char b[32];
    std::snprintf(b, sizeof b, "%g", double(v));
    return b;
}

void check(const char* name, long double value) { check_param_range(param_spec_of(name), value); }

std::vector<std::string> choices_of(const param_spec& s) {
    std::vector<std::string> out;
    const std::string all = s.choices;
    for (size_t at = 0; at <= all.size();) {
        const size_t bar = std::min(all.find('|', at), all.size());
        out.push_back(all.substr(at, bar - at));
        at = bar + 1;
    }
    return out;
}

}  // namespace

const char* version() { return SPECGEN_VERSION; }

uint64_t random_seed() {
    std::random_device rd;
    return ((uint64_t(rd()) << 32) ^ rd()) & (UINT64_MAX >> 1);
}

uint64_t resolve_seed(int64_t requested) {
    if (requested == -1) return random_seed();
    require(requested >= 0, "seed must be -1 (random) or >= 0, got " + std::to_string(requested));
    return uint64_t(requested);
}

const char* draft_kind_name(draft_kind k) {
    switch (k) {
        case draft_kind::none: return "none";
        case draft_kind::ngram: return "ngram";
        case draft_kind::self: return "self";
        case draft_kind::model: return "model";
        case draft_kind::automatic: return "auto";
    }
    return "?";
}

draft_kind parse_draft_kind(const std::string& name) {
    for (draft_kind k : {draft_kind::none, draft_kind::ngram, draft_kind::self, draft_kind::model, draft_kind::automatic})
        if (name == draft_kind_name(k)) return k;
    throw invalid_argument_error("draft kind must be one of none, ngram, self, model, auto (a draft GGUF goes with kind model), got '" +
                                 name + "'");
}

device_spec parse_device(const std::string& device) {
    device_spec d;
    if (device == "cpu") return d;
    d.cuda = true;
    if (device == "cuda") return d;
    require(device.rfind("cuda:", 0) == 0 && device.size() > 5 && device.size() <= 8 &&
                device.find_first_not_of("0123456789", 5) == std::string::npos,
            "device must be 'cpu', 'cuda' or 'cuda:N', got '" + device + "'");
    d.index = std::stoi(device.substr(5));
    return d;
}

const std::vector<param_spec>& param_specs() { return kSpecs; }

const param_spec& param_spec_of(const std::string& name) {
    for (const param_spec& s : kSpecs)
        if (name == s.name) return s;
    throw invalid_argument_error("no parameter named '" + name + "'");
}

std::string param_range_text(const param_spec& s) {
    if (s.type == param_type::choice || s.type == param_type::toggle) return std::string("one of ") + s.choices;
    if (std::isinf(s.max)) return (s.min_open ? "> " : ">= ") + number_text(s.min);
    const long double max = s.max == kU64 ? 18446744073709551615.0L : (long double)s.max;
    return (s.min_open ? "(" : "[") + number_text(s.min) + ", " + number_text(max) + "]";
}

void check_param_range(const param_spec& s, long double v, const std::string& label, const std::string& value_text) {
    const std::string who = label.empty() ? s.name : label;
    const bool above_min = s.min_open ? v > s.min : v >= s.min;
    // max as long double: 2^64 - 1 (the largest seed) is exact there, 2^64 is not allowed.
    const long double max = s.max == kU64 ? 18446744073709551615.0L : (long double)s.max;
    const bool ok = std::isfinite(v) && above_min && v <= max && (s.type != param_type::integer || v == std::floor(v));
    require(ok, who + " must be " + (std::isinf(s.max) ? "" : "in ") + param_range_text(s) + ", got " +
                    (value_text.empty() ? number_text(v) : value_text));
}

long double parse_param_text(const param_spec& s, const std::string& text, const std::string& label) {
    const std::string who = label.empty() ? s.name : label;
    const auto expects = [&](const char* what) {
        return invalid_argument_error(who + " expects " + what + " " + param_range_text(s) + ", got '" + text + "'");
    };
    if (s.type == param_type::choice || s.type == param_type::toggle) {
        const std::vector<std::string> names = choices_of(s);
        std::string quoted;
        for (size_t i = 0; i < names.size(); ++i) {
            if (names[i] == text) return (long double)i;
            quoted += (i == 0 ? "'" : i + 1 == names.size() ? " or '" : ", '") + names[i] + "'";
        }
        throw invalid_argument_error(who + " must be " + quoted + ", got '" + text + "'");
    }
    const char* what = s.type == param_type::integer ? "an integer in" : "a number in";
    if (text.empty() || std::isspace((unsigned char)text[0])) throw expects(what);
    errno = 0;
    char* end = nullptr;
    long double v;
    if (s.type == param_type::integer) {
        if (text[0] == '-') {
            const long long x = std::strtoll(text.c_str(), &end, 10);
            v = errno == ERANGE ? -INFINITY : (long double)x;
        } else {
            const unsigned long long x = std::strtoull(text.c_str(), &end, 10);
            v = errno == ERANGE ? INFINITY : (long double)x;
        }
    } else {
        v = std::strtold(text.c_str(), &end);
    }
    if (*end != '\0') throw expects(what);
    check_param_range(s, v, who, text);
    return v;
}

void generator_params::set_draft(draft_kind kind, const std::string& path) {
    // auto takes a draft model as one more candidate (docs/ALGORITHMS.md section 8), or none.
    require(kind == draft_kind::model ? !path.empty() : (path.empty() || kind == draft_kind::automatic),
            kind == draft_kind::model ? "draft_kind model needs a draft_model path"
                                      : std::string("draft_model is only for draft_kind model or auto (got kind ") +
                                            draft_kind_name(kind) + ")");
    draft_type = kind;
    draft_model = path;
    switch (kind) {
        case draft_kind::none: draft.clear(); break;
        case draft_kind::ngram:
        case draft_kind::self:
        case draft_kind::automatic: draft = draft_kind_name(kind); break;
        // The engine reads the bare words self/ngram as drafter kinds: a file so named needs a path.
        case draft_kind::model: draft = (path == "self" || path == "ngram" || path == "auto") ? "./" + path : path; break;
    }
}

const char* kv_type_name(kv_type t) {
    switch (t) {
        case kv_type::f16: return "f16";
        case kv_type::q8_0: return "q8_0";
        default: return "f32";
    }
}

float generator_params::effective_draft_p_min() const {
    if (draft_p_min >= 0) return draft_p_min;
    // Measured on the reference model (docs/ALGORITHMS.md section 8): over S the drafter's top
    // probability tells a hard position, and stopping there made NanoSpec 1.06x faster at T=0 and
    // 1.15x at T=1 (0.3-0.6 alike); the full head's probability is lower everywhere, and the same
    // stop made the full-head self drafter 0.87x as fast. SSD drafts ahead by its own rules.
    return nanospec_on() && !ssd ? 0.5f : 0.0f;
}

bool generator_params::nanospec_on() const {
    if (nanospec != toggle::automatic) return nanospec == toggle::on;
    // auto: on for a draft model's head, where NanoSpec paid on the real pair Qwen2.5-Coder 1.5B + 0.5B
    // (1.05x the full head at T=0, 1.07x at T=1: docs/bench/pair-rows16-2026-12-03.md). Elsewhere it is
    // asked for: the trained Gemma 3 EAGLE-3 head gained 1.04x / 1.01x, within noise, and a head that is
    // not confident stops at draft_p_min's 0.5; the self drafter's measured configurations name it; FR-Spec
    // is the alternative head.
    if (frspec > 0) return false;
    const bool automatic = draft == "auto";
    const bool model = !draft.empty() && draft != "ngram" && draft != "self" && !automatic;
    return model || (automatic && !draft_model.empty());
}

void generator_params::validate() const {
    require(!model_path.empty(), "model_path is empty");
    check("n_ctx", n_ctx);
    check("n_threads", n_threads);
    check("n_threads_draft", n_threads_draft);
    parse_device(device);
    check("draft_max", draft_max);
    check("draft_min", draft_min);
    require(draft_min <= draft_max,
            "draft_min (" + std::to_string(draft_min) + ") must not exceed draft_max (" + std::to_string(draft_max) + ")");
    check("draft_p_min", draft_p_min);
    require(draft_p_min == -1.0f || draft_p_min >= 0.0f,
            "draft_p_min must be -1 (automatic) or in [0, 1], got " + std::to_string(draft_p_min));
    check("self_layers", self_layers);
    check("ngram_max", ngram_max);
    check("ngram_min", ngram_min);
    require(ngram_min <= ngram_max,
            "ngram_min (" + std::to_string(ngram_min) + ") must not exceed ngram_max (" + std::to_string(ngram_max) + ")");
    check("nanospec_capacity", nanospec_capacity);
    check("nanospec_topk", nanospec_topk);
    check("frspec", frspec);
    check("ssd_fanout", ssd_fanout);
    check("ssd_budget", ssd_budget);
    check("saguaro_c", saguaro_c);
    check("n_parallel", n_parallel);
    check("max_queued", max_queued);
    require(!ssd || n_parallel == 1, "ssd runs one sequence at a time: it needs n_parallel = 1 (got " +
                                         std::to_string(n_parallel) + ")");
    // The kind and path set_draft() wrote must still match the engine's selector. (Code that sets
    // `draft` alone -- older callers -- leaves draft_type at none and is read from `draft`.)
    if (draft_type != draft_kind::none) {
        generator_params expect;
        expect.set_draft(draft_type, draft_model);
        require(expect.draft == draft, "draft ('" + draft + "') disagrees with draft_kind " + draft_kind_name(draft_type));
    }
    const bool automatic = draft == "auto";
    // With draft_head, nanospec drafts over the head's in-context ids (speculative/eagle3.h); auto takes the
    // head as one more candidate (docs/ALGORITHMS.md section 8.4).
    require(draft_head.empty() || ((draft.empty() || automatic) && !ssd && frspec == 0),
            "draft_head drafts with an EAGLE-3 head: leave draft_kind none (or auto) and ssd and frspec off (got draft '" +
                std::string(draft.empty() ? "none" : draft) + "')");
    require(!automatic || (!ssd && frspec == 0),
            "draft_kind auto chooses the drafter and its head itself: leave ssd and frspec off");
    // With auto, nanospec chooses the draft model's and the EAGLE-3 head's candidates' heads (the self
    // candidate always has NanoSpec).
    const bool nanospec_asked = nanospec == toggle::on;  // auto applies where it can, never an error
    require(!automatic || !nanospec_asked || !draft_model.empty() || !draft_head.empty(),
            "draft_kind auto chooses the drafter and its head itself: nanospec only selects a draft model's or a "
            "draft_head's head (give draft_model or draft_head), leave it off otherwise");
    const bool neural = !draft.empty() && draft != "ngram" && !automatic;
    require(!ssd || neural, "ssd=True needs a neural drafter: draft_kind self or model (got '" +
                                std::string(draft.empty() ? "none" : draft) + "')");
    require(!(nanospec_asked && frspec > 0), "nanospec and frspec are alternatives: set one of them");
    check("ngram_chain", ngram_chain);  // a draft model's (on by default): the other drafters ignore it
    require(!(nanospec_asked || frspec > 0) || neural || (automatic && !draft_model.empty()) ||
                (nanospec_asked && !draft_head.empty()),
            "nanospec/frspec choose a draft LM head: they need draft_kind self or model, or (nanospec) a draft_head (got '" +
                std::string(draft.empty() ? "none" : draft) + "')");
}

void generate_params::validate() const {
    check("max_tokens", max_tokens);
    check("temperature", sampling.temperature);
    check("top_k", sampling.top_k);
    check("top_p", sampling.top_p);
    check("min_p", sampling.min_p);
    check("repeat_penalty", sampling.repeat_penalty);
    check("repeat_last_n", sampling.repeat_last_n);
    require(logprobs >= -1 && logprobs <= 1024, "logprobs must be in [-1, 1024] (-1 = off), got " + std::to_string(logprobs));
    for (const auto& s : stop) require(s.size() <= 4096, "stop strings must be at most 4096 bytes");
}

}  // namespace specgen
