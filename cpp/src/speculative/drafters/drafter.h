// A drafter proposes up to gamma tokens, each with the exact distribution it was sampled from
// (docs/ALGORITHMS.md notation q_i), so a verifier can keep the target's distribution. The engine
// never sees a drafter: a speculator (speculative/speculator.h) drives one.
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
#include "speculative/proposal.h"

namespace specgen {

struct drafter {
    virtual ~drafter() = default;
    virtual std::string name() const = 0;

    // A new request starts; `prompt` is its full token list. Resets per-request state; a KV cache of
    // its own keeps its rows, which the new request reuses as far as it shares them.
    virtual void begin(const std::vector<int32_t>& prompt) = 0;
    // The rows of `prompt` its own KV cache holds already (from the slot's earlier requests).
    virtual int rows_cached(const std::vector<int32_t>& /*prompt*/) const { return 0; }

    // Proposes at most max_n tokens continuing `history` (prompt + generated tokens; the last one is
    // not yet in the target's KV cache). Samples with `params` (greedy when temperature is 0) and
    // stops early when its top probability falls below p_min. out.q is resized, its token_dists reused.
    // Only a drafter that runs every target layer on the target's weights and KV cache (self, all
    // layers) reports rows already forwarded (out.hidden, out.n_forwarded).
    virtual void propose(const std::vector<int32_t>& history, int max_n, const sampling_params& params,
                         float p_min, rng& gen, proposal& out) = 0;
    // Seconds the last propose() spent in the draft LM head (part of its time).
    virtual double head_seconds() const { return 0; }
};

}  // namespace specgen
