// docs/ALGORITHMS.md section 8.2: the auto speculator's choice.
#include "speculative/auto/policy.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

namespace specgen {

namespace {
// Priors for the self drafter over every layer with NanoSpec: its proposal is the target's own
// distribution restricted to S, so acceptance is high; lower when sampling spreads the target's mass.
// (Measured at the first draft position with gamma 8: 0.99 at T=0, 0.90 at T=1; priors of 0.95 / 0.85
// made auto stay on the self drafter longer where n-gram lookup won: 0.85-0.88x the best on chat.)
constexpr double kSelfPriorGreedy = 0.9, kSelfPriorSampled = 0.75;
constexpr double kPriorWeight = 4;        // pseudo-rounds the priors count for
constexpr double kPositionWeight = 2;     // pseudo-rounds a draft position's prior counts for
// A position's acceptance given the one before it held (prior; measured ~0.97 at T=0 and T=1).
constexpr double kContinuationPrior = 0.95;
constexpr double kFullOrder = 3.0;        // n-gram matches this long or longer get the pooled rate as their prior
constexpr double kExplore = 1.0;          // standard errors of optimism in the choice of g
constexpr double kTimingWeight = 0.05;    // predicted seconds the global timing correction's prior (1) counts for
constexpr double kMethodTimingWeight = 0.1;  // predicted seconds a method's correction's prior (the global one) counts for
constexpr double kDecay = 0.98;  // per round: the estimates kept across requests (timing, n-gram order, later positions) follow ~50 rounds
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
    regime_ = temperature > 0 ? 1 : 0;
    carried& kept = carried_[regime_];
    auto allocate = [&](later_positions& l) {
        l.reached.resize(size_t(std::max(1, draft_max_)), 0.0);
        l.passed.resize(size_t(std::max(1, draft_max_)), 0.0);
    };
    for (later_positions& l : kept.later) allocate(l);
    for (later_positions& l : kept.ngram_later) allocate(l);
    tracker& ng = t_[size_t(auto_method::ngram)];
    ng.prior = std::min(0.95, prompt_self_overlap(prompt));
    ng.prior_weight = kPriorWeight;
    // The self drafter's prior: its first-position rate over the requests so far, shrunk towards the
    // fixed prior (measured with NanoSpec's fixed gamma 8 on the reference model: 0.95-0.96 at T=0,
    // 0.87-0.88 at T=1).
    tracker& self = t_[size_t(auto_method::self_nanospec)];
    const carried& c = carried_[regime_];
    const double base = temperature > 0 ? kSelfPriorSampled : kSelfPriorGreedy;
    self.prior = (c.self_first_passed + kPriorWeight * base) / (c.self_first_reached + kPriorWeight);
    self.prior_weight = kPriorWeight;
}

double auto_policy::acceptance(auto_method m) const {
    const tracker& t = t_[size_t(m)];
    const double n = t.accepted + t.rejected + t.prior_weight;
    return n > 0 ? (t.accepted + t.prior * t.prior_weight) / n : 0.0;
}

auto_policy::position_counts auto_policy::first_position(auto_method m, int ngram_order) const {
    const tracker& t = t_[size_t(m)];
    const double a = acceptance(m);
    const int order = std::min(ngram_order, kMaxOrder);
    if (m == auto_method::ngram && order > 0) {
        // Counted per match order (kept across requests), with the pooled rate times min(1, order / 3)
        // as its prior: measured over the four prompt sets, a copy after a 1-token suffix was accepted
        // 0.33-0.44 of the time at T=0 and 0.24 at T=1, after a 2-token one 0.8 / 0.4-0.55, after a
        // 4-token one 0.87-0.93 / 0.85-0.87. Shrunk towards the pooled rate alone (which the long runs
        // of 4-token copies raise), 1-token matches kept being drafted at T=1 on the edit prompts and
        // rejected every time (0.73x the fixed n-gram configuration).
        const carried& c = carried_[regime_];
        return {c.order_reached[size_t(order)], c.order_passed[size_t(order)], a * std::min(1.0, order / kFullOrder),
                kPositionWeight};
    }
    if (m == auto_method::self_nanospec)
        // Towards the prior (the rate of the requests so far) with its full weight: towards the pooled
        // rate, which the same rejection had already lowered, one rejection at T=1 put the self drafter
        // below plain decoding for 7 rounds (0.8x NanoSpec's fixed configuration).
        return {t.first_reached, t.first_passed, t.prior, t.prior_weight};
    // Towards the pooled rate: every accepted token counts there, so it moves fast.
    return {t.first_reached, t.first_passed, a, kPositionWeight};
}

template <class Carried>
auto& auto_policy::later(Carried& kept, auto_method m, int ngram_order) {
    // A copy after a 1-token suffix continues less often than one after 4 (measured at T=0 and T=1:
    // its second position 0.3-0.6 against 0.9-0.92).
    if (m == auto_method::ngram) return kept.ngram_later[size_t(std::clamp(ngram_order, 0, kMaxOrder))];
    return kept.later[size_t(m)];
}

double auto_policy::expected_tokens(auto_method m, int g, double z, int ngram_order) const {
    const later_positions& l = later(carried_[regime_], m, ngram_order);
    const std::vector<double>& reached = l.reached;
    const std::vector<double>& passed = l.passed;
    // Acceptance is not i.i.d.: an n-gram proposal copied from the context tends to hold to its end
    // once its first tokens hold (measured: 55 of 60 drafted tokens accepted on a copy prompt, where
    // the pooled rate 0.93 predicted 3.7 tokens per round of 3 and made auto draft 3 instead of 8).
    // The first position's rate is shrunk as first_position() says, every later one towards the rate
    // before it but at least kContinuationPrior: a position not drafted yet would otherwise inherit
    // a low first-token rate and never be drafted to be measured. Measured with fixed gamma 8
    // (`specgen bench --preset auto`): after the first position the conditional rates are 0.92-1.0
    // for NanoSpec at T=0 and T=1 and ~1.0 for n-gram at T=1, whatever the first position's rate.
    // The later positions are counted over the requests so far (decayed like the timing): reset per
    // request, each request's ~13 rounds left their counts small, and the optimism that picks g
    // (kExplore standard errors) drafted 8 at T=1 where the measured rates made 5 the best.
    g = std::min(g, int(reached.size()));
    double e = 1, run = 1, p = 0;
    for (int k = 0; k < g; ++k) {
        const position_counts c = k == 0 ? first_position(m, ngram_order)
                                         : position_counts{reached[size_t(k)], passed[size_t(k)],
                                                           std::max(p, kContinuationPrior), kPositionWeight};
        const double n = c.reached + c.weight;
        p = (c.passed + c.weight * c.prior) / n;
        run *= std::min(1.0, p + z * std::sqrt(p * (1.0 - p) / n));
        e += run;
    }
    return e;
}

double auto_policy::time_scale(auto_method m) const {
    // The global scale says how much slower (or faster) the machine runs now than at calibration; a
    // method's own ratio, shrunk towards it, what the calibration misses for that method alone (a
    // calibration taken while another process ran: T(1) 1.4x the measured plain rounds, the 9-row
    // n-gram verification 0.9x, the self round 1.25x). Shrunk and decayed, a burst of load that hits
    // one method's rounds moves that method only a little and not for long.
    const carried& c = carried_[regime_];
    double measured = 0, predicted = 0;
    for (int i = 0; i < kAutoMethods; ++i) {
        measured += c.measured_s[size_t(i)];
        predicted += c.predicted_s[size_t(i)];
    }
    const double global = (measured + kTimingWeight) / (predicted + kTimingWeight);
    return (c.measured_s[size_t(m)] + kMethodTimingWeight * global) / (c.predicted_s[size_t(m)] + kMethodTimingWeight);
}

auto_choice auto_policy::predict(auto_method m, const auto_round& r) const {
    // The n-gram drafter's proposal is already known (its shadow): it drafts at most that many.
    const int room = std::min(draft_max_, r.max_g);
    const int g_max = m == auto_method::none ? 0 : m == auto_method::ngram ? std::min(room, r.ngram_tokens) : room;
    auto_choice best;
    if (g_max <= 0) {  // a plain round, also for a method that cannot draft now
        best.predicted_seconds = costs_.round_seconds(auto_method::none, 0, r.n_ids) * time_scale(auto_method::none);
        best.score = best.tokens_per_second();
        return best;
    }
    best.method = m;
    const double scale = time_scale(m);
    // The method is compared by its best mean rate (score); its g is the one with the best
    // optimistic rate (each position's rate one standard error up), so a position rejected in its
    // first rounds is drafted again until it is measured: on the mean, one early rejection held the
    // self drafter at g = 1 for the rest of a T=1 request (0.8x NanoSpec's fixed gamma). Optimism in
    // the choice of method as well cost more in exploring rounds than it found (0.8x on code).
    double best_optimistic = 0, best_mean = 0;
    for (int g = 1; g <= g_max; ++g) {
        auto_choice c;
        c.method = m;
        c.gamma = g;
        c.predicted_tokens = expected_tokens(m, g, 0.0, r.ngram_order);
        c.predicted_seconds = costs_.round_seconds(m, g, r.n_ids) * scale;
        best_mean = std::max(best_mean, c.tokens_per_second());
        const double optimistic = expected_tokens(m, g, kExplore, r.ngram_order) / c.predicted_seconds;
        if (best.gamma == 0 || optimistic > best_optimistic) {
            best = c;
            best_optimistic = optimistic;
        }
    }
    best.score = best_mean;
    return best;
}

auto_choice auto_policy::choose(const auto_round& r, bool allow_self) const {
    auto_choice best = predict(auto_method::none, r);
    for (auto_method m : {auto_method::ngram, auto_method::self_nanospec}) {
        if (m == auto_method::self_nanospec && (!have_self_ || !allow_self)) continue;
        const auto_choice c = predict(m, r);
        if (c.score > best.score * (best.method == auto_method::none ? kSwitchMargin : 1.0)) best = c;
    }
    return best;
}

void auto_policy::observe(auto_method m, int gamma, int n_accepted, double seconds, double predicted_seconds) {
    // The n-gram drafter is scored by its shadow every round.
    if (gamma > 0 && m != auto_method::ngram) count_round(m, gamma, n_accepted);
    if (gamma > 0 && m == auto_method::self_nanospec) {
        carried& c = carried_[regime_];
        c.self_first_reached = kDecay * c.self_first_reached + 1;
        c.self_first_passed = kDecay * c.self_first_passed + (n_accepted > 0 ? 1 : 0);
    }
    if (predicted_seconds > 0 && seconds > 0) {
        carried& c = carried_[regime_];
        for (int i = 0; i < kAutoMethods; ++i) {
            c.measured_s[size_t(i)] *= kDecay;
            c.predicted_s[size_t(i)] *= kDecay;
        }
        c.measured_s[size_t(m)] += seconds;
        c.predicted_s[size_t(m)] += predicted_seconds;
    }
}

void auto_policy::observe_shadow_ngram(int gamma, int n_matched, int order) {
    if (gamma <= 0) {  // no match: a round it would have spent as plain decoding
        t_[size_t(auto_method::ngram)].rejected += 1;
        return;
    }
    count_round(auto_method::ngram, gamma, n_matched, order);
    carried& c = carried_[regime_];
    for (int o = 0; o <= kMaxOrder; ++o) {
        c.order_reached[size_t(o)] *= kDecay;
        c.order_passed[size_t(o)] *= kDecay;
    }
    const size_t o = size_t(std::clamp(order, 0, kMaxOrder));
    c.order_reached[o] += 1;
    c.order_passed[o] += n_matched > 0 ? 1 : 0;
}

void auto_policy::count_round(auto_method m, int gamma, int n_accepted, int ngram_order) {
    tracker& t = t_[size_t(m)];
    t.accepted += n_accepted;
    t.rejected += n_accepted < gamma ? 1 : 0;
    // Positions 1..n_accepted held; position n_accepted + 1 (if drafted) was reached and failed.
    const int reached = std::min(gamma, n_accepted + 1);
    t.first_reached += 1;
    t.first_passed += n_accepted > 0 ? 1 : 0;
    // The later positions are counted across requests, decayed per round of the method.
    later_positions& l = later(carried_[regime_], m, ngram_order);
    for (size_t k = 1; k < l.reached.size(); ++k) {
        l.reached[k] *= kDecay;
        l.passed[k] *= kDecay;
    }
    for (int k = 1; k < reached && size_t(k) < l.reached.size(); ++k) {
        l.reached[size_t(k)] += 1;
        l.passed[size_t(k)] += k < n_accepted ? 1 : 0;
    }
}

}  // namespace specgen
