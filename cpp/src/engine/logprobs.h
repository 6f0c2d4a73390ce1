// Log-probabilities of emitted tokens (OpenAI's `logprobs` / `top_logprobs`), read from the target's
// processed distribution of the row that emitted each token.
//
// Speculation does not change them: every emitted token's row is the target's own row at that
// position (accepted draft i: row i; the corrected/bonus token: row k), computed by batch-invariant
// kernels, so plain and speculative decoding report the same numbers (docs/ALGORITHMS.md section 1).
//
// Which distribution: with temperature > 0 the sampling distribution p after every processor (repeat
// penalty, temperature, top-k, top-p, min-p; tokens those cut have logprob -inf). Greedy decoding's
// processed distribution is a point mass, which says nothing; there the report is the softmax of the
// penalised logits at temperature 1 (the distribution greedy takes the argmax of).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "sampling/sampling.h"

namespace specgen {

struct token_logprob {
    int32_t token = -1;
    float logprob = 0;                 // ln p(token); -inf when p(token) = 0
    std::vector<int32_t> top_ids;      // the n_top most probable ids (descending; ties: ascending id)
    std::vector<float> top_logprobs;
};

class logprob_recorder {
public:
    // row: the target's raw logits [n_vocab] of the emitting row; processed: that row's token_dist
    // as sampling/verification used it; history: the row's context (for the repeat penalty).
    token_logprob record(const float* row, int32_t n_vocab, const token_dist& processed,
                         const sampling_params& sampling, const int32_t* history, size_t n_history,
                         int32_t token, int32_t n_top);

private:
    logits_processor processor_;
    token_dist full_;                   // greedy: softmax of the penalised logits
    std::vector<int32_t> order_;
};

}  // namespace specgen
