#include "engine/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace specgen {

token_logprob logprob_recorder::record(const float* row, int32_t n_vocab, const token_dist& processed,
                                       const sampling_params& sampling, const int32_t* history, size_t n_history,
                                       int32_t token, int32_t n_top) {
    const token_dist* dist = &processed;
    if (sampling.greedy()) {
        sampling_params plain;
        plain.temperature = 1.0f;
        plain.top_k = 0;
        plain.top_p = 1.0f;
        plain.min_p = 0.0f;
        plain.repeat_penalty = sampling.repeat_penalty;
        plain.repeat_last_n = sampling.repeat_last_n;
        processor_.process(row, nullptr, n_vocab, plain, history, n_history, full_);
        dist = &full_;
    }
    auto ln = [](float p) { return p > 0 ? std::log(p) : -std::numeric_limits<float>::infinity(); };
    token_logprob out;
    out.token = token;
    out.logprob = ln(dist->prob_of(token));
    const int32_t n = std::min<int32_t>(std::max<int32_t>(n_top, 0), int32_t(dist->size()));
    if (n > 0) {
        order_.resize(dist->size());
        for (size_t i = 0; i < order_.size(); ++i) order_[i] = int32_t(i);
        auto before = [&](int32_t a, int32_t b) {
            return dist->probs[a] != dist->probs[b] ? dist->probs[a] > dist->probs[b] : dist->ids[a] < dist->ids[b];
        };
        std::partial_sort(order_.begin(), order_.begin() + n, order_.end(), before);
        for (int32_t i = 0; i < n; ++i) {
            out.top_ids.push_back(dist->ids[order_[i]]);
            out.top_logprobs.push_back(ln(dist->probs[order_[i]]));
        }
    }
    return out;
}

}  // namespace specgen
