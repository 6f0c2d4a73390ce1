// The neural drafters: one loader, one draft loop (speculative/drafters/neural.h), and the sequential
// drafter built on them.
#include "speculative/drafters/neural.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>

#include "backend/backend.h"
#include "common/error.h"
#include "gguf/gguf_reader.h"
#include "speculative/draft_vocab.h"
#include "speculative/drafters/drafters.h"
#include "model/vocab_compat.h"
#include "tokenizer/tokenizer.h"

namespace specgen {

float top_probability(const float* logits, int n) {
    const float mx = *std::max_element(logits, logits + n);
    double sum = 0;
    for (int i = 0; i < n; ++i) sum += std::exp(double(logits[i]) - mx);
    return float(1.0 / sum);
}

namespace {
std::atomic<int64_t> n_draft_model_loads{0};
}  // namespace

int64_t draft_model_loads() { return n_draft_model_loads.load(); }

std::shared_ptr<const neural_weights> load_neural_weights(const generator_params& params, const model& target,
                                                          const tokenizer& target_tok) {
    auto loaded = std::make_shared<neural_weights>();
    neural_weights& w = *loaded;
    if (params.draft == "self") {
        const int n_layer = target.hp().n_layer;
        w.m = &target;
        w.n_layers = params.self_layers == 0 ? n_layer : params.self_layers;
        if (w.n_layers < 1 || w.n_layers > n_layer)
            throw invalid_argument_error("self_layers = " + std::to_string(params.self_layers) + " out of range [0, " +
                                         std::to_string(n_layer) + "] (0 = all layers)");
        w.is_target = w.n_layers == n_layer;
        return loaded;
    }
    if (params.draft.empty() || params.draft == "ngram")
        throw invalid_argument_error("a neural drafter needs draft='self' or a draft model (got '" + params.draft + "')");
    w.file = std::make_shared<gguf_file>(params.draft);
    w.own = std::make_unique<model>(w.file);
    tokenizer draft_tok(*w.file);
    check_draft_vocabulary(target, target_tok, *w.own, draft_tok, "draft model " + w.file->path());
    w.m = w.own.get();
    w.n_layers = w.m->hp().n_layer;
    n_draft_model_loads.fetch_add(1);
    return loaded;
}

neural_drafter::neural_drafter(const model& m, int n_layers, kv_cache& cache, backend& be, draft_vocab* vocab,
                               bool follows_target, int seq)
    : m_(m), n_layers_(n_layers), cache_(cache), be_(be), eval_(m, be), vocab_(vocab), follows_target_(follows_target),
      seq_(seq) {}

int neural_drafter::n_logits() const { return vocab_ ? vocab_->size() : m_.hp().n_vocab; }
const int32_t* neural_drafter::ids() const { return vocab_ ? vocab_->ids() : nullptr; }
int neural_drafter::n_ctx() const { return cache_.n_ctx(); }

void neural_drafter::head(const float* h, size_t slot) {
    if (logits_rows_.size() <= slot) logits_rows_.resize(slot + 1);
    std::vector<float>& out = logits_rows_[slot];
    out.resize(size_t(n_logits()));
    const auto t0 = std::chrono::steady_clock::now();
    if (vocab_) vocab_->logits(be_, h, 1, out.data());
    else eval_.logits(h, 1, out.data());
    head_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int neural_drafter::cached_prefix(const std::vector<int32_t>& ctx) const {
    const int n = int(ctx.size());
    if (follows_target_) return n - 1;  // the target's cache holds everything but the last row
    size_t lcp = 0;
    const size_t lim = std::min(cached_.size(), ctx.size());
    while (lcp < lim && cached_[lcp] == ctx[lcp]) ++lcp;
    return std::min<int>(int(lcp), n - 1);
}

int neural_drafter::keep_prefix(const std::vector<int32_t>& ctx) {
    const int n_keep = cached_prefix(ctx);
    if (!follows_target_) cached_.resize(size_t(n_keep));
    return n_keep;
}

int neural_drafter::rows_cached(const std::vector<int32_t>& ctx) const {
    return follows_target_ ? 0 : cached_prefix(ctx);
}

int neural_drafter::rows_behind(const std::vector<int32_t>& ctx) const {
    return std::max(0, int(ctx.size()) - 1 - cached_prefix(ctx));
}

bool neural_drafter::forward(const std::vector<int32_t>& ctx, const std::vector<int>& rows, const abort_check* abort,
                             std::vector<float>* hidden_out, bool with_head) {
    const int n = int(ctx.size());
    int n_keep = keep_prefix(ctx);
    if (!rows.empty()) n_keep = std::min(n_keep, rows.front());
    if (!follows_target_) cached_.resize(size_t(n_keep));
    const int n_embd = m_.hp().n_embd;
    size_t next_row = 0;
    for (int off = n_keep; off < n; off += evaluator::kChunk) {
        if (abort && (*abort)()) return false;
        const int m = std::min(evaluator::kChunk, n - off);
        eval_.forward(cache_, ctx.data() + off, m, off, n_layers_, seq_);
        if (!follows_target_) cached_.insert(cached_.end(), ctx.begin() + off, ctx.begin() + off + m);
        for (; next_row < rows.size() && rows[next_row] < off + m; ++next_row) {
            const float* h = eval_.hidden() + size_t(rows[next_row] - off) * n_embd;
            if (hidden_out) hidden_out->insert(hidden_out->end(), h, h + n_embd);
            if (hidden_out && eval_.features()) {
                const size_t width = eval_.captured_layers().size() * size_t(n_embd);
                const float* f = eval_.features() + size_t(rows[next_row] - off) * width;
                features_.insert(features_.end(), f, f + width);
            }
            if (with_head) head(h, next_row);
        }
    }
    return true;
}

bool neural_drafter::draft(const std::vector<int32_t>& ctx, int n, float p_min, const sampling_params& sp, rng& gen,
                           std::vector<int32_t>& tokens, std::vector<token_dist>& q, std::vector<float>* hidden,
                           bool forward_last, const position_hook* hook, const abort_check* abort) {
    tokens.clear();
    if (hidden) hidden->clear();
    features_.clear();
    n = std::min(n, cache_.n_ctx() - int(ctx.size()));
    if (n <= 0) return true;
    if (q.size() < size_t(n)) q.resize(size_t(n));
    work_.assign(ctx.begin(), ctx.end());
    // Over S (constant during a draft) or the whole vocabulary.
    const int n_logits = this->n_logits();
    const int32_t* ids = this->ids();
    std::vector<int> row(1);
    for (int i = 0; i < n; ++i) {
        row[0] = int(work_.size()) - 1;
        if (!forward(work_, row, abort, hidden, true)) return false;
        const float* logits = logits_rows_[0].data();
        // Over S this is the top probability of q_S's softmax (>= the full head's).
        if (p_min > 0 && top_probability(logits, n_logits) < p_min) break;
        token_dist& qi = q[size_t(i)];
        processor_.process(logits, ids, n_logits, sp, work_.data(), work_.size(), qi);
        if (hook) (*hook)(i, logits, n_logits, ids, qi);
        const int32_t x = sample_token(qi, gen);
        tokens.push_back(x);
        work_.push_back(x);
    }
    // x_n's row too (no head) when asked; a p_min stop has forwarded the last token already.
    if (forward_last && tokens.size() == size_t(n)) {
        row[0] = int(work_.size()) - 1;
        if (!forward(work_, row, abort, hidden, false)) return false;
    }
    return true;
}

namespace {

// The sequential neural drafter: drafts on the caller's thread. A "self" drafter writes the target's
// KV cache for its layers (the target's verification forward rewrites those rows with the same
// values); a draft model has a cache of its own.
class sequential_neural_drafter final : public drafter {
public:
    sequential_neural_drafter(const generator_params& params, std::shared_ptr<const neural_weights> w,
                              kv_cache& target_cache, backend& be, draft_vocab* vocab, int seq,
                              const std::vector<int>* capture)
        : w_(*w), keep_(std::move(w)), be_(be), n_threads_(w_.own ? params.n_threads_draft : 0) {
        kv_cache* cache = &target_cache;
        int cache_seq = seq;  // the target's cache: the request's slot
        if (w_.own) {
            own_cache_ = std::make_unique<kv_cache>(w_.m->hp(), params.n_ctx);
            cache = own_cache_.get();
            cache_seq = 0;
        }
        // Same weights, same cache, every layer: our hidden states are the target's, so they can
        // be handed over (reuse_draft_hidden). The hand-over copies them on the host: not from device memory.
        hand_over_ = w_.is_target && params.reuse_draft_hidden && be.host_memory();
        core_ = std::make_unique<neural_drafter>(*w_.m, w_.n_layers, *cache, be, vocab, !w_.own, cache_seq);
        // Handed-over rows never pass the target's evaluator: their features come from ours.
        if (hand_over_ && capture && !capture->empty()) core_->capture_layers(*capture);
    }

    std::string name() const override { return w_.own ? "model" : "self"; }
    // A draft model's cache keeps its rows for the slot's next request (drafter.h).
    void begin(const std::vector<int32_t>&) override {}
    int rows_cached(const std::vector<int32_t>& prompt) const override { return core_->rows_cached(prompt); }

    void propose(const std::vector<int32_t>& history, int max_n, const sampling_params& params, float p_min,
                 rng& gen, proposal& out) override {
        out.clear();
        core_->head_seconds = 0;
        const active_threads_scope threads(be_, n_threads_);  // a draft model's own threads setting
        core_->draft(history, max_n, p_min, params, gen, out.tokens, out.q, hand_over_ ? &out.hidden : nullptr,
                     false, nullptr, nullptr);
        if (hand_over_) out.n_forwarded = int32_t(out.hidden.size() / size_t(w_.m->hp().n_embd));
        if (hand_over_) out.features = core_->features();
    }
    double head_seconds() const override { return core_->head_seconds; }

private:
    const neural_weights& w_;
    std::shared_ptr<const neural_weights> keep_;  // shared with the other slots' drafters
    backend& be_;
    int n_threads_;  // n_threads_draft for a draft model (0: all the backend's)
    std::unique_ptr<kv_cache> own_cache_;
    std::unique_ptr<neural_drafter> core_;
    bool hand_over_ = false;
};

}  // namespace

std::unique_ptr<drafter> make_neural_drafter(const generator_params& params, std::shared_ptr<const neural_weights> w,
                                             kv_cache& target_cache, backend& be, draft_vocab* vocab, int seq,
                                             const std::vector<int>* capture) {
    return std::make_unique<sequential_neural_drafter>(params, std::move(w), target_cache, be, vocab, seq, capture);
}

}  // namespace specgen
