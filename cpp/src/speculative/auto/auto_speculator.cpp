// docs/ALGORITHMS.md section 8: the auto speculator (auto_speculator.h).
#include "speculative/auto/auto_speculator.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "backend/backend.h"
#include "model/model.h"
#include "speculative/auto/calibration.h"
#include "speculative/auto/policy.h"
#include "speculative/drafters/drafters.h"

namespace specgen {

namespace {
using clock_type = std::chrono::steady_clock;

int force_switch_every() {
    const char* v = std::getenv("SPECGEN_AUTO_FORCE_SWITCH");
    return v && *v ? std::max(0, std::atoi(v)) : 0;
}

class auto_speculator final : public speculator {
public:
    auto_speculator(const generator_params& params, const model& target, const tokenizer& tok, kv_cache& cache,
                    backend& be, int seq)
        : draft_max_(params.draft_max),
          costs_(load_or_measure_costs(target, be, cache, params.model_path, params.n_threads, params.device, cost_source_)),
          policy_(costs_, params.draft_max, true),
          force_every_(force_switch_every()),
          shadow_(make_ngram_drafter(params.ngram_max, params.ngram_min)) {
        generator_params p = params;
        // The policy sets gamma every round; a candidate's own adaptation would cut it (rounds chosen
        // at g = 7 drafted 1 after a rejection, and the prediction counted 7).
        p.draft_adaptive = false;
        p.set_draft(draft_kind::ngram);
        candidates_[size_t(auto_method::ngram)] = make_speculator(p, target, tok, cache, be, seq);
        p.set_draft(draft_kind::self);
        p.self_layers = 0;  // every layer: the hand-over (docs/ALGORITHMS.md section 4.7)
        p.nanospec = true;
        candidates_[size_t(auto_method::self_nanospec)] = make_speculator(p, target, tok, cache, be, seq);
    }

    int prompt_topk() const override { return candidates_[size_t(auto_method::self_nanospec)]->prompt_topk(); }
    bool prompt_topk_optional() const override { return true; }

    void begin(const std::vector<int32_t>& prompt, const speculation_request& request, const int32_t* topk,
               int64_t n_topk_rows, generation_stats& stats) override {
        request_ = request;
        for (auto& c : candidates_)
            if (c) c->begin(prompt, request, topk, n_topk_rows, stats);
        n_ids_ = stats.vocab_set_size;
        policy_.begin(prompt, request.sampling.temperature);
        shadow_->begin(prompt);
        rounds_ = 0;
        n_emitted_ = 0;
        have_current_ = false;
        sum_pred_tokens_ = sum_pred_seconds_ = 0;
        stats.auto_n_switches = 0;
    }

    void propose(const std::vector<int32_t>& history, int max_n, rng& gen, proposal& out,
                 generation_stats& stats) override {
        t_round_ = clock_type::now();
        out.clear();
        const int room = std::max(0, max_n);  // the most any round may draft now
        // The n-gram drafter's proposal is free: run it every round to score n-gram acceptance.
        shadow_tokens_.clear();
        proposal shadow;
        rng unused(0);  // a point-mass drafter draws nothing; never touch the request's generator
        shadow_->propose(history, std::min(draft_max_, room), request_.sampling, 0.0f, unused, shadow);
        shadow_tokens_ = shadow.tokens;
        shadow_order_ = shadow.ngram_order;

        // In a batched step the self drafter's forwards run one sequence after another while the
        // target's rows are batched: measured 0.94x plain decoding at 4 sequences, where n-gram lookup
        // (free) kept 1.0x. Alone it competes as usual.
        const int n_shadow = int(shadow_tokens_.size());
        // The first round is n-gram or plain: its tokens are the request's first, and a self-drafter
        // round would hold them back by g body forwards (~60-100 ms here) and S's seeding.
        const auto_round round{int(n_ids_), n_shadow, shadow_order_, room};
        auto_choice c = policy_.choose(round, batch_size_ < 2 && rounds_ > 0);
        if (force_every_ > 0) {
            // self+nanospec, ngram, none, self+nanospec, ...: the first round already drafts
            const int turn = (rounds_ / force_every_) % kAutoMethods;
            const auto_method forced = auto_method(kAutoMethods - 1 - turn);
            c = policy_.predict(forced, round);
            c.method = forced;  // without an n-gram proposal the forced n-gram round runs as a plain one
        }
        rounds_ += 1;
        if (have_current_ && c.method != current_) stats.auto_n_switches += 1;
        current_ = c.method;
        have_current_ = true;
        choice_ = c;
        stats.auto_method = int64_t(c.method);
        sum_pred_tokens_ += c.predicted_tokens;
        sum_pred_seconds_ += c.predicted_seconds;
        stats.auto_predicted_tokens_per_second = sum_pred_seconds_ > 0 ? sum_pred_tokens_ / sum_pred_seconds_ : 0;
        if (c.method == auto_method::none || c.gamma <= 0) return;
        if (c.method == auto_method::self_nanospec && request_.seed_prompt_topk) {
            // S's first round: the head over the prompt's last rows seeds it now, not in the prefill
            // or after the first token, so a request that never drafts with S never pays for it. The
            // head is not this round's cost: the timing starts after it.
            const int64_t remaining = request_.max_tokens < 0 ? INT64_MAX : request_.max_tokens - n_emitted_;
            if (const int rows = policy_.seed_rows(c, round, remaining, request_.n_seed_rows, request_.seed_share); rows > 0) {
                request_.seed_prompt_topk(rows);
                request_.seed_prompt_topk = nullptr;
                t_round_ = clock_type::now();
            }
        }
        candidates_[size_t(c.method)]->propose(history, std::min(max_n, c.gamma), gen, out, stats);
    }

    void add_prompt_topk(const int32_t* topk, int64_t n_topk_rows, generation_stats& stats) override {
        candidates_[size_t(auto_method::self_nanospec)]->add_prompt_topk(topk, n_topk_rows, stats);
        n_ids_ = stats.vocab_set_size;
    }

    void set_batch_size(int n_sequences) override { batch_size_ = n_sequences; }
    double batch_acceptance() const override { return std::min(0.95, policy_.acceptance(auto_method::ngram)); }

    void observe(const verify_outcome& v, generation_stats& stats) override {
        // In a batch the self candidate does not draft (set_batch_size): its S grows by the emitted
        // tokens only, without the top-k pass over the vocabulary per row that would serialise the step.
        verify_outcome seen = v;
        if (batch_size_ >= 2) seen.target_logits = nullptr;
        for (auto& c : candidates_)
            if (c) c->observe(seen, stats);
        // The round's time runs from propose to here: S's update from the verified rows is part of
        // every round's cost (docs/ALGORITHMS.md section 8.1). The cost model's input is the gamma
        // the round verified (a drafter may stop early) and S as the round drafted with it.
        const double seconds = std::chrono::duration<double>(clock_type::now() - t_round_).count();
        const bool stopped = current_ == auto_method::self_nanospec && v.gamma < choice_.gamma;
        const double predicted = stopped ? costs_.stopped_round_seconds(v.gamma, int(n_ids_))
                                         : costs_.round_seconds(current_, v.gamma, int(n_ids_));
        policy_.observe(current_, choice_.gamma, v.gamma, v.n_accepted, seconds, predicted);
        n_ids_ = stats.vocab_set_size;
        n_emitted_ += v.n_accepted + 1;
        // Shadow n-gram score: how much of its proposal the emitted tokens x_1..x_k, y confirm.
        const int n_emitted = v.n_accepted + 1;
        int matched = 0;
        const int g = int(shadow_tokens_.size());
        while (matched < g && matched < n_emitted) {
            const int32_t e = matched < v.n_accepted ? v.drafted[matched] : v.next_token;
            if (e != shadow_tokens_[size_t(matched)]) break;
            matched += 1;
        }
        // Past the emitted tokens the shadow cannot be judged: count only what was seen.
        if (g > n_emitted && matched == n_emitted) policy_.observe_shadow_ngram(matched, matched, shadow_order_);
        else policy_.observe_shadow_ngram(g, matched, shadow_order_);
    }

    void end() override {
        for (auto& c : candidates_)
            if (c) c->end();
    }

private:
    int draft_max_;
    std::string cost_source_;
    cost_model costs_;
    auto_policy policy_;
    int force_every_;
    std::unique_ptr<drafter> shadow_;
    std::array<std::unique_ptr<speculator>, kAutoMethods> candidates_{};  // [none] stays null
    speculation_request request_;
    std::vector<int32_t> shadow_tokens_;
    int shadow_order_ = 0;
    int64_t n_ids_ = 0;
    int rounds_ = 0;
    int64_t n_emitted_ = 0;  // the tokens this request's rounds emitted
    int batch_size_ = 1;
    bool have_current_ = false;
    auto_method current_ = auto_method::none;
    auto_choice choice_;
    double sum_pred_tokens_ = 0, sum_pred_seconds_ = 0;
    clock_type::time_point t_round_;
};
}  // namespace

std::unique_ptr<speculator> make_auto_speculator(const generator_params& params, const model& target, const tokenizer& tok,
                                                 kv_cache& target_cache, backend& be, int seq) {
    return std::make_unique<auto_speculator>(params, target, tok, target_cache, be, seq);
}

}  // namespace specgen
