// The batch-aware draft length policy (docs/ALGORITHMS.md section 7). With B sequences in a step,
// sequence b drafting g_b tokens costs g_b more target rows; the step's time T(R) for R rows is
// measured on this machine as the engine runs (an online table per R), and E[tokens_b(g)] =
// (1 - a_b^(g+1)) / (1 - a_b) from the sequence's live acceptance a_b. choose() picks the g_b that
// maximise sum_b E[tokens_b(g_b)] / (T(R) + drafting time), adding one draft token at a time while
// that helps, so g_b = 0 where no draft pays for its rows. Lengths depend only on past outcomes, so
// the output distribution is unchanged.
#pragma once
#include <cstdint>
#include <vector>

namespace specgen {

class draft_policy {
public:
    // A step of `rows` rows through forward_batch and the head took `seconds`.
    void observe_step(int rows, double seconds);
    // Seconds a step of `rows` rows is expected to take (interpolated / extrapolated from the table).
    double step_seconds(int rows) const;

    struct sequence {
        double acceptance;       // a_b in [0, 1)
        double draft_seconds;    // time to draft one token (0 for n-gram lookup)
        int max_draft;           // the speculator's own limit (0: it drafts nothing)
    };
    // fixed_rows: rows the step runs whatever the drafts (one per decoding sequence, prefill chunks).
    // caps[b] = g_b.
    void choose(const std::vector<sequence>& seqs, int fixed_rows, std::vector<int>& caps) const;

    // a_b from a sequence's counts (a prior of 1 accepted in 2 drafted, at most 0.95).
    static double acceptance(int64_t n_accepted, int64_t n_drafted);
    static double expected_tokens(double a, int g);

private:
    std::vector<double> t_;       // t_[R]: smoothed seconds of an R-row step (0: not seen)
    std::vector<int> n_;          // steps seen per R
};

}  // namespace specgen
