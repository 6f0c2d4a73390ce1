// The drafter interface: proposes up to gamma tokens, each with the exact distribution it was
// sampled from (ALGORITHMS.md notation q_i), so a verifier can keep the target's distribution.
//
// Rollback is implicit: every call passes the whole token history, and a drafter that caches state
// (a KV cache) keeps only what agrees with it (the longest common prefix), like llama.cpp's
// seq_rm(seq, p0, -1) applied at the first difference.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "sampling/rng.h"
#include "sampling/sampling.h"

namespace specgen {

class draft_vocab;

struct draft_proposal {
    std::vector<int32_t> tokens;   // x_1..x_g
    std::vector<token_dist> q;     // q_1..q_g (point masses for deterministic drafters)
    // Set only by a drafter that runs ALL of the target's layers on the target's own KV cache (self,
    // self_layers = 0): the target's output-normed hidden states of [pending, x_1..x_{m-1}] with
    // m = n_target_hidden, exactly what a verification forward would compute for those positions
    // (same weights, same cache, batch-invariant kernels), so verification may skip their layers.
    // [n_target_hidden, n_embd]
    std::vector<float> target_hidden;
    int32_t n_target_hidden = 0;
    double head_seconds = 0;       // time spent in the draft LM head during this propose()
    void clear() {
        tokens.clear();
        n_target_hidden = 0;
        head_seconds = 0;
    }
};

struct drafter {
    virtual ~drafter() = default;
    virtual std::string name() const = 0;

    // A new request starts; `prompt` is its full token list. Resets per-request state.
    virtual void begin(const std::vector<int32_t>& prompt) = 0;

    // Proposes at most max_n tokens continuing `history` (prompt + generated tokens; the last one is
    // not yet in the target's KV cache). Samples with `params` (greedy when temperature is 0) and
    // stops early when its top probability falls below p_min. out.q has the same length as
    // out.tokens; out.q is resized, its token_dists reused.
    virtual void propose(const std::vector<int32_t>& history, int max_n, const sampling_params& params,
                         float p_min, rng& gen, draft_proposal& out) = 0;

    // Verification kept `history` (which now ends with the corrected/bonus token). Drafters that
    // learn from outcomes (n-gram tables, NanoSpec's vocabulary) update here.
    virtual void observe(const std::vector<int32_t>& history) {}

    // The drafter's NanoSpec / FR-Spec vocabulary (ALGORITHMS.md section 3), or nullptr when its head
    // covers the whole vocabulary. The generator grows a nanospec set from the target's rows.
    virtual draft_vocab* vocab() { return nullptr; }
};

}  // namespace specgen
