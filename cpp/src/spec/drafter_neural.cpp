// Drafters that run a transformer: a separate draft model ("model") or the target's own first L
// layers ("self", early exit, writing the target's KV cache for those layers). Both draft
// autoregressively: forward one token, head, the same logits processors as the target, sample.
//
// The head is the full LM head, or with NanoSpec / FR-Spec (ALGORITHMS.md section 3) the rows of a
// token set S gathered into W_S (spec/nanospec_vocab.h): draft logits over S only, and the proposal
// q_S is the processed distribution over S (zero outside it; the verifier's residual covers the rest).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "common/error.h"
#include "gguf/gguf_reader.h"
#include "model/model.h"
#include "model/vocab_compat.h"
#include "spec/drafters.h"
#include "spec/frspec_table.h"
#include "spec/nanospec_vocab.h"
#include "tokenizer/tokenizer.h"

namespace specgen {

float top_probability(const float* logits, int n) {
    const float mx = *std::max_element(logits, logits + n);
    double sum = 0;
    for (int i = 0; i < n; ++i) sum += std::exp(double(logits[i]) - mx);
    return float(1.0 / sum);
}

namespace {

class neural_drafter final : public drafter {
public:
    // shares_cache: the target's cache holds history[0 .. n-2] for our layers at every propose() call.
    // vocab: the NanoSpec / FR-Spec set over m's head, or null for the full head.
    neural_drafter(std::string name, const model& m, kv_cache& cache, backend& be, int n_layers, bool shares_cache,
                   std::unique_ptr<nanospec_vocab> vocab)
        : name_(std::move(name)), m_(m), cache_(cache), be_(be), eval_(m, be), n_layers_(n_layers),
          shares_cache_(shares_cache), vocab_(std::move(vocab)) {}

    std::string name() const override { return name_; }
    void begin(const std::vector<int32_t>&) override {
        if (!shares_cache_) cached_.clear();
        if (vocab_) vocab_->reset();
    }
    nanospec_vocab* vocab() override { return vocab_.get(); }

    void propose(const std::vector<int32_t>& history, int max_n, const sampling_params& params, float p_min,
                 rng& gen, draft_proposal& out) override {
        out.tokens.clear();
        const int n_ctx = cache_.n_ctx();
        const int n_hist = int(history.size());
        // Tokens whose keys/values are already in the cache (the rest is forwarded now).
        int n_keep = n_hist - 1;
        if (!shares_cache_) {
            n_keep = 0;
            const int lim = std::min<int>(int(cached_.size()), n_hist - 1);
            while (n_keep < lim && cached_[n_keep] == history[n_keep]) ++n_keep;
        }
        max_n = std::min(max_n, n_ctx - n_hist);
        if (max_n <= 0) return;
        ctx_.assign(history.begin(), history.end());
        const int n_embd = m_.hp().n_embd;
        // Same weights, same cache, every layer: our hidden states are the target's.
        const bool target_hidden = shares_cache_ && n_layers_ == m_.hp().n_layer;
        if (target_hidden && out.target_hidden.size() < size_t(max_n) * n_embd) out.target_hidden.resize(size_t(max_n) * n_embd);
        out.n_target_hidden = 0;
        out.head_seconds = 0;
        const int n_logits = vocab_ ? vocab_->size() : m_.hp().n_vocab;
        const int32_t* ids = vocab_ ? vocab_->ids() : nullptr;
        logits_.resize(n_logits);
        if (out.q.size() < size_t(max_n)) out.q.resize(max_n);
        int pos = n_keep;
        const int32_t* feed = history.data() + n_keep;
        int n_feed = n_hist - n_keep;
        for (int i = 0; i < max_n; ++i) {
            for (int off = 0; off < n_feed; off += kChunk) {
                const int m = std::min(kChunk, n_feed - off);
                eval_.forward(cache_, feed + off, m, pos + off, n_layers_);
                if (off + m == n_feed) {
                    const float* h = eval_.hidden() + size_t(m - 1) * n_embd;
                    if (target_hidden) {
                        std::memcpy(out.target_hidden.data() + size_t(i) * n_embd, h, sizeof(float) * n_embd);
                        out.n_target_hidden = i + 1;
                    }
                    const auto t0 = std::chrono::steady_clock::now();
                    if (vocab_) vocab_->logits(be_, h, 1, logits_.data());
                    else eval_.logits(h, 1, logits_.data());
                    out.head_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                }
            }
            pos += n_feed;
            // Over S this is the top probability of q_S's softmax (>= the full head's).
            if (p_min > 0 && top_probability(logits_.data(), n_logits) < p_min) break;
            token_dist& q = out.q[i];
            processor_.process(logits_.data(), ids, n_logits, params, ctx_.data(), ctx_.size(), q);
            const int32_t x = sample_token(q, gen);
            out.tokens.push_back(x);
            ctx_.push_back(x);
            feed = &ctx_.back();
            n_feed = 1;
        }
        // The last drafted token was never forwarded: the cache holds ctx_ minus that token.
        if (!shares_cache_) cached_.assign(ctx_.begin(), ctx_.end() - 1);
    }

private:
    static constexpr int kChunk = 128;
    std::string name_;
    const model& m_;
    kv_cache& cache_;
    backend& be_;
    evaluator eval_;
    int n_layers_;
    bool shares_cache_;
    std::unique_ptr<nanospec_vocab> vocab_;
    std::vector<int32_t> cached_, ctx_;
    std::vector<float> logits_;
    logits_processor processor_;
};

// A separate draft model owns its file, weights and cache.
class model_drafter_owner final : public drafter {
public:
    model_drafter_owner(const generator_params& params, const model& target, const tokenizer& target_tok, backend& be)
        : file_(std::make_shared<gguf_file>(params.draft)), model_(file_), cache_(model_.hp(), params.n_ctx) {
        tokenizer draft_tok(*file_);
        check_draft_vocabulary(target, target_tok, model_, draft_tok, "draft model " + file_->path());
        inner_ = std::make_unique<neural_drafter>("model", model_, cache_, be, model_.hp().n_layer, false,
                                                  make_draft_vocab(params, model_));
    }
    std::string name() const override { return inner_->name(); }
    void begin(const std::vector<int32_t>& p) override { inner_->begin(p); }
    void propose(const std::vector<int32_t>& h, int max_n, const sampling_params& sp, float p_min, rng& gen,
                 draft_proposal& out) override {
        inner_->propose(h, max_n, sp, p_min, gen, out);
    }
    nanospec_vocab* vocab() override { return inner_->vocab(); }

private:
    std::shared_ptr<const gguf_file> file_;
    model model_;
    kv_cache cache_;
    std::unique_ptr<neural_drafter> inner_;
};

}  // namespace

std::unique_ptr<nanospec_vocab> make_draft_vocab(const generator_params& params, const model& m) {
    const float softcap = m.hp().final_softcap;
    if (params.nanospec)
        return std::make_unique<nanospec_vocab>(nanospec_vocab::kind::nanospec, m.output(), params.nanospec_capacity, softcap,
                                                params.nanospec_topk);
    if (params.frspec > 0) {
        const std::vector<int32_t> ids = read_frspec_table(params.frspec_path, m.hp().n_vocab, params.frspec);
        auto v = std::make_unique<nanospec_vocab>(nanospec_vocab::kind::frspec, m.output(), params.frspec, softcap);
        v->add(ids.data(), int64_t(ids.size()));
        return v;
    }
    return nullptr;
}

std::unique_ptr<drafter> make_drafter(const generator_params& params, const model& target, const tokenizer& tok,
                                      kv_cache& target_cache, backend& be) {
    if (params.draft.empty()) return nullptr;
    if (params.draft == "ngram") {
        if (params.nanospec || params.frspec > 0)
            throw invalid_argument_error("nanospec/frspec choose a draft LM head: they need draft = \"self\" or a draft model, not \"ngram\"");
        return make_ngram_drafter(params.ngram_max, params.ngram_min);
    }
    if (params.draft == "self") {
        const int n_layer = target.hp().n_layer;
        const int L = params.self_layers == 0 ? n_layer : params.self_layers;
        if (L < 1 || L > n_layer)
            throw invalid_argument_error("self_layers = " + std::to_string(params.self_layers) + " out of range [0, " +
                                         std::to_string(n_layer) + "] (0 = all layers)");
        return std::make_unique<neural_drafter>("self", target, target_cache, be, L, true, make_draft_vocab(params, target));
    }
    return std::make_unique<model_drafter_owner>(params, target, tok, be);
}

}  // namespace specgen
