// A speculator whose NanoSpec prompt seed waits until a round first drafts with its S (auto's candidates:
// the self drafter, a draft model, an EAGLE-3 head; docs/ALGORITHMS.md section 8.2). auto asks how many
// prompt rows wait, prices their top-k against what the candidate would save, and seeds from the last
// ones it chooses, so a request that never drafts with S never pays for its seed.
#pragma once

#include "engine/stats.h"

namespace specgen {

class deferred_seed {
public:
    virtual ~deferred_seed() = default;
    // The prompt rows kept whose top-k has not run (0: nothing waits).
    virtual int waiting_prompt_rows() const = 0;
    // The seed head's cost per row as a share of the target's full head.
    virtual double seed_share() const = 0;
    // S gains the top-k of the last n waiting rows now (n >= waiting_prompt_rows(): all of them).
    virtual void seed_prompt(int n, generation_stats& stats) = 0;
    // |S| of the candidate's draft head (0: its full head; auto's cost model reads it per candidate).
    virtual int vocab_size() const = 0;
};

}  // namespace specgen
