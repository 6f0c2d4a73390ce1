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
#include "speculative/auto/auto_trace.h"
#include "speculative/auto/calibration.h"
#include "speculative/auto/policy.h"
#include "speculative/drafters/drafters.h"
#include "speculative/drafters/eagle3_head.h"
#include "speculative/drafters/neural.h"
#include "speculative/eagle3.h"
#include "speculative/sequential.h"

namespace specgen {

namespace {
using clock_type = std::chrono::steady_clock;

int force_switch_every() {
    const char* v = std::getenv("SPECGEN_AUTO_FORCE_SWITCH");
    return v && *v ? std::max(0, std::atoi(v)) : 0;
}

// The draft model's weights: the factory's shared ones, else loaded here (a caller without a factory).
std::shared_ptr<const neural_weights> draft_weights(const generator_params& params, const speculation_target& t) {
    if (params.draft_model.empty()) return nullptr;
    return t.draft ? t.draft : load_neural_weights(auto_draft_params(params), t.target, t.tok);
}

// The EAGLE-3 head likewise (params.draft_head).
std::shared_ptr<const eagle3_head> head_weights(const generator_params& params, const speculation_target& t) {
    if (params.draft_head.empty()) return nullptr;
    return t.eagle3 ? t.eagle3 : load_eagle3_head(params.draft_head, t.target);
}

// The slot's prefix state when the EAGLE-3 head candidate keeps one beside the self drafter's (its rows,
// its S): a cached prefix is reusable as far as both can reuse it.
class joint_prefix final : public prefix_state {
public:
    std::unique_ptr<prefix_state> self, head;
    int reusable_rows(int n, bool copied, int n_sequences) const override {
        int rows = n;
        for (const std::unique_ptr<prefix_state>* p : {&self, &head})
            if (*p) rows = std::min(rows, (*p)->reusable_rows(n, copied, n_sequences));
        return rows;
    }
};

class auto_speculator final : public speculator {
public:
    explicit auto_speculator(const generator_params& params, const speculation_target& t)
        : draft_max_(params.draft_max),
          draft_(draft_weights(params, t)),
          head_weights_(head_weights(params, t)),
          costs_(load_or_measure_costs(t.target, t.be, t.cache, params.model_path, params.n_threads, params.device,
                                       cost_source_, draft_ ? draft_->m : nullptr, params.draft_model,
                                       head_weights_.get(), params.draft_head)),
          policy_(costs_, params.draft_max, true, draft_ && params.ngram_chain > 0),
          force_every_(force_switch_every()),
          trace_(auto_trace::from_env()),
          shadow_(make_ngram_drafter(params.ngram_max, params.ngram_min)) {
        // The draft model candidate's chain (ngram_chain): the same lookup as its own, run here first so
        // that the policy knows the match before it chooses.
        if (draft_ && params.ngram_chain > 0)
            chain_lookup_ = make_ngram_drafter(std::max(params.ngram_max, params.ngram_chain), params.ngram_chain);
        generator_params p = params;
        // The policy sets gamma every round; a candidate's own adaptation would cut it (rounds chosen
        // at g = 7 drafted 1 after a rejection, and the prediction counted 7).
        p.draft_adaptive = false;
        speculation_target own = t;
        own.draft = nullptr;  // the generator's drafter is "auto": each candidate has weights of its own kind
        // With a head the slot keeps both the self drafter's and the head's prefix states.
        joint_prefix* joint = nullptr;
        if (head_weights_ && t.prefix) {
            auto j = std::make_unique<joint_prefix>();
            joint = j.get();
            *t.prefix = std::move(j);
            own.prefix = &joint->self;
        }
        p.nanospec = toggle::off;  // params.nanospec is the draft model's and the head's candidates' head
        p.draft_head.clear();  // the head is a candidate of its own (below)
        p.set_draft(draft_kind::ngram);
        candidates_[size_t(auto_method::ngram)] = make_speculator(p, own);
        p.set_draft(draft_kind::self);
        p.self_layers = 0;  // every layer: the hand-over (docs/ALGORITHMS.md section 4.7)
        p.nanospec = toggle::on;
        // S's prompt seed waits until a round first drafts with it (seed_prompt() below).
        auto self = std::make_unique<sequential_speculator>(p, own, true);
        self_ = self.get();
        candidates_[size_t(auto_method::self_nanospec)] = std::move(self);
        if (draft_) {
            speculation_target with_model = t;
            with_model.draft = draft_;
            // Its S (with nanospec) is its own: the slot's prefix state stays the self candidate's.
            with_model.prefix = nullptr;
            auto model = std::make_unique<sequential_speculator>(auto_draft_params(params), with_model, true);
            model_ = model.get();
            candidates_[size_t(auto_method::draft_model)] = std::move(model);
        }
        if (head_weights_) {
            speculation_target with_head = t;
            with_head.draft = nullptr;
            with_head.eagle3 = head_weights_;
            with_head.prefix = joint ? &joint->head : nullptr;
            // Deferred: while auto chooses other methods the head keeps its g rows and writes them
            // when a round drafts with it.
            auto head = std::make_unique<eagle3_speculator>(auto_head_params(params), with_head, true);
            head_ = head.get();
            candidates_[size_t(auto_method::draft_head)] = std::move(head);
        }
        seeded_[size_t(auto_method::self_nanospec)] = self_;
        seeded_[size_t(auto_method::draft_model)] = model_;
        seeded_[size_t(auto_method::draft_head)] = head_;
        cycle_.push_back(auto_method::self_nanospec);
        if (model_) cycle_.push_back(auto_method::draft_model);
        if (head_) cycle_.push_back(auto_method::draft_head);
        for (auto_method m : {auto_method::ngram, auto_method::none}) cycle_.push_back(m);
    }

    void begin(const std::vector<int32_t>& prompt, const speculation_request& request, step_context& step,
               generation_stats& stats) override {
        request_ = request;
        for (speculator* c : in_order()) c->begin(prompt, request, step, stats);
        n_ids_ = stats.vocab_set_size;
        model_synced_ = 0;
        last_emitted_ = 1;
        policy_.begin(prompt, request.sampling.temperature);
        shadow_->begin(prompt);
        rounds_ = 0;
        n_emitted_ = 0;
        have_current_ = false;
        seed_waits_.fill(false);
        sum_pred_tokens_ = sum_pred_seconds_ = 0;
        stats.auto_n_switches = 0;
        step.expected_acceptance = batch_acceptance();
    }

    void observe(const prefill_rows& rows, generation_stats& stats) override {
        for (speculator* c : in_order()) c->observe(rows, stats);
        n_ids_ = stats.vocab_set_size;
        if (rows.complete)
            for (size_t m = 0; m < seeded_.size(); ++m) seed_waits_[m] = seeded_[m] && seeded_[m]->waiting_prompt_rows() > 0;
    }

    void propose(const std::vector<int32_t>& history, int max_n, const step_context& step, rng& gen, proposal& out,
                 generation_stats& stats) override {
        t_round_ = clock_type::now();
        out.clear();
        chained_ = 0;
        const int room = std::max(0, max_n);  // the most any round may draft now
        // The n-gram drafter's proposal is free: run it every round to score n-gram acceptance.
        shadow_tokens_.clear();
        proposal shadow;
        rng unused(0);  // a point-mass drafter draws nothing; never touch the request's generator
        shadow_->propose(history, std::min(draft_max_, room), request_.sampling, 0.0f, unused, shadow);
        shadow_tokens_ = shadow.tokens;
        shadow_order_ = shadow.ngram_order;
        int chain_tokens = 0, chain_order = 0;
        if (chain_lookup_) {
            chain_lookup_->propose(history, std::min(draft_max_, room), request_.sampling, 0.0f, unused, chain_match_);
            chain_tokens = int(chain_match_.tokens.size());
            chain_order = chain_match_.ngram_order;
        }

        // In a batched step the self drafter's forwards run one sequence after another while the
        // target's rows are batched: measured 0.94x plain decoding at 4 sequences, where n-gram lookup
        // (free) kept 1.0x. Alone it competes as usual.
        const int n_shadow = int(shadow_tokens_.size());
        // The first round is n-gram or plain: its tokens are the request's first, and a self-drafter
        // round would hold them back by g body forwards (~60-100 ms here) and S's seeding.
        n_model_ids_ = model_ ? model_->vocab_size() : 0;
        n_head_ids_ = head_ ? head_->vocab_size() : 0;
        const auto_round round{int(n_ids_), n_shadow, shadow_order_, room,
                               n_model_ids_, n_head_ids_, chain_tokens, chain_order};
        const bool allow_neural = step.n_sequences < 2 && rounds_ > 0;
        auto_choice c = policy_.choose(round, allow_neural);
        if (force_every_ > 0) {
            // self+nanospec, [draft model,] [draft head,] ngram, none, ...: the first round already drafts
            const auto_method forced = cycle_[size_t(rounds_ / force_every_) % cycle_.size()];
            c = policy_.predict(forced, round);
            c.method = forced;  // without an n-gram proposal the forced n-gram round runs as a plain one
        }
        if (trace_) trace_->choice(policy_, round, c, allow_neural || force_every_ > 0);  // a forced round may be neural
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
        if (seed_waits_[size_t(c.method)]) {
            // S's first round: the target's head over the prompt's last rows seeds it now, not in the
            // prefill or after the first token, so a request that never drafts with S never pays for
            // it. The seed is not this round's cost: the timing starts after it. (Every candidate with
            // a NanoSpec S likewise: the self drafter, the draft model, the EAGLE-3 head.)
            deferred_seed& seeded = *seeded_[size_t(c.method)];
            const int64_t remaining = request_.max_tokens < 0 ? INT64_MAX : request_.max_tokens - n_emitted_;
            const int kept = seeded.waiting_prompt_rows();
            if (const int rows = policy_.seed_rows(c, round, remaining, kept, seeded.seed_share()); rows > 0) {
                const int64_t self_ids = stats.vocab_set_size;
                seeded.seed_prompt(rows, stats);
                seed_waits_[size_t(c.method)] = false;
                if (c.method == auto_method::self_nanospec) n_ids_ = stats.vocab_set_size;
                else stats.vocab_set_size = self_ids;  // the stat is the self candidate's S
                n_model_ids_ = model_ ? model_->vocab_size() : 0;
                n_head_ids_ = head_ ? head_->vocab_size() : 0;
                t_round_ = clock_type::now();
            }
        }
        // The draft model forwards the rows it has not seen (those of other methods' rounds, or the
        // prompt) in its first call: beyond the one row a round of its own leaves, they are its catch-up.
        round_history_ = int64_t(history.size());
        catch_up_rows_ = c.method == auto_method::draft_model ? std::max<int64_t>(0, round_history_ - model_synced_ - 1) : 0;
        // With ngram_chain the draft model's proposal starts with the n-gram match where the policy chose
        // to (its rows join the model's first forward; a match that fills the round runs none).
        if (model_) model_->allow_chain(c.chained > 0);
        // The head writes the rows it kept while other methods drafted: beyond the rows of its own last
        // verdict (which a run of head rounds writes in each), they are its catch-up.
        head_catch_up_ = c.method == auto_method::draft_head ? std::max(0, head_->pending_rows() - last_emitted_) : 0;
        candidates_[size_t(c.method)]->propose(history, std::min(max_n, c.gamma), step, gen, out, stats);
        chained_ = c.method == auto_method::draft_model ? model_->chained() : 0;
    }

    void observe(const verify_outcome& v, step_context& step, generation_stats& stats) override {
        // In a batch the self candidate does not draft (propose()): its S grows by the emitted tokens
        // only, without the top-k pass over the vocabulary per row that would serialise the step.
        verify_outcome seen = v;
        if (step.n_sequences >= 2) seen.target_logits = nullptr;
        // The EAGLE-3 head's S likewise when this round is not its own: a candidate auto does not choose
        // should cost next to nothing (a top-k pass per verified row over the target's vocabulary was
        // 1-2 ms a round on Gemma 3 270M).
        verify_outcome dormant = seen;
        dormant.target_logits = nullptr;
        for (speculator* c : in_order())
            c->observe(c == head_ && current_ != auto_method::draft_head ? dormant : seen, step, stats);
        // The round's time runs from propose to here: S's update from the verified rows is part of
        // every round's cost (docs/ALGORITHMS.md section 8.1). The cost model's input is the gamma
        // the round verified (a drafter may stop early) and S as the round drafted with it.
        const double seconds = std::chrono::duration<double>(clock_type::now() - t_round_).count();
        const bool stopped = current_ == auto_method::self_nanospec && v.gamma < choice_.gamma;
        const bool by_model = current_ == auto_method::draft_model;
        const int round_ids = by_model ? n_model_ids_ : current_ == auto_method::draft_head ? n_head_ids_ : int(n_ids_);
        const int chained = by_model ? std::min(chained_, v.gamma) : 0;
        const bool model_forwarded = by_model && v.gamma > chained;  // a match that fills the round runs no draft forward
        double predicted = stopped ? costs_.stopped_round_seconds(v.gamma, int(n_ids_))
                                   : costs_.round_seconds(current_, v.gamma, round_ids, chained);
        // Its catch-up forward is part of this round's time: within the rows the calibration measured it
        // is predicted with them; a longer one (the prompt, at its first round: 200 rows took 3x their
        // linear extrapolation on the Qwen2.5-Coder pair, and the timing correction then held the draft
        // model below plain decoding for the rest of the request) leaves the round untimed.
        if (model_forwarded && catch_up_rows_ > 0) {
            const int rows = int(catch_up_rows_) + 1 + chained;
            predicted = rows <= int(costs_.draft_forward.size())
                            ? predicted + costs_.draft_forward_seconds(rows) - costs_.draft_forward_seconds(1 + chained)
                            : 0;  // policy_.observe() times no round predicted at 0
        }
        // The head's catch-up likewise (fc ran when the rows were verified; its decoder layer now).
        if (current_ == auto_method::draft_head && head_catch_up_ > 0)
            predicted = head_catch_up_ <= eagle3_evaluator::kChunk ? predicted + head_catch_up_ * costs_.eagle3_row : 0;
        // Its cache now holds the history and x_1..x_{g-1}, of which x_1..x_k stay on the path.
        if (model_forwarded) model_synced_ = round_history_ + std::min(v.n_accepted, v.gamma - 1);
        if (trace_) trace_->outcome(v.gamma, v.n_accepted, chained, seconds, predicted);
        policy_.observe(current_, choice_.gamma, v.gamma, v.n_accepted, seconds, predicted, chained);
        n_ids_ = stats.vocab_set_size;
        n_emitted_ += v.n_accepted + 1;
        last_emitted_ = v.n_accepted + 1;
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
        step.expected_acceptance = batch_acceptance();
    }

    void end() override {
        for (speculator* c : in_order()) c->end();
    }

private:
    // The candidates, the self drafter last: each sets stats.vocab_set_size, and the stat stays its S.
    std::vector<speculator*> in_order() const {
        std::vector<speculator*> out;
        for (auto_method m : {auto_method::ngram, auto_method::draft_model, auto_method::draft_head, auto_method::self_nanospec})
            if (candidates_[size_t(m)]) out.push_back(candidates_[size_t(m)].get());
        return out;
    }

    // What the batch policy should expect of this sequence's next drafts: in a batch auto drafts by
    // n-gram only, whatever the self drafter's rounds alone accepted.
    double batch_acceptance() const { return std::min(0.95, policy_.acceptance(auto_method::ngram)); }

    int draft_max_;
    std::shared_ptr<const neural_weights> draft_;  // the draft model's (null: none given)
    std::shared_ptr<const eagle3_head> head_weights_;  // the EAGLE-3 head (null: none given)
    std::string cost_source_;
    cost_model costs_;
    auto_policy policy_;
    int force_every_;
    std::unique_ptr<auto_trace> trace_;  // $SPECGEN_AUTO_TRACE (null: off)
    std::unique_ptr<drafter> shadow_;
    std::unique_ptr<drafter> chain_lookup_;  // ngram_chain's lookup (null: the draft model never chains)
    proposal chain_match_;
    std::array<std::unique_ptr<speculator>, kAutoMethods> candidates_{};  // [none] stays null
    sequential_speculator* self_ = nullptr;  // candidates_[self_nanospec]
    sequential_speculator* model_ = nullptr;  // candidates_[draft_model] (null: no draft model)
    eagle3_speculator* head_ = nullptr;       // candidates_[draft_head] (null: no EAGLE-3 head)
    std::vector<auto_method> cycle_;         // SPECGEN_AUTO_FORCE_SWITCH's order
    std::array<deferred_seed*, kAutoMethods> seeded_{};  // the candidates whose S seeds at their first round
    std::array<bool, kAutoMethods> seed_waits_{};        // their prompt seed has not run yet (rows wait for it)
    int n_model_ids_ = 0;                   // the draft model's |S| (0: its full head)
    int n_head_ids_ = 0;                    // the EAGLE-3 head's |S| (0: its whole draft vocabulary)
    int64_t model_synced_ = 0;              // history rows the draft model's cache holds on the path
    int64_t round_history_ = 0;             // this round's history length
    int64_t catch_up_rows_ = 0;             // rows the draft model forwards this round beyond its one
    int head_catch_up_ = 0;                 // rows the head writes this round beyond its last verdict's
    int last_emitted_ = 1;                  // tokens the last round emitted
    int chained_ = 0;                       // ngram_chain: the n-gram tokens that start its proposal this round
    speculation_request request_;
    std::vector<int32_t> shadow_tokens_;
    int shadow_order_ = 0;
    int64_t n_ids_ = 0;
    int rounds_ = 0;
    int64_t n_emitted_ = 0;  // the tokens this request's rounds emitted
    bool have_current_ = false;
    auto_method current_ = auto_method::none;
    auto_choice choice_;
    double sum_pred_tokens_ = 0, sum_pred_seconds_ = 0;
    clock_type::time_point t_round_;
};
}  // namespace

generator_params auto_draft_params(const generator_params& params) {
    generator_params p = params;
    p.set_draft(draft_kind::model, params.draft_model);
    p.draft_adaptive = false;
    p.draft_p_min = 0;
    p.self_layers = 0;
    return p;
}

generator_params auto_head_params(const generator_params& params) {
    generator_params p = params;
    p.set_draft(draft_kind::none);
    p.draft_model.clear();
    p.draft_adaptive = false;
    p.draft_p_min = 0;
    return p;
}

std::unique_ptr<speculator> make_auto_speculator(const generator_params& params, const speculation_target& t) {
    return std::make_unique<auto_speculator>(params, t);
}

}  // namespace specgen
