#include "speculative/draft_vocab.h"

#include <algorithm>
#include <cstring>

#include "backend/vec_math.h"
#include "common/error.h"
#include "engine/params.h"
#include "model/model.h"
#include "quant/rows16.h"
#include "speculative/frspec_table.h"
#include "tokenizer/tokenizer.h"

namespace specgen {

draft_vocab::draft_vocab(kind k, const weight_view& head, int32_t capacity, float final_softcap, int top_k,
                         const std::vector<int32_t>& row_ids)
    : kind_(k), full_(head), n_vocab_(int32_t(head.n_rows)), capacity_(capacity), softcap_(final_softcap),
      top_k_(top_k), row_bytes_(head.row_bytes()) {
    if (capacity < 1) throw invalid_argument_error("nanospec capacity must be >= 1, got " + std::to_string(capacity));
    if (!row_ids.empty()) {
        if (int64_t(row_ids.size()) != head.n_rows)
            throw invalid_argument_error("draft vocabulary: " + std::to_string(row_ids.size()) + " row ids for a head of " +
                                         std::to_string(head.n_rows) + " rows");
        n_vocab_ = 1 + *std::max_element(row_ids.begin(), row_ids.end());
        row_of_.assign(size_t(n_vocab_), -1);
        for (size_t r = 0; r < row_ids.size(); ++r) {
            const int32_t id = row_ids[r];
            if (id < 0 || row_of_[size_t(id)] >= 0)
                throw invalid_argument_error("draft vocabulary: row id " + std::to_string(id) + " negative or repeated");
            row_of_[size_t(id)] = int32_t(r);
        }
    }
    if (top_k < 1 || top_k > n_vocab_)
        throw invalid_argument_error("nanospec top-k must be in [1, n_vocab], got " + std::to_string(top_k));
    if (capacity_ > head.n_rows) capacity_ = int32_t(head.n_rows);
    ids_.reserve(size_t(capacity_));
    member_.assign(size_t(n_vocab_), 0);
    rows_.resize(size_t(capacity_) * row_bytes_);  // reserved once: head() never moves
    version_ = next_weight_version();
    staged_.assign(size_t(n_vocab_), 0);
    if (full_.repack && rows16_has_layout(full_.type)) {
        packed_ = std::make_unique<weight_repack>();
        packed_->allocate(rows16_bytes(full_.type, capacity_, full_.n_cols));
        packed_->mark_filled();  // add() packs each row: no backend packs this slot
    }
}

bool draft_vocab::admits(const std::vector<uint8_t>& member, int32_t size, int32_t id) const {
    if (id < 0 || id >= std::max(n_vocab_, n_target_vocab_))
        throw invalid_argument_error("nanospec: token id " + std::to_string(id) + " out of range [0, " +
                                     std::to_string(std::max(n_vocab_, n_target_vocab_)) + ")");
    // A draft with fewer ids than its target (model/vocab_compat.h), or a head with a reduced vocabulary,
    // has no head row for some of the target's ids: it cannot propose them, so they stay out of S.
    if (id >= n_vocab_ || (!row_of_.empty() && row_of_[size_t(id)] < 0)) return false;
    return !member[size_t(id)] && size < capacity_;  // new, and S not full: first come, first kept
}

void draft_vocab::reset() {
    if (kind_ == kind::frspec) return;
    for (int32_t id : ids_) member_[size_t(id)] = 0;
    ids_.clear();
    version_ = next_weight_version();
    if (packed_) packed_->n_rows = 0;
    std::fill(staged_.begin(), staged_.end(), uint8_t(0));
    staged_size_ = 0;
}

int draft_vocab::add(int32_t id) {
    if (!admits(member_, size(), id)) return 0;
    // Gather: the head's row, bytes as stored (same quantized format, no requantization).
    const size_t row = row_of_.empty() ? size_t(id) : size_t(row_of_[size_t(id)]);
    std::memcpy(rows_.data() + ids_.size() * row_bytes_, static_cast<const uint8_t*>(full_.data) + row * row_bytes_, row_bytes_);
    if (packed_) rows16_pack_row(full_.type, rows_.data() + ids_.size() * row_bytes_, full_.n_cols, packed_->data.get(),
                                 int64_t(ids_.size()));
    member_[size_t(id)] = 1;
    ids_.push_back(id);
    version_ = next_weight_version();
    if (packed_) packed_->n_rows = int64_t(ids_.size());
    if (!staged_[size_t(id)]) {  // added directly (seed, a static set): the staged view includes it
        staged_[size_t(id)] = 1;
        staged_size_ += 1;
    }
    return 1;
}

int draft_vocab::add(const int32_t* ids, int64_t n) {
    int added = 0;
    for (int64_t i = 0; i < n; ++i) added += add(ids[i]);
    return added;
}

void draft_vocab::seed(const int32_t* prompt, int64_t n_prompt, const int32_t* topk, int64_t n_rows) {
    add(prompt, n_prompt);
    for (int rank = 0; rank < top_k_; ++rank)
        for (int64_t r = 0; r < n_rows; ++r)
            if (const int32_t id = topk[r * top_k_ + rank]; id >= 0) add(id);
}

void draft_vocab::growth_order(const int32_t* topk, int k, int64_t n_rows, const int32_t* emitted, int64_t n_emitted,
                                  const int32_t* drafted, int64_t n_drafted, std::vector<int32_t>& out) {
    for (int64_t r = 0; r < n_rows; ++r) out.push_back(topk[r * k]);  // the target argmax
    out.insert(out.end(), emitted, emitted + n_emitted);
    out.insert(out.end(), drafted, drafted + n_drafted);
    for (int rank = 1; rank < k; ++rank)
        for (int64_t r = 0; r < n_rows; ++r) out.push_back(topk[r * k + rank]);
}

void draft_vocab::grow(const int32_t* topk, int64_t n_rows, const int32_t* emitted, int64_t n_emitted,
                          const int32_t* drafted, int64_t n_drafted) {
    order_.clear();
    growth_order(topk, top_k_, n_rows, emitted, n_emitted, drafted, n_drafted, order_);
    add(order_.data(), int64_t(order_.size()));
}

void draft_vocab::stage_growth(const int32_t* topk, int64_t n_rows, const int32_t* emitted, int64_t n_emitted,
                               const int32_t* drafted, int64_t n_drafted, std::vector<int32_t>& queue) {
    order_.clear();
    growth_order(topk, top_k_, n_rows, emitted, n_emitted, drafted, n_drafted, order_);
    for (int32_t id : order_) {
        if (!admits(staged_, staged_size_, id)) continue;
        staged_[size_t(id)] = 1;
        staged_size_ += 1;
        queue.push_back(id);
    }
}

weight_view draft_vocab::head() const {
    weight_view w = full_;
    w.n_rows = int64_t(ids_.size());
    w.data = rows_.data();
    w.repack = packed_.get();  // never the full head's: that slot holds all n_vocab rows
    w.version = version_;
    return w;
}

void draft_vocab::logits(backend& be, const float* hidden, int n, float* out) const {
    if (ids_.empty()) throw invalid_argument_error("nanospec: the draft vocabulary is empty");
    be.matmul(head(), hidden, n, out);
    if (softcap_ > 0) vec::softcap_row(out, int64_t(n) * size(), softcap_);  // as evaluator::logits
}

void top_ids(const float* logits, int64_t n_vocab, int k, int32_t* out) {
    if (k < 1 || k > n_vocab) throw invalid_argument_error("top_ids: k = " + std::to_string(k) + " out of [1, n_vocab]");
    std::vector<float> values(static_cast<size_t>(k));  // one allocation per scan of n_vocab logits
    vec::top_k(logits, n_vocab, k, values.data(), out);
}

std::unique_ptr<draft_vocab> make_draft_vocab(const generator_params& params, const model& m, int32_t n_target_vocab) {
    const float softcap = m.hp().final_softcap;
    if (params.nanospec_on()) {
        auto v = std::make_unique<draft_vocab>(draft_vocab::kind::nanospec, m.output(), params.nanospec_capacity, softcap,
                                               params.nanospec_topk);
        v->set_target_vocab(n_target_vocab);
        return v;
    }
    if (params.frspec > 0) {
        const std::vector<int32_t> ids = read_frspec_table(params.frspec_path, m.hp().n_vocab, params.frspec);
        auto v = std::make_unique<draft_vocab>(draft_vocab::kind::frspec, m.output(), params.frspec, softcap);
        v->add(ids.data(), int64_t(ids.size()));
        return v;
    }
    return nullptr;
}

std::vector<int32_t> ranked_by_vocabulary(const tokenizer& tok, int32_t n) {
    // BPE and SentencePiece vocabularies number their tokens in the order they were learnt, the most
    // frequent pieces first, but may list the single characters last (Gemma 3: ASCII at 236743 and
    // up). So: the end-of-generation ids, every token of one byte, then the others by id; control,
    // unused and unknown tokens never. Over the preset prompts the top-16 over Gemma 3's first 16384
    // keeps 0.895 of each prompt row's full top-16, the 16384 most frequent of FR-Spec's table 0.882.
    const int32_t n_vocab = tok.n_vocab();
    std::vector<int32_t> ids;
    std::vector<uint8_t> taken(size_t(n_vocab), 0);
    auto take = [&](int32_t id) {
        if (int32_t(ids.size()) < n && !taken[size_t(id)]) ids.push_back(id), taken[size_t(id)] = 1;
    };
    auto text = [&](int32_t id) {
        const token_type t = tok.type(id);
        return t == token_type::normal || t == token_type::user_defined || t == token_type::byte;
    };
    for (int32_t id : tok.eog_ids())
        if (id >= 0 && id < n_vocab) take(id);
    for (int32_t id = 0; id < n_vocab; ++id)
        if (text(id) && tok.token_bytes(id).size() == 1) take(id);
    for (int32_t id = 0; id < n_vocab; ++id)
        if (text(id)) take(id);
    return ids;
}

std::unique_ptr<draft_vocab> make_seed_vocab(const generator_params& params, const model& m, const tokenizer& tok) {
    if (!params.nanospec_on() && params.draft_type != draft_kind::automatic) return nullptr;
    const std::vector<int32_t> ids = ranked_by_vocabulary(tok, kSeedIds);
    // Too few ids to rank a top-k from, or too many to save much over the full head (a small vocabulary).
    if (int32_t(ids.size()) < params.nanospec_topk || int64_t(ids.size()) * 2 > m.hp().n_vocab) return nullptr;
    auto v = std::make_unique<draft_vocab>(draft_vocab::kind::frspec, m.output(), int32_t(ids.size()), m.hp().final_softcap);
    v->add(ids.data(), int64_t(ids.size()));
    return v;
}

}  // namespace specgen
