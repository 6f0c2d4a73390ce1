// The EAGLE-3 speculator (docs/DESIGN.md section 4.1): drafts with an EAGLE-3 head
// (speculative/drafters/eagle3_head.h) fed by the target's own hidden states, sequentially on the
// engine thread, one head forward per drafted token.
//
// Rows. With history t_0..t_{H-1} (t_{H-1} pending) the target has forwarded rows 0..H-2, and the
// engine hands over their features (prefill_rows / verify_outcome::features; no extra target forward).
// Head row P is the pair (t_{P+1}, g_P) with g_P = fc(features at P): rows 0..H-3 are context, row H-2
// (the pending token with the last target features) is the seed whose logits propose x_1, and the
// drafted row H-2+i is (x_i, the head's pre-norm output at H-3+i), proposing x_{i+1}. After the
// verdict (k accepted, y the correction or bonus) the verified rows 0..k of [pending, x_1..x_k] are the
// next round's context rows and seed, so drafted rows are overwritten by context rows (positions are
// the truth, as in the KV cache of the target).
//
// Proposals. The head's logits cover its draft vocabulary; q is the processed distribution over
// those ids (d2t maps them to target ids), zero elsewhere; the verifier's residual covers the rest
// (as NanoSpec / FR-Spec heads, docs/ALGORITHMS.md section 3), so the output is the target's.
//
// NanoSpec (params.nanospec, docs/ALGORITHMS.md section 3): the head drafts over S, the in-context ids it
// has rows for (a subset of d2t's target ids; speculative/nanospec.h seeds and grows it), and its output
// matrix runs over the rows of S only. q is the softmax over S, zero elsewhere: lossless the same way.
//
// Deferred (auto's candidate): a head auto does not choose should not cost a round. Its context rows
// are written when a round drafts with it (the catch-up: pending_rows()), not after each verdict, and
// NanoSpec's prompt top-k waits for seed_prompt(); only fc runs per target row, keeping g (the
// features are the engine's for the call only).
#pragma once
#include <memory>
#include <vector>

#include "model/kv_cache.h"
#include "speculative/deferred_seed.h"
#include "speculative/drafters/eagle3_head.h"
#include "speculative/speculator.h"

namespace specgen {

class draft_vocab;
class nanospec;

class eagle3_speculator final : public speculator, public deferred_seed {
public:
    // t.eagle3: the head (loaded here from params.draft_head when null); the target's evaluator must
    // capture the head's target layers (speculator_factory::captured_layers()). deferred: see above.
    eagle3_speculator(const generator_params& params, const speculation_target& t, bool deferred = false);
    ~eagle3_speculator() override;

    void begin(const std::vector<int32_t>& prompt, const speculation_request& request, step_context& step,
               generation_stats& stats) override;
    void observe(const prefill_rows& rows, generation_stats& stats) override;
    void propose(const std::vector<int32_t>& history, int max_n, const step_context& step, rng& gen, proposal& out,
                 generation_stats& stats) override;
    void observe(const verify_outcome& v, step_context& step, generation_stats& stats) override;
    // Prefix reuse across slots: the head rows `from` has written for the shared prefix (row P reads
    // t_{P+1}: at most n - 1), and NanoSpec's top-k of them; never for a deferred head (auto's).
    int copyable_rows(const speculator& from, int n) const override;
    void copy_prefix(const speculator& from, int n, const std::vector<int32_t>& tokens) override;
    void end() override;

    // Head rows already written: positions [0, rows) hold context rows of the current history.
    int context_rows() const { return n_rows_; }
    // Target rows whose g waits for the next propose() to write them (the last one is its seed).
    int pending_rows() const;
    // deferred_seed (nanospec::seed_waiting); |S| of its NanoSpec set (0: its whole draft vocabulary).
    int waiting_prompt_rows() const override;
    double seed_share() const override;
    void seed_prompt(int n, generation_stats& stats) override;
    int vocab_size() const override;

private:
    class prefix;
    // Appends g = fc(features) of n target rows at positions pos0.. (features null: zeros).
    void add_target_rows(int pos0, int n, const float* features);
    // Writes the head rows [n_rows_, end) from (history[P + 1], g_P); the last one's logits (when
    // with_logits) into logits_ and its pre-norm output into h_.
    void write_rows(int end, bool with_logits, generation_stats& stats);
    // Row i of the last head forward: its logits over the ids the head drafts from (S with NanoSpec, else
    // the draft vocabulary) into logits_.
    void head_logits(int i);
    int n_ids() const;
    const int32_t* ids() const;

    // Writes every pending row but the seed (not when deferred: propose() writes them).
    void write_context_rows(generation_stats& stats);
    void count_forward(generation_stats& stats);  // n_draft_forwards

    std::shared_ptr<const eagle3_head> head_;
    bool deferred_;
    eagle3_evaluator eval_;
    kv_cache cache_;
    draft_length length_;
    float p_min_;
    speculation_request request_;
    logits_processor processor_;
    std::vector<int32_t> tokens_;  // the request's history (the last pending), as begin() and the verdicts give it
    int n_rows_ = 0;               // context rows written
    std::vector<float> g_;         // g of positions [n_rows_, n_rows_ + g_.size() / H): not yet written
    std::vector<float> features_;  // scratch: one row's fused g
    std::vector<float> logits_, h_;
    std::vector<int32_t> work_;    // history + drafted tokens (the penalty context)
    double head_seconds_ = 0;      // this propose()'s time in the head's output matrix
    prefix* prefix_ = nullptr;     // what the slot may reuse of our rows (owned by the slot or by owned_)
    std::unique_ptr<prefix_state> owned_;
    std::unique_ptr<draft_vocab> vocab_;  // NanoSpec's S over the head's draft vocabulary, or null
    std::unique_ptr<nanospec> nanospec_;  // S's rules
};

}  // namespace specgen
