// The sequential speculator (speculative/sequential.h), make_speculator() and the speculator factory.
#include "speculative/sequential.h"

#include <algorithm>
#include <chrono>

#include "backend/backend.h"
#include "common/error.h"
#include "speculative/auto/auto_speculator.h"
#include "speculative/draft_batch.h"
#include "speculative/draft_vocab.h"
#include "speculative/drafters/drafters.h"
#include "speculative/drafters/eagle3_head.h"
#include "speculative/drafters/neural.h"
#include "speculative/eagle3.h"
#include "speculative/nanospec.h"
#include "speculative/ssd/ssd.h"

namespace specgen {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

sequential_speculator::sequential_speculator(const generator_params& params, const speculation_target& t,
                                             bool defer_seed)
    : p_min_(params.effective_draft_p_min()), length_(params) {
    if (params.draft == "ngram") {
        if (params.nanospec_on() || params.frspec > 0)
            throw invalid_argument_error("nanospec/frspec choose a draft LM head: they need draft = \"self\" or a draft model, not \"ngram\"");
        drafter_ = make_ngram_drafter(params.ngram_max, params.ngram_min);
        return;
    }
    weights_ = t.draft ? t.draft : load_neural_weights(params, t.target, t.tok);
    vocab_ = make_draft_vocab(params, *weights_->m, t.target.hp().n_vocab);  // over the drafter's own head
    if (vocab_ && vocab_->grows()) nanospec_ = std::make_unique<nanospec>(*vocab_, t.head, t.prefix, defer_seed);
    if (params.ngram_chain > 0 && weights_->own)
        chain_ = make_ngram_drafter(std::max(params.ngram_max, params.ngram_chain), params.ngram_chain);
    if (t.batch) {
        batch_ = t.batch;
        batched_ = std::make_unique<neural_drafter>(batch_->weights(), batch_->n_layers(), batch_->cache(), t.be,
                                                    vocab_.get(), false, t.seq);
        return;
    }
    // Beside an EAGLE-3 head (auto's candidate) the rows it hands over carry the head's features.
    drafter_ = make_neural_drafter(params, weights_, t.cache, t.be, vocab_.get(), t.seq,
                                   t.eagle3 ? &t.eagle3->target_layers : nullptr);
}

sequential_speculator::~sequential_speculator() = default;

void sequential_speculator::begin(const std::vector<int32_t>& prompt, const speculation_request& request,
                                  step_context& step, generation_stats& stats) {
    request_ = request;
    length_.reset();
    n_chained_ = 0;
    // A draft model's cache keeps the slot's rows between requests, as the target's does (prefix reuse):
    // the first draft forwards only the rows after the longest prefix the new history shares with them.
    if (drafter_) drafter_->begin(prompt);
    if (weights_ && weights_->own)  // (under auto the other candidates leave the draft model's count alone)
        stats.n_draft_prompt_tokens_cached = drafter_ ? drafter_->rows_cached(prompt) : batched_->rows_cached(prompt);
    if (nanospec_) nanospec_->begin(prompt, request.n_cached, step.n_sequences, stats);
    else if (vocab_) stats.vocab_set_size = vocab_->size();  // static (FR-Spec): reset() keeps it
}

void sequential_speculator::observe(const prefill_rows& rows, generation_stats& stats) {
    if (nanospec_) nanospec_->observe(rows, stats);
}

int sequential_speculator::waiting_prompt_rows() const { return nanospec_ ? nanospec_->waiting_rows() : 0; }
double sequential_speculator::seed_share() const { return nanospec_ ? nanospec_->seed_share() : 1.0; }
void sequential_speculator::seed_prompt(int n, generation_stats& stats) {
    if (nanospec_) nanospec_->seed_waiting(n, stats);
}
int sequential_speculator::vocab_size() const { return vocab_ ? vocab_->size() : 0; }

int sequential_speculator::chain(const std::vector<int32_t>& history, int n) {
    if (!chain_ || !chain_allowed_) return 0;
    rng unused(0);  // a point-mass drafter draws nothing: the request's generator stays untouched
    chain_->propose(history, n, request_.sampling, 0.0f, unused, match_);
    const int m = int(match_.tokens.size());
    if (m > 0) {
        chained_ctx_.assign(history.begin(), history.end());
        chained_ctx_.insert(chained_ctx_.end(), match_.tokens.begin(), match_.tokens.end());
    }
    return m;
}

void sequential_speculator::propose(const std::vector<int32_t>& history, int max_n, const step_context& step, rng& gen,
                                    proposal& out, generation_stats& stats) {
    out.clear();
    n_chained_ = 0;
    const int n = length_.limit(max_n);
    if (n <= 0) return;
    const auto t0 = std::chrono::steady_clock::now();
    // ngram_chain: the match's tokens x_1..x_m are the proposal's first, point masses (the lookup is a
    // function of the history); the model drafts x_{m+1}.. after them, each with its own q (section 6.1).
    const int m = chain(history, n);
    n_chained_ = m;
    const std::vector<int32_t>& ctx = m > 0 ? chained_ctx_ : history;
    if (batch_) {
        stats.draft_seconds += seconds_since(t0);
        batch_->join({batched_.get(), &ctx, n, m, length_.min(), p_min_, &request_.sampling, &gen, &out, &stats});
        if (step.drafts != batch_) batch_->run();  // the engine does not batch this step: draft alone now
        return;
    }
    bool model_drafted = true;
    if (m == 0) {
        drafter_->propose(history, n, request_.sampling, p_min_, gen, out);
    } else {
        out.tokens.assign(match_.tokens.begin(), match_.tokens.end());
        if (out.q.size() < size_t(n)) out.q.resize(size_t(n));
        for (int i = 0; i < m; ++i) out.q[size_t(i)].set_point_mass(out.tokens[size_t(i)]);
        if (n > m) {
            // The model's first forward takes the match's rows with any it lacks (one forward).
            drafter_->propose(ctx, n - m, request_.sampling, p_min_, gen, model_part_);
            for (size_t i = 0; i < model_part_.tokens.size(); ++i) {
                out.tokens.push_back(model_part_.tokens[i]);
                std::swap(out.q[size_t(m) + i], model_part_.q[i]);
            }
        } else {
            model_drafted = false;  // the match fills the draft
        }
    }
    stats.draft_seconds += seconds_since(t0);
    if (model_drafted) stats.draft_head_seconds += drafter_->head_seconds();
    if (length_.keep(int(out.tokens.size())) == 0) out.tokens.clear();
}

void sequential_speculator::observe(const verify_outcome& v, step_context&, generation_stats& stats) {
    length_.update(v.gamma, v.n_accepted);
    if (n_chained_ > 0 && v.gamma > 0) {
        stats.n_ngram_chained += std::min(n_chained_, v.gamma);
        stats.n_ngram_chained_accepted += std::min(n_chained_, v.n_accepted);
    }
    n_chained_ = 0;
    if (nanospec_) nanospec_->observe(v, nullptr, stats);
    else if (vocab_) stats.vocab_set_size = vocab_->size();
}

int sequential_speculator::draft_rows_behind(const std::vector<int32_t>& history) const {
    return batched_ ? batched_->rows_behind(history) : 0;  // drafting alone is priced per token instead
}

int sequential_speculator::copyable_rows(const speculator& from, int n) const {
    const auto* other = dynamic_cast<const sequential_speculator*>(&from);
    if (!other || !nanospec_ || !other->nanospec_) return 0;
    return nanospec_->copyable_rows(*other->nanospec_, n);
}

void sequential_speculator::copy_prefix(const speculator& from, int n, const std::vector<int32_t>& tokens) {
    const auto* other = dynamic_cast<const sequential_speculator*>(&from);
    if (!other) return;
    if (nanospec_ && other->nanospec_) nanospec_->copy_prefix(*other->nanospec_, n);
    // The draft model's rows of the copied prefix, as far as the other slot's draft cache holds them.
    if (batched_ && other->batched_) {
        // (none when the other has not drafted yet: its cache may not even be allocated)
        const int m = std::min(n, other->batched_->rows_cached(tokens));
        if (m > 0) batch_->cache().copy_prefix(other->batched_->seq(), batched_->seq(), m);
        batched_->replace_cached(tokens.data(), m);
    }
}

void sequential_speculator::end() {
    if (nanospec_) nanospec_->end();
}

std::unique_ptr<speculator> make_speculator(const generator_params& params, const speculation_target& t) {
    if (params.ssd && t.seq != 0)
        throw invalid_argument_error("ssd runs one sequence at a time: it needs n_parallel = 1");
    if (params.ssd) return std::make_unique<ssd_speculator>(params, t);
    if (params.draft == "auto") return make_auto_speculator(params, t);  // a draft_head is one of its candidates
    if (!params.draft_head.empty()) return std::make_unique<eagle3_speculator>(params, t);
    if (params.draft.empty()) return nullptr;
    return std::make_unique<sequential_speculator>(params, t);
}

speculator_factory::speculator_factory(const generator_params& params, const model& target, const tokenizer& tok)
    : params_(params) {
    // A neural drafter's weights: loaded once, read by every slot's drafter (auto builds its own self
    // candidates, and shares a draft model given with it like this; ngram and plain decoding have none).
    if (!params.draft.empty() && params.draft != "ngram" && params.draft != "auto")
        draft_ = load_neural_weights(params, target, tok);
    if (params.draft == "auto" && !params.draft_model.empty()) draft_ = load_neural_weights(auto_draft_params(params), target, tok);
    if (!params.draft_head.empty()) eagle3_ = load_eagle3_head(params.draft_head, target);
    if (draft_ && draft_->own && target.bytes_per_token() > 0)
        size_ratio_ = double(draft_->m->bytes_per_token()) / double(target.bytes_per_token());
}

speculator_factory::~speculator_factory() = default;

std::unique_ptr<speculator> speculator_factory::make(speculation_target t) {
    t.draft = draft_;
    t.eagle3 = eagle3_;
    // The sequential speculator over a draft model drafts through the shared batch (built on the
    // first slot's backend: every slot runs on the generator's one backend). SSD, auto and EAGLE-3
    // keep drafters of their own.
    const bool sequential = !params_.ssd && params_.draft_head.empty() && params_.draft != "auto";
    if (sequential && draft_ && draft_->own) {
        if (!batch_)
            batch_ = std::make_unique<draft_batch>(draft_, params_.n_ctx, params_.n_parallel, t.be, params_.n_threads_draft);
        t.batch = batch_.get();
    }
    return make_speculator(params_, t);
}

std::vector<int> speculator_factory::captured_layers() const {
    return eagle3_ ? eagle3_->target_layers : std::vector<int>{};
}

}  // namespace specgen
