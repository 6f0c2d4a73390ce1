// Parameters of a generator (fixed at load) and of one generation request. Names follow
// llama-cpp-python / llama.cpp; DESIGN.md lists them.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "sampling/sampling.h"

namespace specgen {

enum class verify_mode { token, block };
enum class ssd_schedule { uniform, geometric };  // SSD fan-out per outcome (ALGORITHMS.md 4.6)
enum class ssd_backup_mode { neural, fast };    // SSD cache miss: draft K now | n-gram point masses

struct generator_params {
    std::string model_path;
    int32_t n_ctx = 4096;
    int32_t n_threads = 0;        // 0: all cores (at most 8)
    int32_t n_threads_draft = 0;  // SSD drafter threads; 0: half of n_threads, the target keeps the rest
    // Where the model runs: "cpu", "cuda" (device 0) or "cuda:N". CUDA holds the weights, KV caches
    // and activations in device memory; sampling and verification stay on the host.
    std::string device = "cpu";
    // Speculation. draft: "" (none), "self", "ngram", or a path to a draft GGUF.
    std::string draft;
    verify_mode verify = verify_mode::block;
    int32_t draft_max = 8;        // gamma: most tokens drafted per round
    int32_t draft_min = 0;        // rounds with fewer drafted tokens fall back to plain decoding
    float draft_p_min = 0.0f;     // stop drafting when the drafter's top probability falls below this
    bool draft_adaptive = true;   // adapt gamma to acceptance: halve to the accepted length on a
                                  // rejection, double after a fully accepted round (up to draft_max)
    int32_t self_layers = 0;      // self drafter: layers run before exiting (0: all)
    int32_t ngram_max = 4;        // n-gram drafter: longest suffix matched
    int32_t ngram_min = 1;        // shortest suffix matched
    bool nanospec = false;        // draft head over the in-context vocabulary (ALGORITHMS.md 3)
    int32_t nanospec_capacity = 3072;
    int32_t nanospec_topk = 3;    // target top-k ids added to S per prefill/verified row (paper: 3)
    int32_t frspec = 0;           // FR-Spec baseline: draft head over the N most frequent tokens
    std::string frspec_path;      // FR-Spec frequency table (tools/build_frspec_table.py); needed when frspec > 0
    // Self drafter over all layers: verification reuses the drafter's hidden states (the target's own)
    // and only runs the head over them. false forces the full verification forward (tests, benchmarks).
    bool reuse_draft_hidden = true;
    bool ssd = false;             // Saguaro: draft concurrently with verification (ALGORITHMS.md 4)
    int32_t ssd_fanout = 4;       // F (uniform) or F_0 (geometric): bonus candidates per outcome
    ssd_schedule ssd_fanout_schedule = ssd_schedule::uniform;
    ssd_backup_mode ssd_backup = ssd_backup_mode::neural;
    int32_t ssd_budget = -1;      // most branches drafted per round; -1: until the verdict arrives
    float saguaro_c = 1.0f;       // Saguaro sampling weight C in [0, 1] on the top-F draft tokens; 1 = off

    // Throws invalid_argument_error naming the first bad field.
    void validate() const;
};

struct generate_params {
    int32_t max_tokens = 256;     // < 0: until EOS or the context is full
    sampling_params sampling;
    std::vector<std::string> stop;
    uint64_t seed = 0xC0FFEE;
    bool add_bos = true;          // prepend BOS when the model's tokenizer asks for it
    bool ignore_eos = false;
    // >= 0: record every emitted token's log-probability and this many most probable alternatives
    // (engine/logprobs.h); -1: off.
    int32_t logprobs = -1;

    void validate() const;
};

}  // namespace specgen
