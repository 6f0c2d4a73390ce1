// The EAGLE-3 speculator (speculative/eagle3.h).
#include "speculative/eagle3.h"

#include <algorithm>
#include <chrono>

#include "common/error.h"
#include "model/model.h"
#include "speculative/draft_vocab.h"
#include "speculative/drafters/drafters.h"
#include "speculative/nanospec.h"

namespace specgen {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

// Of a cached prefix of n tokens, the head rows that still hold: row P reads t_{P+1}, so rows 0..n-2 of
// this slot's own rows (another slot's KV rows come without our head rows: none then). The engine
// prefills the rest, which hands us their features. With NanoSpec, also no more than its own state keeps.
class eagle3_speculator::prefix final : public prefix_state {
public:
    int rows = 0;                         // context rows written for the slot's tokens
    std::unique_ptr<prefix_state> vocab;  // NanoSpec's (nanospec.h), or null
    int reusable_rows(int n, bool copied, int n_sequences) const override {
        const int ours = copied ? 0 : std::max(0, std::min(rows, n - 1));
        return vocab ? std::min(ours, vocab->reusable_rows(n, copied, n_sequences)) : ours;
    }
};

eagle3_speculator::eagle3_speculator(const generator_params& params, const speculation_target& t, bool deferred)
    : head_(t.eagle3 ? t.eagle3 : load_eagle3_head(params.draft_head, t.target)),
      deferred_(deferred),
      eval_(*head_, t.be),
      cache_(head_->hp, params.n_ctx),
      length_(params),
      p_min_(params.effective_draft_p_min()) {
    auto p = std::make_unique<prefix>();
    prefix_ = p.get();
    if (params.nanospec_on()) {
        // S holds target ids; the head has rows for d2t's only (draft_vocab skips the others).
        vocab_ = std::make_unique<draft_vocab>(draft_vocab::kind::nanospec, head_->output, params.nanospec_capacity, 0.0f,
                                               params.nanospec_topk, head_->d2t);
        vocab_->set_target_vocab(t.target.hp().n_vocab);
        nanospec_ = std::make_unique<nanospec>(*vocab_, t.head, &p->vocab, deferred);
    }
    if (t.prefix) *t.prefix = std::move(p);
    else owned_ = std::move(p);
}

eagle3_speculator::~eagle3_speculator() = default;

void eagle3_speculator::begin(const std::vector<int32_t>& prompt, const speculation_request& request, step_context& step,
                              generation_stats& stats) {
    if (nanospec_) nanospec_->begin(prompt, request.n_cached, step.n_sequences, stats);
    request_ = request;
    length_.reset();
    tokens_ = prompt;
    // The slot's cached rows are ours up to prefix::reusable_rows() (written rows, then pending g's);
    // the prefill brings the rest. A gap (a caller that did not ask) is filled with g = 0 rows.
    const size_t E = size_t(head_->hp.n_embd);
    if (request.n_cached <= n_rows_) {
        n_rows_ = request.n_cached;
        g_.clear();
    } else {
        g_.resize(std::min(g_.size(), size_t(request.n_cached - n_rows_) * E));
    }
    prefix_->rows = n_rows_ + pending_rows();
}

int eagle3_speculator::pending_rows() const { return int(g_.size() / size_t(head_->hp.n_embd)); }

void eagle3_speculator::add_target_rows(int pos0, int n, const float* features) {
    const size_t E = size_t(head_->hp.n_embd);
    if (pos0 < n_rows_) {  // rows forwarded again (not expected): forget ours from there
        n_rows_ = pos0;
        g_.clear();
    }
    g_.resize((size_t(pos0) - size_t(n_rows_)) * E, 0.0f);  // drops rows past pos0, zero-fills a gap
    const size_t at = g_.size();
    g_.resize(at + size_t(n) * E, 0.0f);
    // Without features (no capture) the rows keep g = 0: drafts get worse, the output stays the target's.
    if (features && n > 0) eval_.fuse(features, n, g_.data() + at);
    prefix_->rows = n_rows_ + pending_rows();
}

void eagle3_speculator::write_context_rows(generation_stats& stats) {
    if (!deferred_) write_rows(n_rows_ + pending_rows() - 1, false, stats);
}

void eagle3_speculator::count_forward(generation_stats& stats) {
    stats.n_draft_forwards += 1;
    stats.n_draft_batch_sequences += 1;  // one sequence: the head drafts alone
}

void eagle3_speculator::write_rows(int end, bool with_logits, generation_stats& stats) {
    const size_t E = size_t(head_->hp.n_embd);
    while (n_rows_ < end) {
        const int m = std::min(eagle3_evaluator::kChunk, end - n_rows_);
        eval_.forward(cache_, tokens_.data() + n_rows_ + 1, g_.data(), m, n_rows_);
        count_forward(stats);
        g_.erase(g_.begin(), g_.begin() + ptrdiff_t(size_t(m) * E));
        n_rows_ += m;
        if (n_rows_ == end && with_logits) {
            h_.assign(eval_.prenorm() + size_t(m - 1) * E, eval_.prenorm() + size_t(m) * E);
            head_logits(m - 1);
        }
    }
    // prefix_->rows (written + pending) is unchanged: rows moved from pending to written.
}

int eagle3_speculator::vocab_size() const { return vocab_ ? vocab_->size() : 0; }
int eagle3_speculator::waiting_prompt_rows() const { return nanospec_ ? nanospec_->waiting_rows() : 0; }
double eagle3_speculator::seed_share() const { return nanospec_ ? nanospec_->seed_share() : 1.0; }
void eagle3_speculator::seed_prompt(int n, generation_stats& stats) {
    if (nanospec_) nanospec_->seed_waiting(n, stats);
}
int eagle3_speculator::n_ids() const { return vocab_ ? vocab_->size() : head_->n_draft_vocab(); }
const int32_t* eagle3_speculator::ids() const { return vocab_ ? vocab_->ids() : head_->d2t.data(); }

void eagle3_speculator::head_logits(int i) {
    logits_.resize(size_t(n_ids()));
    const auto t0 = std::chrono::steady_clock::now();
    if (vocab_) eval_.logits(i, vocab_->head(), logits_.data());
    else eval_.logits(i, logits_.data());
    head_seconds_ += seconds_since(t0);
}

void eagle3_speculator::observe(const prefill_rows& rows, generation_stats& stats) {
    if (nanospec_) nanospec_->observe(rows, stats);  // also without rows: a cached prompt is complete then
    if (rows.n <= 0) return;
    add_target_rows(rows.pos0, rows.n, rows.features);
    // Every row but the last target row: that one is the seed, written by propose() with its logits.
    write_context_rows(stats);
}

void eagle3_speculator::propose(const std::vector<int32_t>& history, int max_n, const step_context&, rng& gen,
                                proposal& out, generation_stats& stats) {
    out.clear();
    const int n = length_.limit(max_n);
    if (n <= 0) return;
    const auto t0 = std::chrono::steady_clock::now();
    head_seconds_ = 0;
    tokens_ = history;  // the engine's history is the truth (it is the one the verdicts built)
    const int H = int(history.size());
    const int n_target = n_rows_ + pending_rows();
    if (n_target != H - 1 || n_target <= n_rows_) return;  // no seed row (a one-token prompt): plain round
    if (n_ids() == 0) return;  // NanoSpec: none of the ids so far has a row in the head
    write_rows(n_target, true, stats);  // context rows, then the seed (pending, g_{H-2}): its logits propose x_1

    // q over S (NanoSpec; constant during the draft) or the draft vocabulary: target ids, zero elsewhere.
    const int V = n_ids();
    const int32_t* ids = this->ids();
    if (out.q.size() < size_t(n)) out.q.resize(size_t(n));
    work_ = history;
    for (int i = 0; i < n; ++i) {
        if (p_min_ > 0 && top_probability(logits_.data(), V) < p_min_) break;
        token_dist& qi = out.q[size_t(i)];
        // Tokens outside `ids` have q = 0: the verifier's residual covers them.
        processor_.process(logits_.data(), ids, V, request_.sampling, work_.data(), work_.size(), qi);
        const int32_t x = sample_token(qi, gen);
        out.tokens.push_back(x);
        work_.push_back(x);
        const int pos = H - 1 + i;  // the row (x_{i+1}, the pre-norm output of the row before)
        if (i + 1 == n || pos >= cache_.n_ctx()) break;
        eval_.forward(cache_, &x, h_.data(), 1, pos);
        count_forward(stats);
        h_.assign(eval_.prenorm(), eval_.prenorm() + h_.size());
        head_logits(0);
    }
    stats.draft_seconds += seconds_since(t0);
    stats.draft_head_seconds += head_seconds_;
    if (length_.keep(int(out.tokens.size())) == 0) out.tokens.clear();
}

void eagle3_speculator::observe(const verify_outcome& v, step_context&, generation_stats& stats) {
    length_.update(v.gamma, v.n_accepted);
    if (nanospec_) nanospec_->observe(v, nullptr, stats);
    const int pos0 = int(tokens_.size()) - 1;  // the pending token's row
    tokens_.insert(tokens_.end(), v.drafted, v.drafted + v.n_accepted);
    tokens_.push_back(v.next_token);
    // The verified rows on the emitted path: [pending, x_1..x_k].
    add_target_rows(pos0, v.n_accepted + 1, v.features);
    write_context_rows(stats);
}

int eagle3_speculator::copyable_rows(const speculator& from, int n) const {
    const auto* other = dynamic_cast<const eagle3_speculator*>(&from);
    if (!other || deferred_ || other->deferred_ || other->head_ != head_) return 0;
    const int rows = std::min(n - 1, other->n_rows_);
    if (!nanospec_) return std::max(0, rows);
    return other->nanospec_ ? std::max(0, std::min(rows, nanospec_->copyable_rows(*other->nanospec_, n))) : 0;
}

void eagle3_speculator::copy_prefix(const speculator& from, int n, const std::vector<int32_t>&) {
    const auto* other = dynamic_cast<const eagle3_speculator*>(&from);
    if (!other || n <= 0 || n > other->n_rows_) return;
    if (nanospec_ && other->nanospec_) nanospec_->copy_prefix(*other->nanospec_, n);
    cache_.allocate(eval_.be());  // a slot that never drafted has not allocated its rows yet
    cache_.copy_rows_from(other->cache_, 0, 0, 0, n);
    // Rows 0..n-1 read the shared tokens 1..n; begin() takes the request's history as tokens_.
    n_rows_ = n;
    g_.clear();
    prefix_->rows = n_rows_;
}

void eagle3_speculator::end() {
    if (nanospec_) nanospec_->end();
}

}  // namespace specgen
