// Parameters of a generator (fixed at load) and of one generation request. Names follow
// llama-cpp-python / llama.cpp; DESIGN.md lists them.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "sampling/sampling.h"

namespace specgen {

enum class verify_mode { token, block };

struct generator_params {
    std::string model_path;
    int32_t n_ctx = 4096;
    int32_t n_threads = 0;        // 0: all cores (at most 8)
    int32_t n_threads_draft = 0;  // SSD drafter threads; 0: same as n_threads
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
    int32_t frspec = 0;           // FR-Spec baseline: draft head over the N most frequent tokens
    bool ssd = false;             // Saguaro: draft concurrently with verification (ALGORITHMS.md 4)

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

    void validate() const;
};

}  // namespace specgen
