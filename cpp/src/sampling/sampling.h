// Logits -> sampling distribution, and sampling from it (docs/ALGORITHMS.md notation: p and q are the
// distributions AFTER these processors; docs/DESIGN.md section 3).
//
// Pipeline, applied in this order (llama.cpp's default chain restricted to these samplers):
//   repeat penalty over the last repeat_last_n history tokens (each distinct token once:
//   logit > 0 ? logit / penalty : logit * penalty)
//   -> temperature 0: greedy, a point mass on the argmax (ties: lowest id); stop here
//   -> logits / temperature -> top-k -> softmax -> top-p -> min-p -> renormalise.
// top-p keeps the smallest prefix of the descending-probability order whose mass reaches top_p
// (the token that crosses it is kept); min-p keeps tokens with prob >= min_p * max prob.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "sampling/rng.h"

namespace specgen {

struct sampling_params {
    float temperature = 0.8f;     // 0 = greedy (argmax); must be >= 0 and finite
    int32_t top_k = 40;           // 0 = off (whole vocabulary); must be >= 0
    float top_p = 0.95f;          // in (0, 1]; 1 = off
    float min_p = 0.05f;          // in [0, 1]; 0 = off
    float repeat_penalty = 1.0f;  // > 0; 1 = off
    int32_t repeat_last_n = 64;   // >= -1; 0 = off, -1 = the whole history

    // Throws invalid_argument_error naming the first field outside its domain (NaN included).
    void validate() const;
    bool greedy() const { return temperature == 0.0f; }
};

// A sparse probability distribution over token ids: probs[i] is the probability of ids[i]; ids are
// distinct, every listed prob is > 0 and they sum to 1 (up to float rounding). Tokens not listed have
// probability 0. A point mass has one entry. Order: descending probability (ties: ascending id)
// whenever top-k or top-p ran, else the input order; sampling walks the stored order.
struct token_dist {
    std::vector<int32_t> ids;
    std::vector<float> probs;

    size_t size() const { return ids.size(); }
    bool empty() const { return ids.empty(); }
    void clear() {
        ids.clear();
        probs.clear();
    }
    void set_point_mass(int32_t id) {
        ids.assign(1, id);
        probs.assign(1, 1.0f);
    }
    // Probability of `id` (0 when not listed). O(1) for a full distribution stored in id order
    // (ids[id] == id), else a linear scan.
    float prob_of(int32_t id) const;
};

// Samples one id from `dist` by inverse CDF over the stored order with one rng.uniform() draw
// (scaled by the stored total, so float rounding of the sum never biases the last entry).
// Throws invalid_argument_error when dist is empty.
int32_t sample_token(const token_dist& dist, rng& gen);

// Turns logits into a token_dist. Owns its scratch buffers: reuse one object per sequence/thread;
// after warm-up, process() allocates nothing (the output's vectors are reused as well).
class logits_processor {
public:
    // logits: [n] raw scores. ids: nullptr when logits cover the whole vocabulary (ids 0..n-1), else
    // [n] the token id of each logit (a subset, e.g. NanoSpec's in-context vocabulary S).
    // history: [n_history] previous tokens (prompt + generated), most recent last, for the penalty.
    // params must be valid (a request's are checked once, when it starts). Throws
    // invalid_argument_error for n <= 0.
    void process(const float* logits, const int32_t* ids, int32_t n, const sampling_params& params,
                 const int32_t* history, size_t n_history, token_dist& out);

private:
    struct cand {
        int32_t id;
        float logit;
    };
    std::vector<cand> cands_;
    std::vector<int32_t> penalised_;  // distinct recent tokens, sorted
    std::vector<double> probs_;
};

}  // namespace specgen
