// NanoSpec's in-context vocabulary S and the draft head gathered over it (docs/ALGORITHMS.md section 3),
// and FR-Spec's static frequency subset, its baseline, on the same mechanism.
//
// S is a set of token ids kept in insertion order, with the LM-head rows of those ids copied into one
// contiguous buffer W_S in the head's own quantized format:
//   W_S: [|S|, n_embd], row k = the head's row of id ids()[k] (row ids()[k], or the row whose id it is
//   for a head with a reduced vocabulary), ggml_row_size(type, n_embd) bytes each.
// Rows are appended as ids arrive (a gather is only ever of the new ids) into a buffer reserved for
// the full capacity up front, so head() stays valid and never moves while S grows.
// Draft logits over S are logits[t, k] = h[t] . W_S[k] (then the model's final softcap), computed by
// the same matmul kernel as the full head: they equal the full head's logits at ids()[k] bit for bit.
//
// Growth (kind nanospec):
//   prefill:       S = unique(prompt ids U target top-k at the last prompt positions), the top-k taken
//                  over ids ranked from the vocabulary where the generator has them (make_seed_vocab);
//   verification:  S grows by the target's argmax and top-k on the emitted path, the drafted ids and
//                  the emitted (accepted + corrected/bonus) tokens, which join the context;
//   k = top_k(), the generator's `nanospec_topk` (16 by default; the paper takes 3): on short free-text
//   prompts a larger k covers more of what the target goes on to pick (tools/bench_nanospec.py measures it).
//   never shrinks within a request; reset() at the start of each request.
// Full S: once |S| == capacity, further ids are not added (first come, first kept). Nothing in S is
// ever dropped or thresholded, so a set never changes under a proposal that was sampled from it.
// Ids arrive in priority order (prompt, then rank-1 ids, then ranks 2..k), so the ids a full set
// turns away are the least useful ones. Losslessness never depends on S: the proposal q_S is zero
// outside S and the verifier's residual reaches every other token.
//
// Kind frspec: a static set (the first N ids of a frequency table), filled once; reset() keeps it.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.h"

namespace specgen {

class draft_vocab {
public:
    enum class kind { nanospec, frspec };

    // head: the drafter's LM head [n_rows, n_embd] (kept by reference: the model must outlive this).
    // capacity: most ids S may hold (>= 1). final_softcap: the model's, 0 for none. top_k: ids taken
    // from each target row at prefill and verification (>= 1). row_ids: the token id of each head row,
    // distinct (an EAGLE-3 head's reduced vocabulary, its d2t); empty: row r is id r. Ids without a row
    // stay out of S: the head cannot propose them.
    draft_vocab(kind k, const weight_view& head, int32_t capacity, float final_softcap, int top_k = 3,
                const std::vector<int32_t>& row_ids = {});

    // The target offers ids up to n_target_vocab (its top-k, its tokens); those this head has no row
    // for (a draft with fewer ids than its target) are skipped instead of refused.
    void set_target_vocab(int32_t n_target_vocab) { n_target_vocab_ = n_target_vocab; }
    kind mode() const { return kind_; }
    bool grows() const { return kind_ == kind::nanospec; }
    int32_t capacity() const { return capacity_; }
    int top_k() const { return top_k_; }
    int32_t size() const { return int32_t(ids_.size()); }
    bool full() const { return size() >= capacity_; }
    bool contains(int32_t id) const { return id >= 0 && id < n_vocab_ && member_[size_t(id)] != 0; }
    // The ids of S in insertion order: row k of head() is the head's row of id ids()[k].  [size()]
    const int32_t* ids() const { return ids_.data(); }

    // Empties S (nanospec; a new request). A frspec set is static and stays as it is.
    void reset();
    // Adds one id (and gathers its row) unless it is already in S or S is full. Returns 1 if added.
    // Throws invalid_argument_error for an id outside [0, n_vocab).
    int add(int32_t id);
    int add(const int32_t* ids, int64_t n);

    // Prefill: prompt ids, then the top-k of each computed prompt row, rank by rank.
    //   topk: [n_rows, top_k()] ids, best first (from top_ids); negative ids (a row whose top-k never
    //   ran: nanospec::kNotComputed) are skipped.
    void seed(const int32_t* prompt, int64_t n_prompt, const int32_t* topk, int64_t n_rows);
    // After a verification that emitted `emitted` ([n_emitted]: x_1..x_k, y) from `drafted`
    // ([n_drafted]: x_1..x_g); topk: [n_rows, top_k()] ids of the target rows on the emitted path.
    void grow(const int32_t* topk, int64_t n_rows, const int32_t* emitted, int64_t n_emitted,
              const int32_t* drafted, int64_t n_drafted);
    // The ids grow() offers to add(), in its order (duplicates included), appended to `out`: the
    // argmax of each row, the emitted ids, the drafted ids, then ranks 2..k row by row.  topk: [n_rows, k]
    static void growth_order(const int32_t* topk, int k, int64_t n_rows, const int32_t* emitted, int64_t n_emitted,
                             const int32_t* drafted, int64_t n_drafted, std::vector<int32_t>& out);

    // Deferred growth, for an owner that may not touch S while another thread drafts over it (the
    // SSD speculator, speculative/ssd/ssd.h). stage_growth() decides by the same rule as grow()
    // which ids S will gain and appends them to `queue` (in order); apply(queue) later adds them
    // and gives the S that grow() would have given. stage_growth() reads and writes only the staged
    // membership, never S itself, so it may run while another thread reads S (ids(), head(), logits()).
    // staged_size(): |S| once every staged id is applied. reset() and add() re-sync the staged view.
    void stage_growth(const int32_t* topk, int64_t n_rows, const int32_t* emitted, int64_t n_emitted,
                      const int32_t* drafted, int64_t n_drafted, std::vector<int32_t>& queue);
    void apply(const std::vector<int32_t>& queue) { add(queue.data(), int64_t(queue.size())); }
    int32_t staged_size() const { return staged_size_; }

    // W_S as a weight matrix [size(), n_embd] in the head's type (valid until the next add()).
    weight_view head() const;
    // logits[t, k] = softcap(h[t] . W_S[k])   hidden: [n, n_embd], out: [n, size()]
    void logits(backend& be, const float* hidden, int n, float* out) const;

private:
    kind kind_;
    weight_view full_;
    std::vector<int32_t> row_of_;  // [n_vocab] the head row of each id, -1: none (empty: row = id)
    // W_S in the rows16 layout too (quant/rows16.h), kept current row by row, for a backend that
    // computes the full head packed: S's logits then equal the full head's bit for bit.
    std::unique_ptr<weight_repack> packed_;
    int32_t n_vocab_;             // ids [0, n_vocab_) may have a head row
    int32_t n_target_vocab_ = 0;  // set_target_vocab()
    int32_t capacity_;
    float softcap_;
    int top_k_;
    size_t row_bytes_;
    std::vector<int32_t> ids_;
    std::vector<uint8_t> member_;  // [n_vocab] 1 when the id is in S
    std::vector<uint8_t> rows_;    // [capacity, row_bytes] gathered head rows, first size() used
    uint64_t version_;             // head()'s weight_view::version, renewed whenever rows_ change
    std::vector<int32_t> order_;   // grow()'s scratch
    std::vector<uint8_t> staged_;  // [n_vocab] membership once the staged ids are applied
    int32_t staged_size_ = 0;
    bool admits(const std::vector<uint8_t>& member, int32_t size, int32_t id) const;  // the set rule
};

struct generator_params;
class model;
// The draft head's token set over m's LM head: NanoSpec's in-context set (params.nanospec, empty
// until seeded), FR-Spec's static one (params.frspec > 0, filled from params.frspec_path), or null
// (full head). n_target_vocab: the target's ids (set_target_vocab). Each speculator owns one; what goes
// into a growing one is speculative/nanospec.h's business.
std::unique_ptr<draft_vocab> make_draft_vocab(const generator_params& params, const model& m, int32_t n_target_vocab);

class tokenizer;
// The first n ids of tok's vocabulary in an estimate of their frequency from the vocabulary alone (no
// table): end-of-generation ids, one-byte tokens, then the rest by id.
std::vector<int32_t> ranked_by_vocabulary(const tokenizer& tok, int32_t n);
// NanoSpec's prompt seed (docs/ALGORITHMS.md section 3): the target's top-k at the prompt rows is taken
// over the kSeedIds first ids of ranked_by_vocabulary(), a sixteenth of Gemma 3's head (measured on the
// preset prompts: prefill with NanoSpec 0.40x -> 0.91x plain, decode unchanged). Null (the full head
// seeds S) when no speculator seeds S or the vocabulary is too small for a seed head to save much.
constexpr int32_t kSeedIds = 16384;
std::unique_ptr<draft_vocab> make_seed_vocab(const generator_params& params, const model& m, const tokenizer& tok);

// Ids of the k largest logits, best first (ties: lowest id).  logits: [n_vocab], out: [k], 1 <= k <= n_vocab
void top_ids(const float* logits, int64_t n_vocab, int k, int32_t* out);

}  // namespace specgen
