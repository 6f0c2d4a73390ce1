// The auto speculator's choice (docs/ALGORITHMS.md section 8.2): per method a live acceptance
// estimate (a prior before the method's first round) and per draft position the conditional
// acceptance rates, a timing correction, and the argmax of the predicted tokens per second over
// methods and draft lengths. Every input is an outcome already
// emitted or a time already measured, so the choice never depends on the round it is made for.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "speculative/auto/cost_model.h"

namespace specgen {

// The prompt's n-gram self-overlap: the fraction of prompt positions whose token equals the one
// that followed the most recent earlier occurrence of the preceding token (a prompt-lookup hit
// rate over the prompt itself: the n-gram prior).
double prompt_self_overlap(const std::vector<int32_t>& prompt);

struct auto_choice {
    auto_method method = auto_method::none;
    int gamma = 0;
    double predicted_tokens = 1;   // E[tokens per round]
    double predicted_seconds = 0;  // the round's predicted time (timing-corrected)
    int chained = 0;               // a draft model round: the n-gram match's tokens it starts with (0: none)
    double score = 0;              // what choose() compares: the mean tokens per second (or gain) at gamma (predict())
    double tokens_per_second() const { return predicted_seconds > 0 ? predicted_tokens / predicted_seconds : 0; }
};

// What a round's choice depends on besides the outcomes so far.
struct auto_round {
    int n_ids = 0;         // |S| now (the self drafter's)
    int ngram_tokens = 0;  // the n-gram drafter's proposal for this round (its shadow): an n-gram round drafts no more
    int ngram_order = 0;   // the length of the history suffix that proposal copied (0: none)
    int max_g = 0;         // the most tokens any round may draft now (the token budget and the context)
    int n_model_ids = 0;   // the draft model's head: |S| of its NanoSpec set, 0 for its full head
    int n_head_ids = 0;    // the EAGLE-3 head's output: |S| of its NanoSpec set, 0 for its draft vocabulary
    // ngram_chain: the match a draft model round may start with (at least ngram_chain tokens; 0: none), and
    // the length of the history suffix it copied.
    int chain_tokens = 0;
    int chain_order = 0;
};

class auto_policy {
public:
    // model_chains: a draft model round may start with the n-gram match (auto_round::chain_tokens;
    // ngram_chain, docs/ALGORITHMS.md section 6.1); predict() takes it where that predicts the better rate.
    auto_policy(const cost_model& costs, int draft_max, bool have_self, bool model_chains = false)
        : costs_(costs), draft_max_(draft_max), have_self_(have_self), model_chains_(model_chains) {}

    // A request starts: priors from the prompt and the temperature.
    void begin(const std::vector<int32_t>& prompt, float temperature);
    // The best method and gamma for the next round. allow_self = false: none or n-gram only, no
    // neural drafter (the self drafter, the draft model or the EAGLE-3 head: a batched step,
    // auto_speculator.h). The draft model and the head compete when the cost model has their costs
    // (cost_model::has_draft, has_eagle3).
    auto_choice choose(const auto_round& r, bool allow_self = true) const;
    // Whether `m` is a candidate at all: the self drafter when enabled, the draft model and the head
    // when the cost model has their costs.
    bool can_choose(auto_method m) const;
    // The prediction for one method (used by choose() and the forced switches): the g it drafts (the
    // best optimistic merit among the g whose mean merit reaches plain decoding's) and its mean merit
    // there as the score. rate = 0: the merit is the rate E(g) / t(g); rate > 0: the gain
    // E(g) - rate t(g), the tokens a round yields beyond what `rate` would have given in its time.
    auto_choice predict(auto_method m, const auto_round& r, double rate = 0) const;
    // A round of `m` chosen at `gamma` drafted `drafted` tokens (fewer: the drafter stopped below
    // draft_p_min), accepted n_accepted of them and took `seconds` (propose to verdict);
    // predicted_seconds: what the cost model said the drafted round would take. chained: the round's first
    // tokens were an n-gram match (a chaining draft model), scored by the shadow: m's own counts start
    // after them, when they were all accepted.
    void observe(auto_method m, int gamma, int drafted, int n_accepted, double seconds, double predicted_seconds,
                 int chained = 0);
    // Shadow evaluation of the n-gram drafter (free to run): its proposal, copied after a suffix of
    // `order` tokens, matched the first n_matched of `gamma` emitted tokens.
    void observe_shadow_ngram(int gamma, int n_matched, int order);
    // The pooled i.i.d. acceptance of `m` (with its prior).
    double acceptance(auto_method m) const;
    // E[tokens per round] of `m` drafting g tokens: 1 + sum_k prod_{j<=k} p_j over the per-position
    // conditional acceptance p_j (each shrunk towards the pooled rate; an n-gram proposal's first
    // position by the order it matched at); z > 0: each p_j taken z standard errors up (the
    // optimistic estimate that picks g).
    double expected_tokens(auto_method m, int g, double z = 0.0, int ngram_order = 0) const;
    // The same for a chaining draft model's round of g tokens whose first `chained` are the n-gram
    // proposal (copied after a suffix of ngram_order tokens): the n-gram's rates over those, then the
    // draft model's as from its first position.
    double expected_chained_tokens(int g, int chained, double z = 0.0, int ngram_order = 0) const;
    // Predicted seconds of a round of `m` chosen at g (n_ids: the method's own S, cost_model::round_seconds):
    // for the self drafter the mean over where it stops drafting (below draft_p_min), from how often it
    // went on at each position so far.
    double expected_seconds(auto_method m, int g, int n_ids, int chained = 0) const;
    // How many of the `kept` prompt rows to seed S from before the self-drafter round `self` (0: none
    // yet), with `remaining` tokens left in the request's budget; share: the seed head's share of the
    // full head's rows (speculation_request::seed_share).
    int seed_rows(const auto_choice& self, const auto_round& r, int64_t remaining, int kept, double share = 1) const;
    // The chance that `m`, having drafted k tokens of a longer round, drafts one more (the self drafter
    // stops where its top probability over S is below draft_p_min; the others never stop).
    // z > 0: this request's stops taken z standard errors down (the optimistic estimate).
    double draft_continuation(auto_method m, int k, double z = 0.0) const;

private:
    static constexpr int kMaxOrder = 8;
    struct tracker {
        double accepted = 0, rejected = 0;   // i.i.d. acceptance counts: a = accepted / (accepted + rejected)
        double prior = 0, prior_weight = 0;  // pseudo-counts
        double first_reached = 0, first_passed = 0;  // the first draft position: rounds that drafted it / accepted it
        // An n-gram proposal's first position per match order (index: order, clamped), this request's rounds.
        std::array<double, kMaxOrder + 1> order_reached{}, order_passed{};
        // The later draft positions (k >= 2) of this request's rounds: how many were reached, how many of
        // those failed, and how many failures the kept rates expected there.
        double later_reached = 0, later_failed = 0, later_expected_failures = 0;
        // The self drafter's stops (below draft_p_min) in this request's rounds: at the first position the
        // rounds and those that drafted it; at the later ones the positions its rounds were to draft,
        // the stops there and how many the kept continuation rates expected.
        double first_drafting_reached = 0, first_drafting_passed = 0;
        double later_stop_positions = 0, later_stops = 0, later_expected_stops = 0;
    };
    // Draft position k's conditional rate before shrinkage: p_k = (passed + weight * prior) / (reached + weight).
    struct position_counts {
        double reached, passed, prior, weight;
    };
    // Position 1's (the pooled rate as the prior; by match order for an n-gram proposal).
    position_counts first_position(auto_method m, int ngram_order) const;
    // A round of `m` drafted `gamma` tokens and `n_accepted` of them were accepted (an n-gram proposal
    // copied after a suffix of `ngram_order` tokens).
    void count_round(auto_method m, int gamma, int n_accepted, int ngram_order = 0);
    const cost_model& costs_;
    int draft_max_;
    bool have_self_;
    bool model_chains_;
    std::array<tracker, kAutoMethods> t_{};  // per request (begin() resets them)
    // This request's tokens and seconds over its last rounds (decayed per round): its recent rate.
    double recent_tokens_ = 0, recent_seconds_ = 0;
    // What outlives a request (begin() keeps it): the machine's state and the model's habits, summed
    // over the rounds of every request so far with a decay per round; one copy for greedy and one for
    // sampled requests (sampling's logits processing costs time per verified row, and a sampled
    // continuation matches an n-gram copy less often).
    struct later_positions {
        std::vector<double> reached, passed;
        // One more round, the earlier ones decayed by kDecay from position `from` on: it reached
        // positions [from, end) and passed those below `held`.
        void count(int from, int end, int held);
    };
    // Where the later positions of `m`'s rounds are counted (an n-gram proposal's by its match order).
    template <class Carried>
    static auto& later(Carried& kept, auto_method m, int ngram_order);
    // How much more (> 1) or less often than the kept rates expected this request's rounds of `m` have
    // failed at a later position: the factor on 1 - p_k there.
    // z > 0: taken z standard errors down (the optimistic estimate), so a request that failed early at
    // a later position drafts past it again and is measured there.
    double request_hazard(auto_method m, double z) const;
    // The self drafter's rate of drafting position k + 1 once it drafted k, over the requests so far.
    double kept_continuation(int k) const;
    struct carried {
        // The timing correction (time_scale): the decayed sum of log(measured / predicted) over timed
        // rounds and their decayed count; per method, the sum of its rounds' excess over the global
        // correction of their time and their count.
        double log_ratio = 0, timed_rounds = 0;
        std::array<double, kAutoMethods> excess_log_ratio{}, excess_rounds{};
        // The n-gram proposal's first position per match order (index: order, clamped): rounds and acceptances.
        std::array<double, kMaxOrder + 1> order_reached{}, order_passed{};
        // The first position of each neural drafter (the self drafter, the draft model, the EAGLE-3 head):
        // rounds and acceptances, decayed per round of the method and faded in the rounds of the others.
        std::array<double, kAutoMethods> first_reached{}, first_passed{};
        // The draft positions after the first, per method and for an n-gram proposal per match order
        // (index: order, clamped): rounds that reached each position and accepted it.
        std::array<later_positions, kAutoMethods> later;
        std::array<later_positions, kMaxOrder + 1> ngram_later;
        // The self drafter's stops: rounds that were to draft position k + 1 and had drafted k tokens
        // (reached), and those that drafted it (passed).
        later_positions self_drafting;
    };
    std::array<carried, 2> carried_{};
    std::size_t regime_ = 0;  // carried_[1] for a sampled request
    double time_scale(auto_method m) const;
    double global_log_scale() const;  // log of the global timing correction
};

}  // namespace specgen
