// The batch-aware draft length policy (docs/ALGORITHMS.md section 7). With B sequences in a step,
// sequence b drafting g_b tokens costs g_b more target rows; the step's time T(R) for R rows is
// measured on this machine as the engine runs (an online table per R), and E[tokens_b(g)] =
// (1 - a_b^(g+1)) / (1 - a_b) from the sequence's live acceptance a_b. choose() picks the g_b that
// maximise sum_b E[tokens_b(g_b)] / (T(R) + drafting time), adding one draft token at a time while
// that helps, so g_b = 0 where no draft pays for its rows. Lengths depend only on past outcomes, so
// the output distribution is unchanged.
//
// Batched drafting (a draft model, speculative/draft_batch.h) prices draft rows like target rows: draft
// position j is one draft forward over the n_j sequences drafting that far, D(n_j) seconds, so drafting
// costs sum_j D(n_j). D is measured as the engine runs (a second table, like T); until a draft step is
// seen it is T scaled by the bytes a draft decode step reads over the target's (draft_size_ratio). The
// search then also tries one more token for every sequence at the same length at once, since the first
// row of a draft forward pays its fixed part for all of them. A sequence's first draft token also
// pays for the history its draft model has not forwarded yet (catch_up_rows: the rounds it skipped,
// or its prompt after admission), rows of draft position 0's forward, spread over the rounds the
// request has left: a sequence starts drafting again only where the catch-up pays over the rest of
// its request.
#pragma once
#include <cstdint>
#include <vector>

namespace specgen {

class draft_policy {
public:
    // A step of `rows` rows through forward_batch and the head took `seconds`.
    void observe_step(int rows, double seconds) { target_.observe(rows, seconds); }
    // Seconds a step of `rows` rows is expected to take (interpolated / extrapolated from the table).
    double step_seconds(int rows) const { return target_.seconds(rows); }
    // The same for the batched draft model: a draft forward + head over `rows` sequences.
    void observe_draft_step(int rows, double seconds) { draft_.observe(rows, seconds); }
    // Measured once any draft step was seen, else draft_size_ratio * step_seconds(rows); 0 for 0 rows.
    double draft_step_seconds(int rows) const;
    // The draft model's bytes per decode step over the target's (the price of an unmeasured draft row).
    void set_draft_size_ratio(double r) { size_ratio_ = r; }
    bool draft_measured() const { return !draft_.empty(); }

    struct sequence {
        double acceptance;       // a_b in [0, 1)
        double draft_seconds;    // time to draft one token (0 for n-gram lookup)
        int max_draft;           // the speculator's own limit (0: it drafts nothing)
        int catch_up_rows = 0;   // batched drafts: catch-up rows charged to this round (amortized_catch_up)
    };
    // fixed_rows: rows the step runs whatever the drafts (one per decoding sequence, prefill chunks).
    // caps[b] = g_b. batched_drafts: the sequences draft through one batched draft model (their
    // draft_seconds are ignored: drafting costs sum_j draft_step_seconds(n_j)).
    void choose(const std::vector<sequence>& seqs, int fixed_rows, std::vector<int>& caps,
                bool batched_drafts = false) const;

    // a_b from a sequence's counts (a prior of 1 accepted in 2 drafted, at most 0.95).
    static double acceptance(int64_t n_accepted, int64_t n_drafted);
    static double expected_tokens(double a, int g);
    // The catch-up rows to charge one round (sequence::catch_up_rows): rows_behind spread over the
    // rounds the request has left (tokens_left / the tokens a round of max_draft emits at acceptance a),
    // since drafting after it pays for every one of them. A prompt's catch-up is then nearly free for a
    // long request and ruinous for one about to end. Rounded up: any catch-up costs a row.
    static int amortized_catch_up(int rows_behind, double acceptance, int max_draft, int64_t tokens_left);
    // True when a draft model's catch-up (rows_behind rows it must forward before drafting: a prompt,
    // or the rounds it sat out) outweighs what the tokens left can repay, alone or in a batch: then
    // the sequence decodes plainly. Once true it stays true (the rows grow, the tokens shrink).
    static bool catch_up_outweighs(int rows_behind, int64_t tokens_left);

private:
    // Seconds of a step per row count, measured online.
    class step_table {
    public:
        void observe(int rows, double seconds);
        double seconds(int rows) const;
        bool empty() const { return t_.empty(); }

    private:
        std::vector<double> t_;   // t_[R]: smoothed seconds of an R-row step (0: not seen)
        std::vector<int> n_;      // steps seen per R
    };
    step_table target_, draft_;
    double size_ratio_ = 0;
};

}  // namespace specgen
