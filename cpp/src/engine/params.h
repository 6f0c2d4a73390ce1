// Parameters of a generator (fixed at load) and of one generation request, and the ONE table that
// names, types, bounds and documents every knob (param_specs()). Every front-end -- the Python SDK,
// the C API and the CLI -- only converts its own types into these structs and calls validate();
// ranges, defaults and the meaning of the special values (0 = automatic threads, -1 = random seed)
// live here. Names follow llama-cpp-python / llama.cpp (docs/DESIGN.md section 7).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "sampling/sampling.h"

namespace specgen {

enum class verify_mode { token, block };
enum class ssd_schedule { uniform, geometric };  // SSD fan-out per outcome (docs/ALGORITHMS.md section 4.6)
enum class ssd_backup_mode { neural, fast };    // SSD cache miss: draft K now | n-gram point masses
enum class kv_type { f32, f16, q8_0 };          // KV cache element type (llama.cpp -ctk / -ctv)
enum class toggle { off, on, automatic };        // a toggle-type knob's value ("off|on|auto")
const char* kv_type_name(kv_type t);             // "f32", "f16", "q8_0"

// What drafts the tokens the target verifies.
// automatic ("auto"): the auto speculator picks plain decoding, n-gram lookup or the self drafter with
// NanoSpec per request and between rounds (speculative/auto/auto_speculator.h, docs/ALGORITHMS.md section 8).
enum class draft_kind { none, ngram, self, model, automatic };
const char* draft_kind_name(draft_kind k);  // "none", "ngram", "self", "model", "auto"
// "none" | "ngram" | "self" | "model" | "auto"; anything else: invalid_argument_error naming the valid kinds.
draft_kind parse_draft_kind(const std::string& name);

// The device string, parsed in one place: "cpu", "cuda" (device 0) or "cuda:N".
struct device_spec {
    bool cuda = false;
    int index = 0;
};
device_spec parse_device(const std::string& device);  // throws invalid_argument_error

// The library version, from CMake's project(VERSION) (one place for every front-end).
const char* version();

// A fresh random seed: 63 bits, so a printed seed round-trips through every front-end.
uint64_t random_seed();
// The seed a request runs with: `requested` when >= 0, a random_seed() for -1 (the "random" value of
// every front-end: Python None/-1, C SPECGEN_SEED_RANDOM, CLI -s -1).
uint64_t resolve_seed(int64_t requested);

struct generator_params {
    std::string model_path;
    int32_t n_ctx = 4096;
    int32_t n_threads = 0;        // 0: automatic (all cores, at most 8)
    int32_t n_threads_draft = 0;  // SSD drafter threads; 0: half of n_threads, the target keeps the rest
    // Where the model runs: "cpu", "cuda" (device 0) or "cuda:N". CUDA holds the weights, KV caches
    // and activations in device memory; sampling and verification stay on the host.
    std::string device = "cpu";
    // Speculation: set with set_draft(kind, path). `draft` is the engine's drafter selector derived
    // from them ("" none, "ngram", "self", or the draft GGUF path); validate() checks they agree.
    draft_kind draft_type = draft_kind::none;
    std::string draft_model;      // the draft GGUF when draft_type == model (or auto's draft model candidate)
    std::string draft;
    // An EAGLE-3 draft head GGUF (llama.cpp's eagle3 layout, speculative/eagle3.h): drafts from the
    // target's hidden states; excludes ssd, frspec and draft_kind other than none or auto (auto: one more
    // candidate); nanospec drafts over the head's in-context ids.
    std::string draft_head;
    verify_mode verify = verify_mode::block;
    int32_t draft_max = 8;        // gamma: most tokens drafted per round
    int32_t draft_min = 0;        // rounds with fewer drafted tokens fall back to plain decoding
    float draft_p_min = -1.0f;    // stop drafting when the drafter's top probability falls below this;
                                  // -1: automatic (effective_draft_p_min())
    bool draft_adaptive = true;   // adapt gamma to acceptance: halve to the accepted length on a
                                  // rejection, double after a fully accepted round (up to draft_max)
    int32_t self_layers = 0;      // self drafter: layers run before exiting (0: all)
    int32_t ngram_max = 4;        // n-gram drafter: longest suffix matched
    int32_t ngram_min = 1;        // shortest suffix matched
    // > 0: a draft model's proposal starts with the n-gram match's tokens where the lookup finds a match of
    // at least this many tokens (up to max(ngram_max, ngram_chain)), and the model drafts on after them
    // (docs/ALGORITHMS.md section 6.1); draft_kind model, or auto's draft model (other drafters ignore it).
    // 0: off. 4 measured faster than 0 on a real pair, and 1-3 chained matches that failed too often.
    int32_t ngram_chain = 4;
    // Draft head over the in-context vocabulary (docs/ALGORITHMS.md section 3); auto: nanospec_on().
    toggle nanospec = toggle::automatic;
    int32_t nanospec_capacity = 3072;
    int32_t nanospec_topk = 16;   // target top-k ids added to S per prefill/verified row (paper: 3; 16 measured faster)
    int32_t frspec = 0;           // FR-Spec baseline: draft head over the N most frequent tokens
    std::string frspec_path;      // token frequency table (tools/build_frspec_table.py): FR-Spec's ids (needed when frspec > 0)
    // Self drafter over all layers: verification reuses the drafter's hidden states (the target's own)
    // and only runs the head over them. false forces the full verification forward (tests, benchmarks).
    bool reuse_draft_hidden = true;
    bool ssd = false;             // Saguaro: draft concurrently with verification (docs/ALGORITHMS.md section 4)
    int32_t ssd_fanout = 4;       // F (uniform) or F_0 (geometric): bonus candidates per outcome
    ssd_schedule ssd_fanout_schedule = ssd_schedule::uniform;
    ssd_backup_mode ssd_backup = ssd_backup_mode::neural;
    int32_t ssd_budget = -1;      // most branches drafted per round; -1: until the verdict arrives
    float saguaro_c = 1.0f;       // Saguaro sampling weight C in [0, 1] on the top-F draft tokens; 1 = off
    // Serving (docs/DESIGN.md section 9): sequences decoded together, each in its own KV slot.
    int32_t n_parallel = 1;       // slots (llama.cpp -np): requests decoded in the same steps
    int32_t max_queued = 256;     // requests waiting for a slot; one more is refused (queue_full_error)
    kv_type type_k = kv_type::f32;  // KV cache key type (-ctk)
    kv_type type_v = kv_type::f32;  // KV cache value type (-ctv)
    // Batch-aware draft lengths (docs/ALGORITHMS.md section 7) when 2+ sequences share a step.
    bool batch_draft_policy = true;

    // Sets draft_type, draft_model and the derived `draft`. A model path is required for
    // draft_kind::model and optional for draft_kind::automatic (a draft model candidate).
    void set_draft(draft_kind kind, const std::string& model_path = "");
    // draft_p_min, or with -1 the measured best for the drafter's head: 0.5 with NanoSpec, else 0.
    float effective_draft_p_min() const;
    // Whether the drafter's head runs over NanoSpec's S: nanospec on, or auto where it was measured to pay
    // (a draft model's head, never beside FR-Spec). auto's candidates resolve it with their own params
    // (auto_draft_params, ...).
    bool nanospec_on() const;
    // Throws invalid_argument_error naming the first bad field (the table's message).
    void validate() const;
};

struct generate_params {
    int32_t max_tokens = 256;     // < 0: until EOS or the context is full
    sampling_params sampling;
    std::vector<std::string> stop;
    uint64_t seed = 0xC0FFEE;     // the resolved seed (see resolve_seed)
    bool add_bos = true;          // prepend BOS when the model's tokenizer asks for it
    bool ignore_eos = false;
    // >= 0: record every emitted token's log-probability and this many most probable alternatives
    // (engine/logprobs.h); -1: off.
    int32_t logprobs = -1;

    void validate() const;
};

// ---- the parameter table ----------------------------------------------------------------------
// toggle: a flag that also takes "auto", the engine's measured default (llama.cpp's -fa on|off|auto):
// choices "off|on|auto", a bare flag means on, --no-<name> off.
enum class param_type { integer, number, flag, choice, text, toggle };
enum class param_scope { generator, generate };
enum class param_group { engine, speculative, sampling };  // the section of a front-end's help

struct param_spec {
    const char* name;           // the field name (Python keyword, C struct member)
    param_scope scope;
    param_type type;
    double min, max;            // integer / number: the closed range [min, max] ...
    bool min_open;              // ... or (min, max] when set (top_p, repeat_penalty)
    const char* choices;        // choice: "a|b|c"; toggle: "off|on|auto"
    const char* default_value;  // as text
    const char* doc;            // one line: meaning, unit, special values
    const char* flags;          // command-line spellings, "-c|--ctx-size" (llama.cpp's first); flag- and
                                // toggle-type knobs also take --no-<long name>
    param_group group;
};

// Every knob, generator and generate scope, in documentation order.
const std::vector<param_spec>& param_specs();
// The spec named `name`; invalid_argument_error when there is none.
const param_spec& param_spec_of(const std::string& name);
// "[1, 1048576]", "(0, 1]", "> 0" (no upper bound): the domain as error messages write it.
std::string param_range_text(const param_spec& spec);
// Throws invalid_argument_error "<label> must be in <range>, got <value>" when `value` (exact for
// integers up to 2^64) is outside the spec's range or not finite. label defaults to spec.name.
// value_text: how to print the value (the caller's spelling; default: the number).
void check_param_range(const param_spec& spec, long double value, const std::string& label = "",
                       const std::string& value_text = "");
// Parses `text` as the spec's type (integer / number / choice) strictly (the whole string) and
// range-checks it; the errors name `label` ("-c", "--temp"). Returns the value; choices return
// their index in spec.choices.
long double parse_param_text(const param_spec& spec, const std::string& text, const std::string& label);
// Sets the knob `spec` in g or r from its text (the strict parse above; errors name `label`): flags
// take true/false, `stop` appends, seed -1 draws a random seed, draft_kind / draft_model set only
// their own fields (the caller then calls g.set_draft). Every knob of the table has a field here.
void assign_param_text(const param_spec& spec, const std::string& text, const std::string& label, generator_params& g,
                       generate_params& r);
// The spec's command-line spellings: its flags, plus --no-<long name> for a flag-type knob.
std::vector<std::string> param_flag_names(const param_spec& spec);

}  // namespace specgen
