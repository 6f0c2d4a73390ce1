// The batch policy's pricing of batched draft rows (engine/draft_policy.h, docs/ALGORITHMS.md section 7)
// on made-up step times, no engine and no model:
//  - a draft position is one draft forward over the sequences drafting that far: a draft model about as
//    slow as the target drafts nothing in a batch, a cheap one drafts for every sequence;
//  - a draft forward's fixed part can make one sequence's draft token a loss and every sequence's a
//    gain: the policy finds the gain;
//  - before any draft step is measured, a draft row costs the target's scaled by the size ratio; once
//    one is, the measurement;
//  - a sequence whose draft model lacks many history rows (it skipped rounds, or its prompt) pays them
//    with its first draft token, spread over the rounds its request has left: it drafts only where
//    that pays, the others as before.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "check.h"
#include "engine/draft_policy.h"

using namespace specgen;
using test_support::check;
using test_support::failures;

namespace {

// Target steps of R rows take 1 + 0.05 R seconds; draft forwards of r rows take fixed + per_row * r.
draft_policy measured(double fixed, double per_row) {
    draft_policy p;
    for (int r = 1; r <= 64; ++r) {
        p.observe_step(r, 1.0 + 0.05 * r);
        if (fixed > 0) p.observe_draft_step(r, fixed + per_row * r);
    }
    return p;
}

std::vector<int> choose(const draft_policy& p, int B, double acceptance) {
    std::vector<draft_policy::sequence> seqs(size_t(B), draft_policy::sequence{acceptance, 0.0, 8});
    std::vector<int> caps;
    p.choose(seqs, B, caps, true);
    return caps;
}

std::string str(const std::vector<int>& v) {
    std::string s;
    for (int x : v) s += std::to_string(x) + " ";
    return s;
}

}  // namespace

int main() {
    {
        // Draft forwards cost 80% of a target step: 4 sequences accepting half their drafts are faster
        // plain (4 / T(4) = 3.3 tokens/s; one draft each: 6 / (T(8) + D(4)) = 2.5).
        const auto caps = choose(measured(0.8, 0.04), 4, 0.5);
        check(caps == std::vector<int>(4, 0), "a slow draft model drafts nothing in a batch: " + str(caps));
    }
    {
        const auto caps = choose(measured(0.1, 0.005), 4, 0.8);
        bool all = true;
        for (int c : caps) all = all && c >= 2;
        check(all, "a cheap draft model drafts for every sequence: " + str(caps));
    }
    {
        // One sequence's token: 4.6 / (T(5) + D(1)) = 2.96 < 3.33; every sequence's: 6.4 / (T(8) + D(4)) = 3.7.
        const draft_policy p = measured(0.3, 0.005);
        const auto caps = choose(p, 4, 0.6);
        bool all = true;
        for (int c : caps) all = all && c >= 1;
        check(all, "the draft forward's fixed part is shared by every sequence's draft: " + str(caps));
        // Only one of the four may draft: its token alone is the loss computed above.
        std::vector<draft_policy::sequence> seqs(4, draft_policy::sequence{0.6, 0.0, 0});
        seqs[0].max_draft = 8;
        std::vector<int> one;
        p.choose(seqs, 4, one, true);
        check(one == std::vector<int>(4, 0), "one sequence's draft forward alone is a loss: " + str(one));
    }
    {
        // The cheap draft model above, but sequence 0's draft lacks 200 rows: forwarding them (about
        // 1.3 s by the table's shape) for 0.8 expected tokens loses; a 2-row catch-up does not.
        const draft_policy p = measured(0.1, 0.005);
        std::vector<draft_policy::sequence> seqs(4, draft_policy::sequence{0.8, 0.0, 8});
        seqs[0].catch_up_rows = 200;
        std::vector<int> caps;
        p.choose(seqs, 4, caps, true);
        check(caps[0] == 0 && caps[1] >= 2 && caps[2] >= 2 && caps[3] >= 2,
              "a long catch-up keeps that sequence from drafting, not the others: " + str(caps));
        seqs[0].catch_up_rows = 2;
        p.choose(seqs, 4, caps, true);
        check(caps[0] >= 2, "a short catch-up still drafts: " + str(caps));
        // Priced per row: alone in the batch, the catch-up that made drafting a loss still is one.
        std::vector<draft_policy::sequence> two(2, draft_policy::sequence{0.8, 0.0, 8});
        two[0].catch_up_rows = two[1].catch_up_rows = 400;
        p.choose(two, 2, caps, true);
        check(caps == std::vector<int>(2, 0), "two long catch-ups draft nothing: " + str(caps));
        // The catch-up a round is charged: spread over the rounds left (tokens left / E[tokens a round]).
        const double e = draft_policy::expected_tokens(0.5, 4);  // 1.9375 tokens a round
        check(draft_policy::amortized_catch_up(0, 0.5, 4, 100) == 0, "no catch-up, no rows");
        check(draft_policy::amortized_catch_up(300, 0.5, 4, 1000) == int(std::ceil(300 / (1000 / e))),
              "a prompt's catch-up spread over a long request");
        check(draft_policy::amortized_catch_up(300, 0.5, 4, 1) == 300, "a request about to end pays it all");
        check(draft_policy::amortized_catch_up(1, 0.9, 8, 1000) == 1, "any catch-up costs a row");
    }
    {
        draft_policy p = measured(0, 0);  // target steps only
        p.set_draft_size_ratio(0.25);
        check(!p.draft_measured(), "no draft step measured yet");
        check(p.draft_step_seconds(4) == 0.25 * p.step_seconds(4), "an unmeasured draft row costs the size ratio");
        check(p.draft_step_seconds(0) == 0, "no draft rows cost nothing");
        p.observe_draft_step(4, 0.5);
        check(p.draft_measured() && p.draft_step_seconds(4) == 0.5, "a measured draft step replaces the ratio");
    }
    {
        // Without batched drafts the per-sequence draft seconds price the tokens, as before.
        const draft_policy p = measured(0, 0);
        std::vector<int> caps;
        p.choose(std::vector<draft_policy::sequence>(4, {0.8, 10.0, 8}), 4, caps, false);
        check(caps == std::vector<int>(4, 0), "sequential drafts of 10 s per token are never worth it: " + str(caps));
    }
    if (failures) std::fprintf(stderr, "test_draft_policy: %d failure(s)\n", failures);
    else std::printf("test_draft_policy: ok\n");
    return failures ? 1 : 0;
}
