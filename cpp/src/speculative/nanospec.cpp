// NanoSpec's seeding, kept prompt rows and growth of S (speculative/nanospec.h).
#include "speculative/nanospec.h"

#include <algorithm>
#include <chrono>

#include "speculative/draft_vocab.h"
#include "speculative/target_head.h"

namespace specgen {

// What the slot keeps between requests: the top-k ids of its first prompt rows [rows, k] (rows before
// the last kSeedRows of their prompt never computed: 0), then the hidden states of the rows after them
// whose top-k never ran [hidden_rows, n_embd].
class nanospec_prefix final : public prefix_state {
public:
    nanospec_prefix(int k, bool deferred) : k_(k), deferred_(deferred) {}

    int reusable_rows(int n, bool copied, int n_sequences) const override {
        // Deferred, a request that joins others goes without the top-k (nanospec::begin): any rows do.
        if (deferred_ && n_sequences > 1) return n;
        // Rows copied from another slot come without what this state keeps for them.
        if (copied) return 0;
        // Deferred, rows without their top-k only cost this request its seed (nanospec::begin); otherwise
        // the rows past the kept top-k are prefilled again, so the seed is what a full prefill gives.
        return deferred_ ? n : std::min(n, topk_rows());
    }

    int topk_rows() const { return int(topk.size() / size_t(k_)); }
    std::vector<int32_t> topk;
    std::vector<float> hidden;
    int hidden_rows = 0;

private:
    int k_;
    bool deferred_;
};

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

nanospec::nanospec(draft_vocab& S, target_head* head, std::unique_ptr<prefix_state>* prefix, bool deferred)
    // Deferred rows wait as host copies of the hidden states, which device memory cannot give: there
    // the top-k runs at the prefill.
    : S_(S), head_(head), deferred_(deferred && (!head || head->host_memory())), k_(S.top_k()) {
    auto kept = std::make_unique<nanospec_prefix>(k_, deferred_);
    kept_ = kept.get();
    if (prefix) *prefix = std::move(kept);
    else owned_ = std::move(kept);
}

nanospec::~nanospec() = default;

void nanospec::set_size(generation_stats& stats, bool staged) const {
    stats.vocab_set_size = staged ? S_.staged_size() : S_.size();
}

void nanospec::begin(const std::vector<int32_t>& prompt, int n_cached, int n_sequences, generation_stats& stats) {
    running_ = true;
    S_.reset();
    S_.seed(prompt.data(), int64_t(prompt.size()), nullptr, 0);
    set_size(stats, false);
    prompt_rows_ = int(prompt.size()) - 1;
    n_past_ = n_cached;
    waiting_.clear();
    waiting_row0_ = 0;
    const nanospec_prefix& kept = *kept_;
    // Deferred, the cached rows are worth more than the top-k that would seed S: a request reuses them
    // without it when the slot kept nothing for some of them (the rows it kept hidden states for still
    // seed it, below), and one that joins a batch never drafts with S (auto, docs/ALGORITHMS.md section 8).
    with_topk_ = head_ != nullptr &&
                 !(deferred_ && (n_sequences > 1 || kept.topk_rows() + kept.hidden_rows < n_cached));
    topk_.clear();
    if (!with_topk_) return;
    topk_.assign(size_t(prompt_rows_) * k_, kNotComputed);
    // The cached rows may extend past the top-k rows the previous request kept (its generated tokens).
    const size_t n = std::min({kept.topk.size(), size_t(n_cached) * k_, topk_.size()});
    std::copy(kept.topk.begin(), kept.topk.begin() + n, topk_.begin());
    // Cached rows whose top-k the last request never ran: their hidden states wait again, when they run
    // up to the rows this prefill adds (the waiting rows must stay contiguous).
    const int row0 = kept.topk_rows();
    const int from = std::max(row0, std::max(0, prompt_rows_ - kSeedRows));
    const int to = std::min(n_cached, row0 + kept.hidden_rows);
    if (kept.hidden_rows > 0 && from < to && to == n_cached) {
        const size_t E = size_t(head_->n_embd());
        waiting_row0_ = from;
        waiting_.assign(kept.hidden.begin() + size_t(from - row0) * E, kept.hidden.begin() + size_t(to - row0) * E);
    }
}

void nanospec::top_k_rows(const float* hidden, int n, int row0, generation_stats& stats) {
    const auto t0 = std::chrono::steady_clock::now();
    head_->top_ids(hidden, n, k_, topk_.data() + size_t(row0) * k_);
    stats.nanospec_prefill_seconds += seconds_since(t0);
}

void nanospec::seed_from(int first) {
    S_.seed(nullptr, 0, topk_.data() + size_t(first) * k_, prompt_rows_ - first);
}

void nanospec::observe(const prefill_rows& rows, generation_stats& stats) {
    const int first = std::max(0, prompt_rows_ - kSeedRows);
    if (with_topk_ && rows.n > 0 && rows.pos0 + rows.n > first) {
        const int r0 = std::max(0, first - rows.pos0);  // the chunk's first row that needs its top-k
        const size_t E = size_t(head_->n_embd());
        if (deferred_) {
            // Kept until seed_waiting(). A prompt's chunks come in order, so the rows stay contiguous.
            if (waiting_.empty()) waiting_row0_ = rows.pos0 + r0;
            waiting_.insert(waiting_.end(), rows.hidden + size_t(r0) * E, rows.hidden + size_t(rows.n) * E);
        } else {
            top_k_rows(rows.hidden + size_t(r0) * E, rows.n - r0, rows.pos0 + r0, stats);
        }
    }
    n_past_ = rows.pos0 + rows.n;
    if (!rows.complete) return;
    if (with_topk_ && waiting_.empty()) seed_from(first);
    set_size(stats, false);
}

int nanospec::waiting_rows() const { return head_ ? int(waiting_.size() / size_t(head_->n_embd())) : 0; }

double nanospec::seed_share() const { return head_ ? head_->top_ids_share() : 1.0; }

void nanospec::seed_waiting(int n, generation_stats& stats) {
    const int kept = waiting_rows();  // rows waiting_row0_ .. the prompt's last row
    if (kept == 0) return;
    const int skip = std::max(0, kept - n);
    top_k_rows(waiting_.data() + size_t(skip) * head_->n_embd(), kept - skip, waiting_row0_ + skip, stats);
    // All rows: the slot keeps their top-k, and S also gets the cached rows' before them. Only the last
    // ones: the slot still counts every waiting row as unseeded, so the next request with this prefix can
    // seed them all.
    if (skip == 0) waiting_.clear();
    seed_from(skip > 0 ? waiting_row0_ + skip : std::max(0, prompt_rows_ - kSeedRows));
    set_size(stats, false);
}

void nanospec::observe(const verify_outcome& v, std::vector<int32_t>* staged, generation_stats& stats) {
    // The target rows on the emitted path (0..k: the ones whose context was kept) and the emitted tokens
    // x_1..x_k, y (docs/ALGORITHMS.md section 3).
    const int n_rows = v.target_logits ? v.n_accepted + 1 : 0;
    scratch_.resize(size_t(n_rows) * k_);
    for (int r = 0; r < n_rows; ++r)
        top_ids(v.target_logits + size_t(r) * v.n_vocab, v.n_vocab, k_, &scratch_[size_t(r) * k_]);
    emitted_.assign(v.drafted, v.drafted + v.n_accepted);
    emitted_.push_back(v.next_token);
    if (staged)
        S_.stage_growth(scratch_.data(), n_rows, emitted_.data(), int64_t(emitted_.size()), v.drafted, v.gamma, *staged);
    else
        S_.grow(scratch_.data(), n_rows, emitted_.data(), int64_t(emitted_.size()), v.drafted, v.gamma);
    set_size(stats, staged != nullptr);
    // The rows committed are the top-k rows' next ones while every round gives them (not in an auto batch):
    // the slot keeps them too, so the next turn of a chat reuses the answer's rows instead of prefilling them.
    if (with_topk_ && n_rows > 0 && waiting_.empty() && topk_.size() == size_t(n_past_) * k_)
        topk_.insert(topk_.end(), scratch_.begin(), scratch_.end());
    n_past_ += v.n_accepted + 1;
}

int nanospec::copyable_rows(const nanospec& from, int n) const {
    if (deferred_ || from.deferred_ || !from.running_ || !from.with_topk_ || from.k_ != k_) return 0;
    return std::min({n, from.n_past_, int(from.topk_.size() / size_t(k_))});
}

void nanospec::copy_prefix(const nanospec& from, int n) {
    nanospec_prefix& kept = *kept_;
    const int rows = copyable_rows(from, n);
    kept.topk.assign(from.topk_.begin(), from.topk_.begin() + size_t(rows) * size_t(k_));
    kept.hidden.clear();
    kept.hidden_rows = 0;
}

void nanospec::end() {
    if (!running_) return;
    running_ = false;
    nanospec_prefix& kept = *kept_;
    kept.topk.clear();
    kept.hidden.clear();
    kept.hidden_rows = 0;
    if (!with_topk_) return;
    // topk_ holds the prompt's rows (and the emitted ones after them): at most those in the cache, and only
    // up to the rows whose top-k never ran; those keep their hidden states instead.
    const int E = head_->n_embd();
    const int n_waiting = waiting_rows();
    const size_t rows = std::min(topk_.size() / size_t(k_), size_t(n_past_));
    const size_t with_topk = n_waiting > 0 ? std::min(rows, size_t(waiting_row0_)) : rows;
    kept.topk.assign(topk_.begin(), topk_.begin() + with_topk * size_t(k_));
    if (n_waiting > 0 && size_t(waiting_row0_) <= rows) {
        kept.hidden_rows = int(std::min(size_t(n_waiting), rows - with_topk));
        kept.hidden.swap(waiting_);
        kept.hidden.resize(size_t(kept.hidden_rows) * size_t(E));
    }
    waiting_.clear();
}

}  // namespace specgen
