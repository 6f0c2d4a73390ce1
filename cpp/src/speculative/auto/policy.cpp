// docs/ALGORITHMS.md section 8.2: the auto speculator's choice.
#include "speculative/auto/policy.h"

#include <algorithm>
#include <unordered_map>

namespace specgen {

namespace {
// Priors for the self drafter over every layer with NanoSpec: its proposal is the target's own
// distribution restricted to S, so acceptance is high; lower when sampling spreads the target's mass.
constexpr double kSelfPriorGreedy = 0.9, kSelfPriorSampled = 0.75;
constexpr double kPriorWeight = 4;        // pseudo-rounds the priors count for
constexpr double kTimingWeight = 0.05;    // seconds of predicted time the timing correction's prior counts for
constexpr double kSwitchMargin = 1.03;    // hysteresis is applied by the caller through the current method
}  // namespace

double prompt_self_overlap(const std::vector<int32_t>& prompt) {
    std::unordered_map<int32_t, int32_t> next;  // token -> the token that followed its latest occurrence
    int64_t hits = 0, n = 0;
    for (size_t i = 1; i < prompt.size(); ++i) {
        auto it = next.find(prompt[i - 1]);
        if (it != next.end()) {
            n += 1;
            hits += it->second == prompt[i];
        }
        next[prompt[i - 1]] = prompt[i];
    }
    // Positions without an earlier occurrence draft nothing: count them as misses, at half weight.
    const double total = double(n) + 0.5 * double(int64_t(prompt.size()) - 1 - n);
    return total > 0 ? double(hits) / total : 0.0;
}

void auto_policy::begin(const std::vector<int32_t>& prompt, float temperature) {
    t_ = {};
    tracker& ng = t_[size_t(auto_method::ngram)];
    ng.prior = std::min(0.95, prompt_self_overlap(prompt));
    ng.prior_weight = kPriorWeight;
    tracker& self = t_[size_t(auto_method::self_nanospec)];
    self.prior = temperature > 0 ? kSelfPriorSampled : kSelfPriorGreedy;
    self.prior_weight = kPriorWeight;
}

double auto_policy::acceptance(auto_method m) const {
    const tracker& t = t_[size_t(m)];
    const double n = t.accepted + t.rejected + t.prior_weight;
    return n > 0 ? (t.accepted + t.prior * t.prior_weight) / n : 0.0;
}

double auto_policy::time_scale(auto_method) const {
    // One scale for every method: how much slower (or faster) the machine runs now than at
    // calibration. Per method it would blame a burst of load on whichever method ran in it and hand
    // the next rounds to a method whose times were never corrected.
    double measured = 0, predicted = 0;
    for (const tracker& t : t_) {
        measured += t.measured_s;
        predicted += t.predicted_s;
    }
    return (measured + kTimingWeight) / (predicted + kTimingWeight);
}

auto_choice auto_policy::predict(auto_method m, int n_ids) const {
    auto_choice best;
    best.method = m;
    const double scale = time_scale(m);
    if (m == auto_method::none) {
        best.predicted_seconds = costs_.round_seconds(m, 0, n_ids) * scale;
        return best;
    }
    const double a = acceptance(m);
    for (int g = 1; g <= draft_max_; ++g) {
        auto_choice c;
        c.method = m;
        c.gamma = g;
        c.predicted_tokens = expected_tokens(a, g);
        c.predicted_seconds = costs_.round_seconds(m, g, n_ids) * scale;
        if (best.gamma == 0 || c.tokens_per_second() > best.tokens_per_second()) best = c;
    }
    return best;
}

auto_choice auto_policy::choose(int n_ids, bool allow_self) const {
    auto_choice best = predict(auto_method::none, n_ids);
    for (auto_method m : {auto_method::ngram, auto_method::self_nanospec}) {
        if (m == auto_method::self_nanospec && (!have_self_ || !allow_self)) continue;
        const auto_choice c = predict(m, n_ids);
        if (c.tokens_per_second() > best.tokens_per_second() * (best.method == auto_method::none ? kSwitchMargin : 1.0))
            best = c;
    }
    return best;
}

void auto_policy::observe(auto_method m, int gamma, int n_accepted, double seconds, double predicted_seconds) {
    tracker& t = t_[size_t(m)];
    if (gamma > 0 && m != auto_method::ngram) {  // the n-gram drafter is scored by its shadow every round
        t.accepted += n_accepted;
        t.rejected += n_accepted < gamma ? 1 : 0;
    }
    if (predicted_seconds > 0 && seconds > 0) {
        t.measured_s += seconds;
        t.predicted_s += predicted_seconds;
    }
}

void auto_policy::observe_shadow_ngram(int gamma, int n_matched) {
    tracker& t = t_[size_t(auto_method::ngram)];
    if (gamma <= 0) {  // no match: a round it would have spent as plain decoding
        t.rejected += 1;
        return;
    }
    t.accepted += n_matched;
    t.rejected += n_matched < gamma ? 1 : 0;
}

}  // namespace specgen
