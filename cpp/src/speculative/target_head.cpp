// The head service (speculative/target_head.h).
#include "speculative/target_head.h"

#include <algorithm>

#include "model/model.h"
#include "speculative/draft_vocab.h"

namespace specgen {

target_head::target_head(evaluator& eval, backend& be, std::unique_ptr<draft_vocab> seed)
    : eval_(eval), be_(be), seed_(std::move(seed)), n_embd_(eval.m().hp().n_embd), n_vocab_(eval.m().hp().n_vocab),
      share_(seed_ ? double(seed_->size()) / double(n_vocab_) : 1.0) {}

target_head::~target_head() = default;

bool target_head::host_memory() const { return be_.host_memory(); }

std::vector<int32_t> target_head::seed_ids() const {
    if (!seed_) return {};
    return std::vector<int32_t>(seed_->ids(), seed_->ids() + seed_->size());
}

void target_head::top_ids(const float* hidden, int n, int k, int32_t* out) {
    const int n_cols = seed_ ? seed_->size() : n_vocab_;
    scratch_.resize(size_t(std::min(kRowsPerPass, n)) * n_cols);
    for (int r = 0; r < n; r += kRowsPerPass) {
        const int c = std::min(kRowsPerPass, n - r);
        const float* h = hidden + size_t(r) * n_embd_;
        if (seed_) seed_->logits(be_, h, c, scratch_.data());
        else eval_.logits(h, c, scratch_.data());
        for (int j = 0; j < c; ++j) {
            int32_t* top = out + size_t(r + j) * k;
            specgen::top_ids(scratch_.data() + size_t(j) * n_cols, n_cols, k, top);
            if (seed_)
                for (int q = 0; q < k; ++q) top[q] = seed_->ids()[top[q]];
        }
    }
}

std::unique_ptr<target_head> make_target_head(const generator_params& params, evaluator& eval, backend& be,
                                              const tokenizer& tok) {
    return std::make_unique<target_head>(eval, be, make_seed_vocab(params, eval.m(), tok));
}

}  // namespace specgen
