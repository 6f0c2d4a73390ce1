// auto's policy (speculative/auto/policy.h, docs/ALGORITHMS.md section 8.2) on made-up outcomes: what
// it learns from the rounds it is shown, with a fixed cost model, no engine and no model.
//  - An n-gram proposal's later draft positions are counted per match order: copies after a 1-token
//    suffix that fail at their second token do not lower the estimate for copies after 4 tokens that
//    hold to the end, and the other way round.
//  - The later positions are counted across requests: a new request starts from what the last ones
//    measured, not from the prior.
//  - A request's own outcomes move those kept estimates: its later-position failures against what the
//    kept rates expected, and its n-gram copies per match order.
//  - After rounds faster than any choice now promises, a round without an n-gram proposal is plain,
//    not a long self-drafter round.
//  - A self-drafter round that stopped before drafting (draft_p_min) is no rejection: the acceptance
//    stays, the predicted round shrinks towards a plain one and yields fewer tokens.
//  - S is seeded from all kept prompt rows for a long request, from the last few for a short one,
//    and not at all when the request is too short to repay the head's time over 8 rows.
//  - The timing correction: a method that runs slower than calibrated is predicted slower, and a burst
//    of load that hit its rounds fades once quiet rounds of other methods follow.
//  - A drafter's first-position rejections kept across requests fade in the rounds of other methods: a
//    short request whose draft model rounds all failed holds the model out of the next request, but
//    not for good.
//  - A chaining draft model's round (ngram_chain) is priced by its own rows and heads only, predicted
//    by the copy's rates and then the model's, chosen only where that beats the model alone, and its
//    rounds count for the model only past a copy that held.
#include <cstdio>
#include <string>
#include <vector>

#include "speculative/auto/policy.h"

#include "check.h"

using namespace specgen;

namespace {
using test_support::check;
using test_support::failures;

// Measured on the reference 2-core machine (tests/test_auto.py uses the same figures).
cost_model reference_costs() {
    cost_model c;
    c.verify = {0.0127, 0.0136, 0.0145, 0.0165, 0.0193, 0.0210, 0.0281, 0.0281, 0.0299};
    c.head_full = {0.0085, 0.0087, 0.0090, 0.0102, 0.0113, 0.0119, 0.0164, 0.0164, 0.0168};
    c.body_row = 0.00425;
    c.head_per_id = 2.3e-7;
    return c;
}

// A prompt with some self-overlap, so the n-gram prior is neither 0 nor 1.
std::vector<int32_t> prompt() {
    std::vector<int32_t> p;
    for (int i = 0; i < 40; ++i) p.push_back(int32_t(i % 7 == 0 ? 1 : 10 + i));
    return p;
}

void test_ngram_positions_by_match_order() {
    const cost_model costs = reference_costs();
    auto_policy policy(costs, 8, true);
    policy.begin(prompt(), 0.0f);
    for (int round = 0; round < 30; ++round) {
        policy.observe_shadow_ngram(8, 1, 1);  // a 1-token-suffix copy: first token right, second wrong
        policy.observe_shadow_ngram(8, 8, 4);  // a 4-token-suffix copy: all 8 right
    }
    const double e1 = policy.expected_tokens(auto_method::ngram, 8, 0.0, 1);
    const double e4 = policy.expected_tokens(auto_method::ngram, 8, 0.0, 4);
    // Pooled over orders, the second position would hold half the time for both (e ~ 2.5-4 each).
    check(e1 < 2.6, "a 1-token copy that fails at its second token predicts < 2.6 tokens of 8: " + std::to_string(e1));
    check(e4 > 7.0, "a 4-token copy that holds predicts > 7 tokens of 8: " + std::to_string(e4));
    const auto_round r{0, 8, 1, 64};
    const auto_choice c = policy.predict(auto_method::ngram, r);
    check(c.predicted_tokens < 2.6, "the prediction for a 1-token copy round: " + std::to_string(c.predicted_tokens));
}

void test_later_positions_carry_over() {
    const cost_model costs = reference_costs();
    auto_policy policy(costs, 8, true);
    policy.begin(prompt(), 1.0f);
    const double fresh = policy.expected_tokens(auto_method::self_nanospec, 8);
    // A request whose self-drafter rounds keep the first two tokens and lose the third.
    for (int round = 0; round < 20; ++round) policy.observe(auto_method::self_nanospec, 8, 8, 2, 0.05, 0.05);
    const double measured = policy.expected_tokens(auto_method::self_nanospec, 8);
    policy.begin(prompt(), 1.0f);  // the next request
    const double next = policy.expected_tokens(auto_method::self_nanospec, 8);
    check(measured < 3.6, "20 rounds accepting 2 of 8 predict < 3.6 tokens: " + std::to_string(measured));
    check(fresh > 4.5, "the prior predicts > 4.5 tokens of 8: " + std::to_string(fresh));
    // Its first position starts again from the prior (shrunk towards the requests so far); the later
    // positions keep their counts: position 3's measured rate, not the prior's 0.95.
    check(next < fresh - 1.0, "the next request starts from the measured later positions: " + std::to_string(next) +
                                  " against the prior's " + std::to_string(fresh));
    // Greedy requests keep their own counts.
    policy.begin(prompt(), 0.0f);
    check(policy.expected_tokens(auto_method::self_nanospec, 8) > 4.5, "a greedy request does not inherit the sampled counts");
}
void test_request_hazard() {
    const cost_model costs = reference_costs();
    auto_policy policy(costs, 8, true);
    // Earlier requests: self rounds of 8 that held their first 3 tokens and lost the 4th.
    policy.begin(prompt(), 0.0f);
    for (int round = 0; round < 40; ++round) policy.observe(auto_method::self_nanospec, 8, 8, 3, 0.05, 0.05);
    // This request accepts everything it drafts.
    policy.begin(prompt(), 0.0f);
    for (int round = 0; round < 6; ++round) policy.observe(auto_method::self_nanospec, 8, 8, 8, 0.05, 0.05);
    const double easy = policy.expected_tokens(auto_method::self_nanospec, 8);
    // The next request starts from the same kept counts (these 6 rounds included) without its own.
    policy.begin(prompt(), 0.0f);
    const double kept = policy.expected_tokens(auto_method::self_nanospec, 8);
    check(easy > kept + 1.0, "a request accepting all of 8 predicts more than the kept rates alone: " + std::to_string(easy) +
                                 " against " + std::to_string(kept));
    // One early failure at position 2 must not stop the request from drafting past it again.
    policy.begin(prompt(), 0.0f);
    policy.observe(auto_method::self_nanospec, 8, 8, 1, 0.05, 0.05);
    const auto_round r{400, 0, 0, 64};
    const int first = policy.predict(auto_method::self_nanospec, r).gamma;
    check(first >= 2, "after one failure at position 2 the self drafter drafts position 2 again: g = " + std::to_string(first));
    // ... and, accepting what it drafts from then on, back to long rounds within a few.
    int g = first;
    for (int round = 0; round < 6; ++round) {
        policy.observe(auto_method::self_nanospec, g, g, g, 0.05, 0.05);
        g = policy.predict(auto_method::self_nanospec, r).gamma;
    }
    check(g >= 6, "six fully accepted rounds after the failure: g = " + std::to_string(g) + " (first " + std::to_string(first) + ")");
}

void test_ngram_order_per_request() {
    const cost_model costs = reference_costs();
    auto_policy policy(costs, 8, true);
    // Earlier requests: copies after a 2-token suffix held.
    policy.begin(prompt(), 0.0f);
    for (int round = 0; round < 20; ++round) policy.observe_shadow_ngram(8, 8, 2);
    policy.begin(prompt(), 0.0f);
    const double before = policy.expected_tokens(auto_method::ngram, 8, 0.0, 2);
    // This request's 2-token copies fail at their first token.
    for (int round = 0; round < 4; ++round) policy.observe_shadow_ngram(8, 0, 2);
    const double after = policy.expected_tokens(auto_method::ngram, 8, 0.0, 2);
    check(after < 0.6 * before, "this request's failing 2-token copies lower their estimate: " + std::to_string(after) +
                                    " against " + std::to_string(before));
}

void test_recent_rate_prefers_plain_inside_a_copy() {
    const cost_model costs = reference_costs();
    auto_policy policy(costs, 8, true);
    policy.begin(prompt(), 0.0f);
    const auto_round no_proposal{400, 0, 0, 64};
    check(policy.choose(no_proposal).method == auto_method::self_nanospec, "a new request without a proposal drafts with S");
    // Three copy rounds of 8 tokens in 22 ms each: ~360 tokens/s, more than a self round promises.
    for (int round = 0; round < 3; ++round) policy.observe(auto_method::ngram, 7, 7, 7, 0.022, 0.022);
    const auto_choice c = policy.choose(no_proposal);
    check(c.method == auto_method::none || c.gamma <= 2,
          "inside a copy, a round without a proposal is plain or a short self round: method " +
              std::string(auto_method_name(c.method)) + " g " + std::to_string(c.gamma));
}
}  // namespace

void test_draft_stops_are_not_rejections() {
    const cost_model costs = reference_costs();
    auto_policy policy(costs, 8, true);
    policy.begin(prompt(), 1.0f);
    const double a = policy.acceptance(auto_method::self_nanospec);
    const double tokens = policy.expected_tokens(auto_method::self_nanospec, 8);
    const double seconds = policy.expected_seconds(auto_method::self_nanospec, 8, 0);
    // Rounds chosen at 8 whose drafter stopped before its first token (a plain round's time).
    for (int round = 0; round < 20; ++round) policy.observe(auto_method::self_nanospec, 8, 0, 0, 0.0127, 0.0127);
    check(policy.acceptance(auto_method::self_nanospec) == a, "a stop before drafting is not a rejection");
    check(policy.draft_continuation(auto_method::self_nanospec, 0) < 0.15,
          "20 stops at the first position: " + std::to_string(policy.draft_continuation(auto_method::self_nanospec, 0)));
    const double stopped = policy.expected_seconds(auto_method::self_nanospec, 8, 0);
    check(stopped < 1.5 * costs.round_seconds(auto_method::none, 0, 0) && stopped < 0.5 * seconds,
          "a round that stops at once is predicted near a plain round: " + std::to_string(stopped) + " s against " +
              std::to_string(seconds) + " s before the stops");
    check(policy.expected_tokens(auto_method::self_nanospec, 8) < 0.5 * (tokens + 1),
          "stops yield no tokens: " + std::to_string(policy.expected_tokens(auto_method::self_nanospec, 8)));
}

void test_stops_are_the_requests_own() {
    const cost_model costs = reference_costs();
    auto_policy policy(costs, 8, true);
    // Earlier requests (free text): half the self rounds stopped before their first token, the rest
    // after 3 of 8.
    policy.begin(prompt(), 0.0f);
    for (int round = 0; round < 40; ++round) policy.observe(auto_method::self_nanospec, 8, round % 2 ? 0 : 3, round % 2 ? 0 : 3, 0.02, 0.02);
    policy.begin(prompt(), 0.0f);
    const double kept_first = policy.draft_continuation(auto_method::self_nanospec, 0);
    const double kept_later = policy.draft_continuation(auto_method::self_nanospec, 3);
    const double kept_tokens = policy.expected_tokens(auto_method::self_nanospec, 8);
    // This request (code) drafts and accepts all 8 every round.
    for (int round = 0; round < 4; ++round) policy.observe(auto_method::self_nanospec, 8, 8, 8, 0.05, 0.05);
    const double first = policy.draft_continuation(auto_method::self_nanospec, 0);
    const double later = policy.draft_continuation(auto_method::self_nanospec, 3);
    check(first > 0.8 && first > kept_first + 0.25, "four rounds without a stop: d_0 " + std::to_string(first) +
                                                        " against the kept " + std::to_string(kept_first));
    check(later > kept_later + 0.2, "... and at the later positions: d_3 " + std::to_string(later) + " against " +
                                        std::to_string(kept_later));
    check(policy.expected_tokens(auto_method::self_nanospec, 8) > kept_tokens + 2,
          "predicted tokens per round " + std::to_string(policy.expected_tokens(auto_method::self_nanospec, 8)) +
              " against the kept rates' " + std::to_string(kept_tokens));
    // A request that stops at the first position in every round keeps a rate above zero there.
    policy.begin(prompt(), 0.0f);
    for (int round = 0; round < 10; ++round) policy.observe(auto_method::self_nanospec, 8, 0, 0, 0.0127, 0.0127);
    const double stopping = policy.draft_continuation(auto_method::self_nanospec, 0);
    check(stopping > 0.02 && stopping < kept_first, "ten stops at the first position: d_0 " + std::to_string(stopping));
}

void test_seed_rows_by_remaining_tokens() {
    cost_model costs = reference_costs();
    costs.body_row = 1e-6;  // self-drafter rounds far faster than plain ones
    auto_policy policy(costs, 8, true);
    policy.begin(prompt(), 0.0f);
    const auto_round r{0, 0, 0, 8};
    const auto_choice self = policy.predict(auto_method::self_nanospec, r);
    check(self.tokens_per_second() > policy.predict(auto_method::none, r).tokens_per_second(), "self is faster here");
    const int all = policy.seed_rows(self, r, 1000, 64), some = policy.seed_rows(self, r, 6, 64),
              none = policy.seed_rows(self, r, 1, 64);
    check(all == 64, "1000 tokens to go seed every kept row: " + std::to_string(all));
    check(some > 0 && some < 64, "6 tokens to go seed the last few rows: " + std::to_string(some));
    check(none == 0, "1 token to go seeds nothing: " + std::to_string(none));
    const int cheap = policy.seed_rows(self, r, 6, 64, 1.0 / 16);
    check(cheap > some, "a seed head over a sixteenth of the ids seeds more rows: " + std::to_string(cheap) + " against " +
                            std::to_string(some));
    auto_choice slow = self;
    slow.predicted_seconds = 10;  // no faster than plain decoding: seeding saves nothing
    check(policy.seed_rows(slow, r, 1000, 64) == 0, "a self drafter slower than plain decoding seeds nothing");
}

void test_chained_draft_model_rounds() {
    cost_model costs = reference_costs();
    costs.draft_forward = {0.004, 0.0045, 0.005, 0.0055, 0.006, 0.0065, 0.007, 0.0075, 0.008};
    costs.draft_head_full = 0.002;
    const double d1 = 0.004, h = 0.002, t7 = costs.verify_seconds(7);
    auto near = [](double a, double b) { return a > b - 1e-12 && a < b + 1e-12; };
    check(near(costs.round_seconds(auto_method::draft_model, 6, 0), 6 * (d1 + h) + t7), "6 drafted tokens: 6 rows and heads");
    check(near(costs.round_seconds(auto_method::draft_model, 6, 0, 2), 0.005 + 3 * d1 + 4 * h + t7),
          "2 chained of 6: the first forward takes 3 rows, 4 heads");
    check(near(costs.round_seconds(auto_method::draft_model, 6, 0, 6), costs.round_seconds(auto_method::ngram, 6, 0)),
          "a match that fills the round costs an n-gram round");

    auto_policy chaining(costs, 8, true, true), single(costs, 8, true);
    for (auto_policy* p : {&chaining, &single}) {
        p->begin(prompt(), 0.0f);
        for (int round = 0; round < 30; ++round) {
            p->observe_shadow_ngram(8, 8, 4);  // 4-token copies hold
            p->observe_shadow_ngram(8, 0, 1);  // 1-token copies fail at once
        }
        for (int round = 0; round < 10; ++round) p->observe(auto_method::draft_model, 6, 6, 2, 0.05, 0.05);
    }
    auto_round r{0, 4, 4, 64};  // a 4-token match after a 4-token suffix
    r.chain_tokens = 4, r.chain_order = 4;
    const auto_choice chained = chaining.predict(auto_method::draft_model, r), alone = single.predict(auto_method::draft_model, r);
    check(chained.chained == 4 && alone.chained == 0, "the held copy is chained: " + std::to_string(chained.chained));
    check(chained.predicted_tokens > alone.predicted_tokens + 2,
          "a held 4-token copy then the model predicts more tokens: " + std::to_string(chained.predicted_tokens) +
              " against " + std::to_string(alone.predicted_tokens));
    auto_round weak = r;  // the same match after a 1-token suffix
    weak.ngram_order = 1, weak.chain_order = 1;
    check(chaining.predict(auto_method::draft_model, weak).chained == 0, "a copy that fails at once is not chained");
    const double e = chaining.expected_chained_tokens(6, 4, 0.0, 4);
    check(e > chaining.expected_tokens(auto_method::ngram, 4, 0.0, 4) && e < 7, "chained E(6) past the copy's: " + std::to_string(e));
    check(near(chaining.expected_chained_tokens(6, 0), chaining.expected_tokens(auto_method::draft_model, 6)),
          "nothing chained: the model's E");

    // A copy rejected at its third token never reached the model's tokens: its counts stay.
    const double before = chaining.acceptance(auto_method::draft_model);
    chaining.observe(auto_method::draft_model, 8, 8, 2, 0.05, 0.05, 4);
    check(near(chaining.acceptance(auto_method::draft_model), before), "a failed copy is not the model's rejection");
    // One that held: the model drafted 4 and 4 were accepted.
    chaining.observe(auto_method::draft_model, 8, 8, 8, 0.05, 0.05, 4);
    check(chaining.acceptance(auto_method::draft_model) > before, "the model's own 4 accepted tokens count");
}

void test_timing_burst_fades() {
    cost_model costs = reference_costs();
    costs.draft_forward = {0.004, 0.0045, 0.005, 0.0055, 0.006, 0.0065, 0.007, 0.0075, 0.008};
    costs.draft_head_full = 0.002;
    const double model4 = costs.round_seconds(auto_method::draft_model, 4, 0), plain = costs.round_seconds(auto_method::none, 0, 0);
    // A method that runs slower than calibrated is predicted slower, and plain decoding beside it is not.
    auto_policy steady(costs, 8, true);
    steady.begin(prompt(), 0.0f);
    for (int round = 0; round < 20; ++round) {
        steady.observe(auto_method::draft_model, 4, 4, 4, 1.3 * model4, model4);
        steady.observe(auto_method::none, 0, 0, 0, plain, plain);
    }
    const auto_choice m = steady.predict(auto_method::draft_model, auto_round{400, 0, 0, 64});
    const double own = m.predicted_seconds / costs.round_seconds(auto_method::draft_model, m.gamma, 0);
    const double quiet = steady.predict(auto_method::none, auto_round{400, 0, 0, 64}).predicted_seconds / plain;
    check(own > 1.15 && quiet < 1.1, "rounds of the draft model at 1.3x their calibration: scale " + std::to_string(own) +
                                         ", plain decoding's " + std::to_string(quiet));
    // A burst of load (10x) over three draft model rounds and three plain ones, then 40 quiet plain
    // rounds: the draft model, which did not run since, is predicted near its calibration again.
    auto_policy burst(costs, 8, true);
    burst.begin(prompt(), 0.0f);
    for (int round = 0; round < 3; ++round) burst.observe(auto_method::draft_model, 4, 4, 4, 10 * model4, model4);
    for (int round = 0; round < 3; ++round) burst.observe(auto_method::none, 0, 0, 0, 10 * plain, plain);
    for (int round = 0; round < 40; ++round) burst.observe(auto_method::none, 0, 0, 0, plain, plain);
    const auto_choice after = burst.predict(auto_method::draft_model, auto_round{400, 0, 0, 64});
    const double scale = after.predicted_seconds / costs.round_seconds(auto_method::draft_model, after.gamma, 0);
    check(scale < 1.5, "40 quiet rounds after a burst: the draft model's scale " + std::to_string(scale));
}

void test_rejections_fade_while_idle() {
    cost_model costs = reference_costs();
    costs.draft_forward = {0.002, 0.0022, 0.0024, 0.0026, 0.0028, 0.003, 0.0032, 0.0034, 0.0036};
    costs.draft_head_full = 0.001;  // a cheap draft: at its prior 0.7 it beats plain decoding by far
    auto_policy policy(costs, 8, false);
    const auto_round r{0, 0, 0, 64};
    policy.begin(prompt(), 0.0f);
    check(policy.choose(r).method == auto_method::draft_model, "a fresh policy drafts with the model (prior 0.7)");
    // A short request whose six draft model rounds failed at the first token.
    for (int round = 0; round < 6; ++round) policy.observe(auto_method::draft_model, 4, 4, 0, 0.03, 0.03);
    policy.begin(prompt(), 0.0f);
    check(policy.choose(r).method == auto_method::none, "right after six failed rounds the next request decodes plainly");
    // That request's 60 plain rounds: the failures fade, and the next request measures the model again.
    const double plain = costs.round_seconds(auto_method::none, 0, 0);
    for (int round = 0; round < 60; ++round) policy.observe(auto_method::none, 0, 0, 0, plain, plain);
    policy.begin(prompt(), 0.0f);
    const auto_choice again = policy.choose(r);
    check(again.method == auto_method::draft_model,
          "60 plain rounds later the model is drafted again: " + std::string(auto_method_name(again.method)));
}

int main(int, char**) {
    test_ngram_positions_by_match_order();
    test_later_positions_carry_over();
    test_request_hazard();
    test_ngram_order_per_request();
    test_recent_rate_prefers_plain_inside_a_copy();
    test_draft_stops_are_not_rejections();
    test_stops_are_the_requests_own();
    test_seed_rows_by_remaining_tokens();
    test_chained_draft_model_rounds();
    test_timing_burst_fades();
    test_rejections_fade_while_idle();
    if (failures) {
        std::fprintf(stderr, "%d failure(s)\n", failures);
        return 1;
    }
    std::printf("test_auto_policy: ok\n");
    return 0;
}
