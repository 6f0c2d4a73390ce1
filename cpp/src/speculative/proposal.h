// A round's proposal, from a drafter through its speculator to the engine (speculative/speculator.h).
#pragma once
#include <cstdint>
#include <vector>

#include "sampling/sampling.h"

namespace specgen {

// One round's proposal: exactly what the engine verifies.
struct proposal {
    std::vector<int32_t> tokens;   // x_1..x_g
    std::vector<token_dist> q;     // q_1..q_g, the distributions x_i was sampled from (sized >= g)
    // Rows already forwarded (the hand-over): the first n_forwarded rows of [pending, x_1..x_g] went
    // through every target layer on the target's weights with batch-invariant kernels, their keys and
    // values are in the target's KV cache at the positions a verification forward would write, and
    // `hidden` holds their output-normed hidden states [n_forwarded, n_embd]. The engine runs the
    // layers only for the rows after them. n_forwarded may exceed g + 1 (only g + 1 are used).
    std::vector<float> hidden;
    int32_t n_forwarded = 0;
    // The captured target layers' inputs of those rows (evaluator::capture_layers: an EAGLE-3 head's, which
    // auto's head candidate reads), [n_forwarded, width]; empty when the drafter captures none.
    std::vector<float> features;
    // The n-gram drafter: the length of the history suffix whose earlier occurrence it copied (0: none
    // or another drafter). Longer matches are accepted more often (auto's n-gram estimate, policy.h).
    int32_t ngram_order = 0;
    void clear() {
        tokens.clear();
        n_forwarded = 0;
        features.clear();
        ngram_order = 0;
    }
};

}  // namespace specgen
