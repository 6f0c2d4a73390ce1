// The sequential speculator (docs/ALGORITHMS.md sections 1-3): one drafter that drafts on the engine
// thread before each verification, its draft vocabulary S (NanoSpec grows it: speculative/nanospec.h;
// FR-Spec keeps it static) and the adaptive draft length. Over a draft model it drafts through the
// factory's draft_batch (speculation_target::batch): one draft forward per position for every slot.
// With params.ngram_chain a draft model's proposal starts with the n-gram match of the history, where
// there is one, and the model drafts on after it (docs/ALGORITHMS.md section 6.1).
#pragma once
#include <memory>
#include <vector>

#include "speculative/deferred_seed.h"
#include "speculative/speculator.h"

namespace specgen {

class draft_vocab;
class nanospec;
class neural_drafter;
struct drafter;

class sequential_speculator final : public speculator, public deferred_seed {
public:
    // params.draft: "ngram", "self" or a draft GGUF (t.draft when shared, else loaded here).
    // defer_seed: NanoSpec's prompt top-k waits for seed_prompt() (auto's candidates).
    sequential_speculator(const generator_params& params, const speculation_target& t, bool defer_seed = false);
    ~sequential_speculator() override;

    void begin(const std::vector<int32_t>& prompt, const speculation_request& request, step_context& step,
               generation_stats& stats) override;
    void observe(const prefill_rows& rows, generation_stats& stats) override;
    void propose(const std::vector<int32_t>& history, int max_n, const step_context& step, rng& gen, proposal& out,
                 generation_stats& stats) override;
    void observe(const verify_outcome& v, step_context& step, generation_stats& stats) override;
    int draft_rows_behind(const std::vector<int32_t>& history) const override;
    int copyable_rows(const speculator& from, int n) const override;
    void copy_prefix(const speculator& from, int n, const std::vector<int32_t>& tokens) override;

    // deferred_seed (nanospec::seed_waiting), with defer_seed set; |S| of the drafter's head.
    int waiting_prompt_rows() const override;
    double seed_share() const override;
    void seed_prompt(int n, generation_stats& stats) override;
    int vocab_size() const override;
    // ngram_chain: the length of the n-gram match that starts the proposal in flight (0: none), and
    // whether the next proposal may start with one (auto decides per round; default: yes).
    int chained() const { return n_chained_; }
    void allow_chain(bool on) { chain_allowed_ = on; }
    void end() override;

private:
    // The n-gram match that starts this round's proposal (ngram_chain): its length (0: none), the
    // history + match in chained_ctx_.
    int chain(const std::vector<int32_t>& history, int n);

    float p_min_;
    draft_length length_;
    speculation_request request_;
    std::shared_ptr<const neural_weights> weights_;  // a neural drafter's (null for ngram)
    std::unique_ptr<draft_vocab> vocab_;             // S over the drafter's head, or null
    std::unique_ptr<nanospec> nanospec_;             // S's rules when it grows
    std::unique_ptr<drafter> drafter_;               // drafting alone (null when batched_ drafts)
    draft_batch* batch_ = nullptr;                   // a draft model's shared batch (speculative/draft_batch.h)
    std::unique_ptr<neural_drafter> batched_;        // this slot's drafter over the batch's cache
    // ngram_chain (a draft model only): the lookup, the context it leaves the model (history + match),
    // the model's part of a proposal drafted alone, and the match length of the round in flight.
    std::unique_ptr<drafter> chain_;
    proposal match_, model_part_;
    std::vector<int32_t> chained_ctx_;
    int n_chained_ = 0;
    bool chain_allowed_ = true;
};

}  // namespace specgen
