// The auto speculator's cost model (docs/ALGORITHMS.md section 8.1): per-row costs measured on this
// machine (calibration.h) and the predicted seconds of a round of each method at draft length g (the
// tokens it emits are the policy's estimate: policy.h). Pure arithmetic: no engine state.
#pragma once
#include <vector>

namespace specgen {

// The methods auto chooses among (SPECGEN_AUTO_FORCE_SWITCH's cycle: auto_speculator.h). The values are
// published as the auto_method stat. draft_model: a draft GGUF given with draft_kind auto (its NanoSpec
// head with nanospec, else its full head). draft_head: an EAGLE-3 head (params.draft_head) likewise.
enum class auto_method { none = 0, ngram = 1, self_nanospec = 2, draft_model = 3, draft_head = 4 };
constexpr int kAutoMethods = 5;
const char* auto_method_name(auto_method m);

struct cost_model {
    // Seconds, measured (calibration.h). R = rows in one target call.
    std::vector<double> verify;     // verify[R-1]: T(R), the target's layers + full head over R rows, R = 1..9
    std::vector<double> head_full;  // head_full[R-1]: the full LM head alone over R rows
    double body_row = 0;            // the target's layers over one row (a self-drafter body row)
    double head_per_id = 0;         // the head over one row and one id of a subset S (NanoSpec) per id
    double head_subset_base = 0;    // the subset head's fixed cost per row
    // The draft model's (measured only when auto has one; empty / 0 otherwise).
    std::vector<double> draft_forward;  // draft_forward[R-1]: its layers over R rows (a catch-up forwards several)
    double draft_head_full = 0;         // its full LM head over one row
    double draft_head_per_id = 0;       // its head over one row and one id of its S (NanoSpec) per id
    double draft_head_subset_base = 0;  // that head's fixed cost per row
    // The EAGLE-3 head's (measured only when auto has one; 0 otherwise).
    double eagle3_row = 0;              // fc and its decoder layer over one row
    double eagle3_output_full = 0;      // its output over its whole draft vocabulary for one row
    double eagle3_output_per_id = 0;    // its output over one row and one id of its S (NanoSpec) per id
    double eagle3_output_subset_base = 0;  // that output's fixed cost per row
    // The costs are taken as exact: rounds are timed by their predicted seconds, never the clock (no
    // timing correction, no measured recent rate), so the choices are reproducible whatever the
    // machine's load, as the policy tests need (a cost model file with "exact": 1).
    bool exact = false;

    bool valid() const { return !verify.empty() && verify.size() == head_full.size() && body_row > 0; }
    // T(R) and the head over R rows, extrapolated linearly past the measured R.
    double verify_seconds(int rows) const;
    double head_seconds(int rows) const;
    // The self drafter's head over |S| ids for one row.
    double subset_head_seconds(int n_ids) const { return head_subset_base + head_per_id * n_ids; }
    bool has_draft() const { return !draft_forward.empty() && draft_head_full > 0; }
    // The draft model's layers over R rows (extrapolated linearly), and its head over one row: over its
    // S of n_ids ids, or the full head for n_ids = 0.
    double draft_forward_seconds(int rows) const;
    double draft_head_seconds(int n_ids) const {
        return n_ids > 0 ? draft_head_subset_base + draft_head_per_id * n_ids : draft_head_full;
    }
    bool has_eagle3() const { return eagle3_row > 0 && eagle3_output_full > 0; }
    // The EAGLE-3 head's output over one row: over its S of n_ids ids, or its whole draft vocabulary for 0.
    double eagle3_output_seconds(int n_ids) const {
        return n_ids > 0 ? eagle3_output_subset_base + eagle3_output_per_id * n_ids : eagle3_output_full;
    }

    // One round of `m` drafting g tokens (g = 0: a plain round), |S| = n_ids (the method's own S; for the
    // draft model and the EAGLE-3 head 0 means its full head): draft + verify seconds. chained: the draft
    // model's first tokens that are an n-gram match (ngram_chain, docs/ALGORITHMS.md section 6.1): their
    // rows join its first forward and take no head.
    double round_seconds(auto_method m, int g, int n_ids, int chained = 0) const;
    // A self-drafter round that stopped after g drafted tokens (its top probability below draft_p_min):
    // its last body row and head over S ran for the position it did not draft.
    double stopped_round_seconds(int g, int n_ids) const;

private:
    // A self-drafter round: `rows` body rows handed over to the full head, `subset_heads` heads over S.
    double self_round_seconds(int rows, int subset_heads, int n_ids) const;
};

}  // namespace specgen
