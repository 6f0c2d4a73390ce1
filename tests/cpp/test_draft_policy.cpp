// The batch policy's pricing of batched draft rows (engine/draft_policy.h, docs/ALGORITHMS.md section 7)
// on made-up step times, no engine and no model:
//  - a draft position is one draft forward over the sequences drafting that far: a draft model about as
//    slow as the target drafts nothing in a batch, a cheap one drafts for every sequence;
//  - a draft forward's fixed part can make one sequence's draft token a loss and every sequence's a
//    gain: the policy finds the gain;
//  - before any draft step is measured, a draft row costs the target's scaled by the size ratio; once
//    one is, the measurement.
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
