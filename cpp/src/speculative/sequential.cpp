// The sequential speculator (docs/ALGORITHMS.md sections 1-3): one drafter that drafts on the caller's
// thread before each verification, its draft vocabulary S (NanoSpec grows it from the target's rows,
// FR-Spec keeps it static) and the adaptive draft length. Also make_speculator().
#include <chrono>

#include "backend/backend.h"

#include "speculative/draft_vocab.h"
#include "common/error.h"
#include "speculative/drafters/drafters.h"
#include "speculative/drafters/neural.h"
#include "speculative/speculator.h"
#include "speculative/ssd/ssd.h"
#include "speculative/auto/auto_speculator.h"

namespace specgen {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

class sequential_speculator final : public speculator {
public:
    sequential_speculator(const generator_params& params, const model& target, const tokenizer& tok,
                          kv_cache& target_cache, backend& be, int seq)
        : p_min_(params.effective_draft_p_min()), length_(params) {
        if (params.draft == "ngram") {
            if (params.nanospec || params.frspec > 0)
                throw invalid_argument_error("nanospec/frspec choose a draft LM head: they need draft = \"self\" or a draft model, not \"ngram\"");
            drafter_ = make_ngram_drafter(params.ngram_max, params.ngram_min);
            return;
        }
        weights_ = load_neural_weights(params, target, tok);
        vocab_ = make_draft_vocab(params, *weights_.m, target.hp().n_vocab);  // over the drafter's own head
        drafter_ = make_neural_drafter(params, weights_, target_cache, be, vocab_.get(), seq);
    }

    int prompt_topk() const override { return vocab_ && vocab_->grows() ? vocab_->top_k() : 0; }

    void begin(const std::vector<int32_t>& prompt, const speculation_request& request, const int32_t* topk,
               int64_t n_topk_rows, generation_stats& stats) override {
        request_ = request;
        length_.reset();
        drafter_->begin(prompt);
        if (vocab_) {
            vocab_->reset();
            if (vocab_->grows()) vocab_->seed(prompt.data(), int64_t(prompt.size()), topk, n_topk_rows);
            stats.vocab_set_size = vocab_->size();
        }
    }

    void add_prompt_topk(const int32_t* topk, int64_t n_topk_rows, generation_stats& stats) override {
        if (!vocab_ || !vocab_->grows()) return;
        vocab_->seed(nullptr, 0, topk, n_topk_rows);
        stats.vocab_set_size = vocab_->size();
    }

    void propose(const std::vector<int32_t>& history, int max_n, rng& gen, proposal& out,
                 generation_stats& stats) override {
        out.clear();
        const int n = length_.limit(max_n);
        if (n <= 0) return;
        const auto t0 = std::chrono::steady_clock::now();
        drafter_->propose(history, n, request_.sampling, p_min_, gen, out);
        stats.draft_seconds += seconds_since(t0);
        stats.draft_head_seconds += drafter_->head_seconds();
        if (length_.keep(int(out.tokens.size())) == 0) out.tokens.clear();
    }

    void observe(const verify_outcome& v, generation_stats& stats) override {
        length_.update(v.gamma, v.n_accepted);
        if (!vocab_) return;
        if (vocab_->grows()) {
            // The target rows on the emitted path (0..k: the ones whose context was kept) and the
            // emitted tokens x_1..x_k, y (docs/ALGORITHMS.md section 3).
            const int n_rows = v.target_logits ? v.n_accepted + 1 : 0, k = vocab_->top_k();
            topk_.resize(size_t(n_rows) * k);
            for (int r = 0; r < n_rows; ++r)
                top_ids(v.target_logits + size_t(r) * v.n_vocab, v.n_vocab, k, &topk_[size_t(r) * k]);
            emitted_.assign(v.drafted, v.drafted + v.n_accepted);
            emitted_.push_back(v.next_token);
            vocab_->grow(topk_.data(), n_rows, emitted_.data(), int64_t(emitted_.size()), v.drafted, v.gamma);
        }
        stats.vocab_set_size = vocab_->size();
    }

private:
    float p_min_;
    draft_length length_;
    speculation_request request_;
    neural_weights weights_;               // a neural drafter's (unused for ngram)
    std::unique_ptr<draft_vocab> vocab_;   // S over the drafter's head, or null
    std::unique_ptr<drafter> drafter_;
    std::vector<int32_t> topk_, emitted_;
};

}  // namespace

std::unique_ptr<speculator> make_speculator(const generator_params& params, const model& target, const tokenizer& tok,
                                            kv_cache& target_cache, backend& be, int seq) {
    if (params.ssd && seq != 0)
        throw invalid_argument_error("ssd runs one sequence at a time: it needs n_parallel = 1");
    if (params.ssd) return std::make_unique<ssd_speculator>(params, target, tok, be.host_memory() ? &target_cache : nullptr);
    if (params.draft.empty()) return nullptr;
    if (params.draft == "auto") return make_auto_speculator(params, target, tok, target_cache, be, seq);
    return std::make_unique<sequential_speculator>(params, target, tok, target_cache, be, seq);
}

}  // namespace specgen
