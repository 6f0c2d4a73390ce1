// docs/ALGORITHMS.md section 8.2: the auto speculator's choice. The measurements behind each rule are
// in docs/bench/auto-policy-notes.md, cited below as "note N".
#include "speculative/auto/policy.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <utility>

namespace specgen {

namespace {
// Priors for the self drafter over every layer with NanoSpec: its proposal is the target's own
// distribution restricted to S, so acceptance is high; lower when sampling spreads the target's mass.
// Below the measured rates, so that n-gram lookup wins where it should (note 1).
constexpr double kSelfPriorGreedy = 0.9, kSelfPriorSampled = 0.75;
// A draft model is a smaller model of the same family: its proposal agrees less often than the target's
// own layers (a modest prior; its rounds soon replace it).
constexpr double kModelPriorGreedy = 0.7, kModelPriorSampled = 0.6;
// An EAGLE-3 head reads the target's own features but is one layer: the draft model's modest prior.
constexpr double kHeadPriorGreedy = 0.7, kHeadPriorSampled = 0.6;
constexpr double kPriorWeight = 4;        // pseudo-rounds the priors count for
constexpr double kPositionWeight = 2;     // pseudo-rounds a draft position's prior counts for
// A position's acceptance given the one before it held (prior; note 2).
constexpr double kContinuationPrior = 0.95;
constexpr double kFullOrder = 3.0;        // n-gram matches this long or longer get the pooled rate as their prior
constexpr double kHazardWeight = 10;      // pseudo-positions a request's own later-position failures are shrunk with
constexpr double kExplore = 1.0;          // standard errors of optimism in the choice of g
constexpr double kTimingRounds = 2;       // pseudo-rounds the timing correction's priors (no correction) count for
constexpr double kIdleTimingDecay = 0.9;  // per round of another method: a method's own timing excess fades (note 11)
// Per round of another method: what a neural drafter's first position measured fades towards its prior
// (note 14).
constexpr double kIdleAcceptanceDecay = 0.95;
constexpr double kDecay = 0.98;  // per round: the estimates kept across requests (timing, n-gram order, later positions) follow ~50 rounds
constexpr double kRecentDecay = 0.7;     // per round: a request's recent rate (choose()) follows ~3 rounds
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
    recent_tokens_ = recent_seconds_ = 0;
    regime_ = temperature > 0 ? 1 : 0;
    carried& kept = carried_[regime_];
    auto allocate = [&](later_positions& l) {
        l.reached.resize(size_t(std::max(1, draft_max_)), 0.0);
        l.passed.resize(size_t(std::max(1, draft_max_)), 0.0);
    };
    for (later_positions& l : kept.later) allocate(l);
    for (later_positions& l : kept.ngram_later) allocate(l);
    allocate(kept.self_drafting);
    tracker& ng = t_[size_t(auto_method::ngram)];
    ng.prior = std::min(0.95, prompt_self_overlap(prompt));
    ng.prior_weight = kPriorWeight;
    // A neural drafter's prior: its first-position rate over the requests so far, shrunk towards the
    // fixed prior (note 3).
    const bool sampled = temperature > 0;
    for (auto [m, base] : {std::pair{auto_method::self_nanospec, sampled ? kSelfPriorSampled : kSelfPriorGreedy},
                           std::pair{auto_method::draft_model, sampled ? kModelPriorSampled : kModelPriorGreedy},
                           std::pair{auto_method::draft_head, sampled ? kHeadPriorSampled : kHeadPriorGreedy}}) {
        tracker& t = t_[size_t(m)];
        const size_t i = size_t(m);
        t.prior = (kept.first_passed[i] + kPriorWeight * base) / (kept.first_reached[i] + kPriorWeight);
        t.prior_weight = kPriorWeight;
    }
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
        // as its prior: a copy after a short suffix is accepted far less often than after a long one.
        // This request's own rounds at the order are then shrunk towards that kept rate (note 4).
        const carried& c = carried_[regime_];
        const double kept = (c.order_passed[size_t(order)] + kPositionWeight * a * std::min(1.0, order / kFullOrder)) /
                            (c.order_reached[size_t(order)] + kPositionWeight);
        return {t.order_reached[size_t(order)], t.order_passed[size_t(order)], kept, kPositionWeight};
    }
    if (m == auto_method::self_nanospec || m == auto_method::draft_model || m == auto_method::draft_head)
        // Towards the prior (the rate of the requests so far) with its full weight, not towards the
        // pooled rate, which the same rejection has already lowered (note 5).
        return {t.first_reached, t.first_passed, t.prior, t.prior_weight};
    // Towards the pooled rate: every accepted token counts there, so it moves fast.
    return {t.first_reached, t.first_passed, a, kPositionWeight};
}

template <class Carried>
auto& auto_policy::later(Carried& kept, auto_method m, int ngram_order) {
    // A copy after a 1-token suffix continues less often than one after 4 (note 6).
    if (m == auto_method::ngram) return kept.ngram_later[size_t(std::clamp(ngram_order, 0, kMaxOrder))];
    return kept.later[size_t(m)];
}

double auto_policy::request_hazard(auto_method m, double z) const {
    // The later positions' rates are kept across requests, but a request's difficulty is its own
    // (note 7). So the kept failure rate 1 - p_k is scaled by this request's failures over the failures
    // the kept rates expected at the positions its rounds reached (observed over expected, so copies of
    // every match order can be pooled), shrunk towards 1 with kHazardWeight pseudo-positions at the
    // request's mean expected failure rate.
    const tracker& t = t_[size_t(m)];
    const double rate = t.later_reached > 0 ? t.later_expected_failures / t.later_reached : 1 - kContinuationPrior;
    const double failed = t.later_failed + kHazardWeight * rate, expected = t.later_expected_failures + kHazardWeight * rate;
    // Failures are counts: their standard error is about sqrt(failed). Taken down by it, one early
    // failure cannot hold a request at g = 1, whose rounds never reach a later position again (note 7).
    return std::max(0.0, failed - z * std::sqrt(failed)) / expected;
}

double auto_policy::expected_tokens(auto_method m, int g, double z, int ngram_order) const {
    const later_positions& l = later(carried_[regime_], m, ngram_order);
    const std::vector<double>& reached = l.reached;
    const std::vector<double>& passed = l.passed;
    // Acceptance is not i.i.d.: an n-gram proposal copied from the context tends to hold to its end
    // once its first tokens hold, and after the first position the conditional rates stay high whatever
    // the first position's (note 8). The first position's rate is shrunk as first_position() says, every
    // later one towards the rate before it but at least kContinuationPrior: a position not drafted yet
    // would otherwise inherit a low first-token rate and never be drafted to be measured. The later
    // positions are counted over the requests so far (decayed like the timing), since one request's
    // rounds leave their counts too small for the optimism that picks g (note 8).
    g = std::min(g, int(reached.size()));
    const double hazard = request_hazard(m, z);
    double e = 1, run = 1, p = 0;
    for (int k = 0; k < g; ++k) {
        const position_counts c = k == 0 ? first_position(m, ngram_order)
                                         : position_counts{reached[size_t(k)], passed[size_t(k)],
                                                           std::max(p, kContinuationPrior), kPositionWeight};
        const double n = c.reached + c.weight;
        p = (c.passed + c.weight * c.prior) / n;
        if (k > 0) p = std::clamp(1 - (1 - p) * hazard, 0.0, 1.0);
        // A position yields a token when it is drafted (the drafter may stop before it) and accepted.
        run *= draft_continuation(m, k, z) * std::min(1.0, p + z * std::sqrt(p * (1.0 - p) / n));
        e += run;
    }
    return e;
}

double auto_policy::expected_chained_tokens(int g, int chained, double z, int ngram_order) const {
    const int c = std::clamp(chained, 0, g);
    if (c == 0) return expected_tokens(auto_method::draft_model, g, z);
    // E = E_ngram(c) + P(the c copied tokens all held) (E_model(g - c) - 1): after an accepted copy the
    // model drafts from a context it has not seen fail, so its positions count from its first.
    const double copied = expected_tokens(auto_method::ngram, c, z, ngram_order);
    const double all_held = copied - expected_tokens(auto_method::ngram, c - 1, z, ngram_order);
    return copied + all_held * (expected_tokens(auto_method::draft_model, g - c, z) - 1);
}

double auto_policy::kept_continuation(int k) const {
    // Prior 1: no stop until one is seen.
    const later_positions& d = carried_[regime_].self_drafting;
    if (k >= int(d.reached.size())) return 1;
    return (d.passed[size_t(k)] + kPositionWeight) / (d.reached[size_t(k)] + kPositionWeight);
}

double auto_policy::draft_continuation(auto_method m, int k, double z) const {
    // Only the self drafter stops early (below draft_p_min over S). Where it stops depends on the text
    // like acceptance does (note 9). So the first position's rate is this request's own, shrunk towards
    // the kept one with kPositionWeight pseudo-rounds, and the later positions' kept stop rates 1 - d_k
    // are scaled by the request's stops there over those they expected (pooled over the positions, like
    // request_hazard). The first position is not scaled, nor are the later ones estimated apart (note 9).
    if (m != auto_method::self_nanospec) return 1;
    const tracker& t = t_[size_t(m)];
    if (k == 0) {
        const double n = t.first_drafting_reached + kPositionWeight;
        const double d = (t.first_drafting_passed + kPositionWeight * kept_continuation(0)) / n;
        return std::min(1.0, d + z * std::sqrt(d * (1 - d) / n));
    }
    const double kept = kept_continuation(k);
    const double rate = t.later_stop_positions > 0 ? t.later_expected_stops / t.later_stop_positions : 1 - kContinuationPrior;
    const double stops = t.later_stops + kHazardWeight * rate, expected = t.later_expected_stops + kHazardWeight * rate;
    if (!(expected > 0)) return kept;  // no stop seen anywhere yet
    const double hazard = std::max(0.0, stops - z * std::sqrt(stops)) / expected;
    return std::clamp(1 - (1 - kept) * hazard, 0.0, 1.0);
}

double auto_policy::expected_seconds(auto_method m, int g, int n_ids, int chained) const {
    if (m != auto_method::self_nanospec || g <= 0) return costs_.round_seconds(m, g, n_ids, chained);
    // The drafter stops before position j + 1 when its top probability there is below draft_p_min,
    // and goes on with rate d_j. The round's time is the mean over where it stops: a stop after j
    // tokens verifies j + 1 rows, and its last row and head over S ran for nothing but the stop.
    double seconds = 0, reach = 1;  // reach: the chance the drafter drafts j tokens or more
    for (int j = 0; j < g; ++j) {
        const double d = draft_continuation(m, j);
        seconds += reach * (1 - d) * costs_.stopped_round_seconds(j, n_ids);
        reach *= d;
    }
    return seconds + reach * costs_.round_seconds(m, g, n_ids);
}

int auto_policy::seed_rows(const auto_choice& self, const auto_round& r, int64_t remaining, int kept, double share) const {
    // Seeding runs the seed head (a share of the full head's rows) over the kept rows. Over the tokens
    // the request may still generate, the self drafter saves remaining (1 / r_0 - 1 / r_s) against
    // plain decoding; the last k rows earn about the share 1 - exp(-k / 12) of what all of them give
    // (note 10). The k (in steps of 8) with the largest saving less the head's time over k rows, if
    // that is positive.
    const double plain = predict(auto_method::none, r).tokens_per_second();
    const double rate = self.tokens_per_second();
    if (plain <= 0 || rate <= plain || remaining <= 0) return 0;
    const double saving = double(remaining) * (1 / plain - 1 / rate);
    int best = 0;
    double best_gain = 0;
    for (int step = 8; step - 8 < kept; step += 8) {
        const int k = std::min(step, kept);  // the last step takes every kept row
        const double gain = saving * (1 - std::exp(-k / 12.0)) - share * costs_.head_seconds(k) * time_scale(auto_method::none);
        if (gain > best_gain) best = k, best_gain = gain;
    }
    return best;
}

double auto_policy::global_log_scale() const {
    const carried& c = carried_[regime_];
    return c.log_ratio / (c.timed_rounds + kTimingRounds);
}

double auto_policy::time_scale(auto_method m) const {
    // The global scale says how much slower (or faster) the machine runs now than at calibration; a
    // method's own excess over it, what the calibration misses for that method alone (note 11). Both are
    // means of log(measured / predicted) per round, so a burst of load counts by its rounds, not by its
    // long seconds, and a method's excess fades while it does not run: a burst that hit its rounds does
    // not keep it out of the choice once the machine is quiet again.
    if (costs_.exact) return 1.0;
    const carried& c = carried_[regime_];
    const size_t i = size_t(m);
    return std::exp(global_log_scale() + c.excess_log_ratio[i] / (c.excess_rounds[i] + kTimingRounds));
}

auto_choice auto_policy::predict(auto_method m, const auto_round& r, double rate) const {
    // The n-gram drafter's proposal is already known (its shadow): it drafts at most that many.
    const int room = std::min(draft_max_, r.max_g);
    const int g_max = m == auto_method::none ? 0 : m == auto_method::ngram ? std::min(room, r.ngram_tokens) : room;
    auto_choice best;
    if (g_max <= 0) {  // a plain round, also for a method that cannot draft now
        best.predicted_seconds = costs_.round_seconds(auto_method::none, 0, r.n_ids) * time_scale(auto_method::none);
        best.score = rate > 0 ? 1 - rate * best.predicted_seconds : best.tokens_per_second();
        return best;
    }
    const double scale = time_scale(m);
    const int n_ids = m == auto_method::draft_model ? r.n_model_ids
                      : m == auto_method::draft_head ? r.n_head_ids
                                                     : r.n_ids;  // the method's own head
    // The round drafts the g with the best optimistic merit (each position's rate one standard error
    // up), so a position rejected in its first rounds is drafted again until it is measured. But it
    // explores only among the g whose mean merit is at least plain decoding's, and the method competes
    // with the mean merit of the g it drafts, not its optimistic one (note 12).
    auto merit = [rate](double tokens, double seconds) { return rate > 0 ? tokens - rate * seconds : tokens / seconds; };
    const double plain = predict(auto_method::none, r, rate).score;
    auto_choice best_mean_choice;  // the g of the best mean merit: drafted when no g reaches plain's
    double best_optimistic = 0;
    // A draft model round may start with the n-gram match (ngram_chain): as much of it as g holds, by the
    // copy's rates and then the model's, priced by the model's rows and heads alone. Each g is tried both
    // ways, so a match that predicts fewer tokens per second than the model alone is not chained.
    const bool may_chain = m == auto_method::draft_model && model_chains_ && r.chain_tokens > 0;
    auto tokens = [&](int g, int chained, double z) {
        return chained > 0 ? expected_chained_tokens(g, chained, z, r.chain_order) : expected_tokens(m, g, z, r.ngram_order);
    };
    for (int g = 1; g <= g_max; ++g) {
        for (int variant = 0; variant < (may_chain ? 2 : 1); ++variant) {
            const int chained = variant == 0 ? 0 : std::min(g, r.chain_tokens);
            auto_choice c;
            c.method = m;
            c.gamma = g;
            c.chained = chained;
            c.predicted_tokens = tokens(g, chained, 0.0);
            c.predicted_seconds = expected_seconds(m, g, n_ids, chained) * scale;
            c.score = merit(c.predicted_tokens, c.predicted_seconds);
            if ((g == 1 && chained == 0) || c.score > best_mean_choice.score) best_mean_choice = c;
            if (c.score < plain) continue;
            const double optimistic = merit(tokens(g, chained, kExplore), c.predicted_seconds);
            if (best.gamma == 0 || optimistic > best_optimistic) {
                best = c;
                best_optimistic = optimistic;
            }
        }
    }
    return best.gamma > 0 ? best : best_mean_choice;
}

bool auto_policy::can_choose(auto_method m) const {
    switch (m) {
        case auto_method::self_nanospec: return have_self_;
        case auto_method::draft_model: return costs_.has_draft();
        case auto_method::draft_head: return costs_.has_eagle3();
        default: return true;
    }
}

auto_choice auto_policy::choose(const auto_round& r, bool allow_self) const {
    // Each round takes the method and g with the best predicted rate E(g) / t(g): the best choice if
    // the same round repeated for the rest of the request. When the request's recent rounds ran faster
    // than any choice now promises (inside an n-gram copy that has no proposal for one round), a round
    // is worth the tokens it yields beyond what the recent rate would have given in its time,
    // E(g) - rate * t(g) (the renewal-reward criterion; note 13). The recent rate decays within a few
    // rounds, so text that stops copying goes back to the best rate.
    auto best_of = [&](double rate) {
        auto_choice best = predict(auto_method::none, r, rate);
        const double plain = best.score;
        for (auto_method m : {auto_method::ngram, auto_method::self_nanospec, auto_method::draft_model, auto_method::draft_head}) {
            if (!can_choose(m) || (m != auto_method::ngram && !allow_self)) continue;
            const auto_choice c = predict(m, r, rate);
            // A drafting method must beat plain decoding by kSwitchMargin.
            const bool over_plain = rate > 0 ? c.score > plain + (kSwitchMargin - 1) : c.score > plain * kSwitchMargin;
            if (over_plain && (best.method == auto_method::none || c.score > best.score)) best = c;
        }
        return best;
    };
    const auto_choice best = best_of(0);
    const double recent = recent_seconds_ > 0 ? recent_tokens_ / recent_seconds_ : 0;
    return recent > best.score ? best_of(recent) : best;
}

void auto_policy::observe(auto_method m, int gamma, int drafted, int n_accepted, double seconds, double predicted_seconds,
                          int chained) {
    // An exact cost model times rounds by its predictions only, so that no choice depends on the clock.
    const double round_seconds = costs_.exact ? predicted_seconds : seconds;
    if (round_seconds > 0) {
        recent_tokens_ = kRecentDecay * recent_tokens_ + (n_accepted + 1);
        recent_seconds_ = kRecentDecay * recent_seconds_ + round_seconds;
    }
    // The n-gram drafter is scored by its shadow every round. The acceptance counts are over the
    // drafted tokens; where the self drafter stopped short of gamma is counted apart (its continuation
    // rates, draft_continuation()). A chained copy is the shadow's too: the draft model's counts are
    // over its own tokens after it, in the rounds that reached them (every copied token accepted).
    if (chained > 0) {
        const bool reached = n_accepted >= chained && drafted > chained;
        drafted = reached ? drafted - chained : 0;
        n_accepted = reached ? n_accepted - chained : 0;
    }
    if (drafted > 0 && m != auto_method::ngram) count_round(m, drafted, n_accepted);
    {
        // The neural drafters' first positions, kept across requests. A drafter's rounds decay its own
        // counts; the rounds of other methods fade them, so a spell of rejections (a short first request)
        // cannot hold a drafter below plain decoding for good (note 14).
        carried& c = carried_[regime_];
        for (auto_method d : {auto_method::self_nanospec, auto_method::draft_model, auto_method::draft_head}) {
            const size_t i = size_t(d);
            if (d == m && drafted > 0) {
                c.first_reached[i] = kDecay * c.first_reached[i] + 1;
                c.first_passed[i] = kDecay * c.first_passed[i] + (n_accepted > 0 ? 1 : 0);
            } else if (d != m) {
                c.first_reached[i] *= kIdleAcceptanceDecay;
                c.first_passed[i] *= kIdleAcceptanceDecay;
            }
        }
    }
    // Positions 1..drafted were drafted; position drafted + 1 (if chosen) was reached and not. This
    // request's own counts are kept beside them (draft_continuation).
    if (gamma > 0 && m == auto_method::self_nanospec) {
        tracker& t = t_[size_t(m)];
        const int reached = std::min(gamma, drafted + 1);
        t.first_drafting_reached += 1;
        t.first_drafting_passed += drafted > 0 ? 1 : 0;
        for (int k = 1; k < reached; ++k) {
            t.later_stop_positions += 1;
            t.later_expected_stops += 1 - kept_continuation(k);
            t.later_stops += k == drafted ? 1 : 0;
        }
        carried_[regime_].self_drafting.count(0, reached, drafted);
    }
    if (predicted_seconds > 0 && seconds > 0) {
        const double ratio = std::log(seconds / predicted_seconds), global = global_log_scale();
        carried& c = carried_[regime_];
        c.log_ratio = kDecay * c.log_ratio + ratio;
        c.timed_rounds = kDecay * c.timed_rounds + 1;
        for (int i = 0; i < kAutoMethods; ++i) {
            const double decay = i == int(m) ? kDecay : kIdleTimingDecay;
            c.excess_log_ratio[size_t(i)] *= decay;
            c.excess_rounds[size_t(i)] *= decay;
        }
        c.excess_log_ratio[size_t(m)] += ratio - global;
        c.excess_rounds[size_t(m)] += 1;
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
    if (m == auto_method::ngram) {
        const size_t o = size_t(std::clamp(ngram_order, 0, kMaxOrder));
        t.order_reached[o] += 1;
        t.order_passed[o] += n_accepted > 0 ? 1 : 0;
    }
    // The later positions are counted across requests, decayed per round of the method; this request's
    // own are compared with what those counts expected before this round.
    later_positions& l = later(carried_[regime_], m, ngram_order);
    for (int k = 1; k < reached && size_t(k) < l.reached.size(); ++k) {
        t.later_reached += 1;
        t.later_failed += k < n_accepted ? 0 : 1;
        t.later_expected_failures += 1 - (l.passed[size_t(k)] + kPositionWeight * kContinuationPrior) / (l.reached[size_t(k)] + kPositionWeight);
    }
    l.count(1, reached, n_accepted);
}

void auto_policy::later_positions::count(int from, int end, int held) {
    for (size_t k = size_t(from); k < reached.size(); ++k) {
        reached[k] *= kDecay;
        passed[k] *= kDecay;
    }
    for (int k = from; k < end && size_t(k) < reached.size(); ++k) {
        reached[size_t(k)] += 1;
        passed[size_t(k)] += k < held ? 1 : 0;
    }
}

}  // namespace specgen
