// logits_processor::process(), token_dist helpers and sample_token(); the pipeline is documented in
// sampling.h. Checked against a float64 numpy reference in tests/test_sampling.py.
//
// Cost for a full vocabulary of n ids: O(n) for penalty/softmax/min-p, O(n log k) worst case for
// top-k (a heap of k, nearly always one comparison per logit), and a sort only of the tokens that
// survive top-k and min-p when top-p runs (O(n log n) only without both).
#include <algorithm>
#include <cmath>
#include <string>

#include "backend/vec_math.h"
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

namespace {
// Length of the shortest prefix of probs[0..m) whose cumulative mass reaches target.
size_t prefix_reaching(const std::vector<double>& probs, size_t m, double target) {
    double cum = 0.0;
    for (size_t i = 0; i < m; ++i) {
        cum += probs[i];
        if (cum >= target) return i + 1;
    }
    return m;
}
}  // namespace

void logits_processor::process(const float* logits, const int32_t* ids, int32_t n,
                               const sampling_params& params, const int32_t* history,
                               size_t n_history, token_dist& out) {
    if (n <= 0) throw invalid_argument_error("logits_processor: n = " + std::to_string(n) + " logits");

    const bool penalty = params.repeat_penalty != 1.0f && params.repeat_last_n != 0 && n_history > 0;
    if (params.greedy() && !penalty && !ids) {
        // Greedy over the whole vocabulary: the SIMD argmax (ties: lowest id); a NaN / +inf logit
        // falls through to the loop below, which names it.
        const int64_t best = vec::argmax_finite(logits, n);
        if (best >= 0) {
            out.set_point_mass(int32_t(best));
            return;
        }
    }
    if (params.greedy() && !penalty) {
        // Fast path for greedy decoding: one pass, no candidate copy (ties: lowest id, as below).
        int32_t best = -1;
        float best_logit = -INFINITY;
        for (int32_t i = 0; i < n; ++i) {
            const float l = logits[i];
            if (std::isnan(l) || l == INFINITY)
                throw invalid_argument_error("logits_processor: logit " + std::to_string(i) + " is " +
                                             std::to_string(l) + " (NaN/+inf; -inf masks a token)");
            const int32_t id = ids ? ids[i] : i;
            if (best < 0 || l > best_logit || (l == best_logit && id < best)) {
                best = id;
                best_logit = l;
            }
        }
        out.set_point_mass(best);
        return;
    }

    cands_.resize(static_cast<size_t>(n));
    for (int32_t i = 0; i < n; ++i) {
        const float l = logits[i];
        if (std::isnan(l) || l == INFINITY)
            throw invalid_argument_error("logits_processor: logit " + std::to_string(i) + " is " +
                                         std::to_string(l) + " (NaN/+inf; -inf masks a token)");
        cands_[static_cast<size_t>(i)] = {ids ? ids[i] : i, l};
    }

    // Repeat penalty, llama.cpp semantics: each distinct token of the window once, sign-aware.
    if (penalty) {
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

    // top-k: one pass with a heap of the k best (its front is the worst kept), then sort the k.
    bool sorted = false;
    if (params.top_k > 0 && params.top_k < n) {
        const auto k = static_cast<size_t>(params.top_k);
        const auto first = cands_.begin(), kth = first + static_cast<std::ptrdiff_t>(k);
        std::make_heap(first, kth, before);
        for (size_t i = k; i < cands_.size(); ++i) {
            if (!before(cands_[i], cands_[0])) continue;
            std::pop_heap(first, kth, before);
            cands_[k - 1] = cands_[i];
            std::push_heap(first, kth, before);
        }
        cands_.resize(k);
        std::sort(cands_.begin(), cands_.end(), before);
        sorted = true;
    }

    // Softmax with the max subtracted, in double; probs_ holds the unnormalised exp values (max = 1).
    float max_logit = cands_[0].logit;
    if (!sorted)
        for (const auto& c : cands_) max_logit = std::max(max_logit, c.logit);
    const auto rel_prob = [&](const cand& c) {
        return std::exp(static_cast<double>(c.logit) - static_cast<double>(max_logit));
    };
    size_t m = cands_.size();
    probs_.resize(m);
    double sum = 0.0;
    for (size_t i = 0; i < m; ++i) sum += (probs_[i] = rel_prob(cands_[i]));
    if (!(sum > 0.0))  // every logit -inf
        throw invalid_argument_error("logits_processor: every logit is -inf");

    // top-p and min-p each keep a prefix of the descending order, so applying min-p first (O(n), no
    // sort) and then top-p on what is left, with the cumulative mass taken relative to the full sum,
    // keeps exactly the same tokens while sorting only min-p's survivors. Zeros are dropped here too.
    const double min_rel = static_cast<double>(params.min_p);
    size_t kept_n = 0;
    for (size_t i = 0; i < m; ++i) {
        if (probs_[i] > 0.0 && probs_[i] >= min_rel) {
            cands_[kept_n] = cands_[i];
            probs_[kept_n++] = probs_[i];
        }
    }
    m = kept_n;
    cands_.resize(m);
    probs_.resize(m);
    if (params.top_p < 1.0f) {
        const double target = static_cast<double>(params.top_p) * sum;
        if (sorted) {
            m = prefix_reaching(probs_, m, target);
        } else {
            // Sort only as far as the nucleus reaches: the best 1024 first, doubling while the
            // cumulative mass is short of the target. Without top-k this avoids sorting 262k ids.
            size_t done = 0;
            double cum = 0.0;
            for (size_t c = std::min<size_t>(m, 1024);; c = std::min(m, 2 * c)) {
                std::partial_sort(cands_.begin() + done, cands_.begin() + c, cands_.begin() + m, before);
                for (size_t i = done; i < c; ++i) {
                    probs_[i] = rel_prob(cands_[i]);
                    cum += probs_[i];
                    if (cum >= target) {
                        c = i + 1;
                        m = c;
                        break;
                    }
                }
                if (m == c) break;
                done = c;
            }
        }
    }

    double kept = 0.0;
    for (size_t i = 0; i < m; ++i) kept += probs_[i];
    out.ids.resize(m);
    out.probs.resize(m);
    for (size_t i = 0; i < m; ++i) {
        out.ids[i] = cands_[i].id;
        out.probs[i] = static_cast<float>(probs_[i] / kept);
    }
}

}  // namespace specgen
