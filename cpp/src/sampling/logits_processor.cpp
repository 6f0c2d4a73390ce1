// logits_processor::process(), token_dist helpers and sample_token(); the pipeline is documented in
// sampling.h. Checked against a float64 numpy reference in tests/test_sampling.py.
//
// Cost for a full vocabulary of n ids: O(n) for penalty/softmax/min-p, O(n + k log k) for top-k
// (nth_element, then a sort of the k kept), O(n log n) only when top-p runs without top-k.
#include <algorithm>
#include <cmath>
#include <string>

#include "common/error.h"
#include "sampling/sampling.h"

namespace specgen {

float token_dist::prob_of(int32_t id) const {
    const size_t n = ids.size();
    if (id >= 0 && static_cast<size_t>(id) < n && ids[static_cast<size_t>(id)] == id)
        return probs[static_cast<size_t>(id)];
    for (size_t i = 0; i < n; ++i)
        if (ids[i] == id) return probs[i];
    return 0.0f;
}

int32_t sample_token(const token_dist& dist, rng& gen) {
    if (dist.empty()) throw invalid_argument_error("sample_token: empty distribution");
    double total = 0.0;
    for (float p : dist.probs) total += p;
    const double u = gen.uniform() * total;
    double cum = 0.0;
    size_t last = 0;
    for (size_t i = 0; i < dist.size(); ++i) {
        if (dist.probs[i] <= 0.0f) continue;
        cum += dist.probs[i];
        last = i;
        if (u < cum) return dist.ids[i];
    }
    return dist.ids[last];  // u within rounding of the total
}

void logits_processor::process(const float* logits, const int32_t* ids, int32_t n,
                               const sampling_params& params, const int32_t* history,
                               size_t n_history, token_dist& out) {
    if (n <= 0) throw invalid_argument_error("logits_processor: n = " + std::to_string(n) + " logits");
    params.validate();

    cands_.resize(static_cast<size_t>(n));
    for (int32_t i = 0; i < n; ++i) {
        const float l = logits[i];
        if (std::isnan(l) || l == INFINITY)
            throw invalid_argument_error("logits_processor: logit " + std::to_string(i) + " is " +
                                         std::to_string(l) + " (NaN/+inf; -inf masks a token)");
        cands_[static_cast<size_t>(i)] = {ids ? ids[i] : i, l};
    }

    // Repeat penalty, llama.cpp semantics: each distinct token of the window once, sign-aware.
    if (params.repeat_penalty != 1.0f && params.repeat_last_n != 0 && n_history > 0) {
        const size_t window = params.repeat_last_n < 0
                                  ? n_history
                                  : std::min(n_history, static_cast<size_t>(params.repeat_last_n));
        penalised_.assign(history + (n_history - window), history + n_history);
        std::sort(penalised_.begin(), penalised_.end());
        penalised_.erase(std::unique(penalised_.begin(), penalised_.end()), penalised_.end());
        auto penalise = [&](cand& c) {
            c.logit = c.logit > 0.0f ? c.logit / params.repeat_penalty : c.logit * params.repeat_penalty;
        };
        if (!ids) {
            for (int32_t t : penalised_)
                if (t >= 0 && t < n) penalise(cands_[static_cast<size_t>(t)]);
        } else {
            for (auto& c : cands_)
                if (std::binary_search(penalised_.begin(), penalised_.end(), c.id)) penalise(c);
        }
    }

    auto before = [](const cand& a, const cand& b) {  // descending logit, ties: lowest id first
        return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
    };

    if (params.greedy()) {
        out.set_point_mass(std::min_element(cands_.begin(), cands_.end(), before)->id);
        return;
    }

    if (params.temperature != 1.0f)
        for (auto& c : cands_) c.logit /= params.temperature;

    bool sorted = false;
    if (params.top_k > 0 && params.top_k < n) {
        auto kth = cands_.begin() + params.top_k;
        std::nth_element(cands_.begin(), kth, cands_.end(), before);
        cands_.resize(static_cast<size_t>(params.top_k));
        std::sort(cands_.begin(), cands_.end(), before);
        sorted = true;
    } else if (params.top_p < 1.0f) {
        std::sort(cands_.begin(), cands_.end(), before);
        sorted = true;
    }

    // Softmax with the max subtracted, in double; probs_ holds the unnormalised exp values.
    float max_logit = cands_[0].logit;
    if (!sorted)
        for (const auto& c : cands_) max_logit = std::max(max_logit, c.logit);
    const size_t m = cands_.size();
    probs_.resize(m);
    double sum = 0.0;
    for (size_t i = 0; i < m; ++i) {
        probs_[i] = std::exp(static_cast<double>(cands_[i].logit) - static_cast<double>(max_logit));
        sum += probs_[i];
    }
    if (!(sum > 0.0))  // every logit -inf
        throw invalid_argument_error("logits_processor: every logit is -inf");

    size_t keep = m;
    if (params.top_p < 1.0f) {  // cands_ is sorted here
        const double target = static_cast<double>(params.top_p) * sum;
        double cum = 0.0;
        for (size_t i = 0; i < m; ++i) {
            cum += probs_[i];
            if (cum >= target) {
                keep = i + 1;
                break;
            }
        }
    }

    // min-p relative to the max, whose exp value is exactly 1; then drop zeros and renormalise.
    const double min_rel = static_cast<double>(params.min_p);
    out.ids.clear();
    out.probs.clear();
    double kept = 0.0;
    for (size_t i = 0; i < keep; ++i)
        if (probs_[i] > 0.0 && probs_[i] >= min_rel) kept += probs_[i];
    for (size_t i = 0; i < keep; ++i) {
        if (probs_[i] > 0.0 && probs_[i] >= min_rel) {
            out.ids.push_back(cands_[i].id);
            out.probs.push_back(static_cast<float>(probs_[i] / kept));
        }
    }
}

}  // namespace specgen
