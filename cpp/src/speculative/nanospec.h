// NanoSpec's rules for its draft vocabulary S (docs/ALGORITHMS.md section 3), in one place for every
// speculator that drafts over a growing set (the sequential one, SSD, auto's self candidate):
//
//   seed:    at the prompt, S = the prompt ids, then the target's top-k ids at the last kSeedRows prompt
//            rows the prefill forwards, taken through the head service (speculative/target_head.h);
//   keep:    the slot's prefix state (speculator.h) keeps those rows' top-k, and the emitted rows' after
//            them, between requests, so a request that reuses the cached rows (prefix reuse: a chat's
//            next turn) seeds S as if it had forwarded them;
//   defer:   (auto) the top-k waits until a round first drafts with S, from the rows' hidden states kept
//            meanwhile (seed_waiting()), so it never delays the first token and a request that never
//            drafts with S never pays for it (docs/ALGORITHMS.md section 8.2); the slot keeps rows
//            whose top-k never ran as hidden states, so the next request with this prefix can still
//            seed from them;
//   grow:    after each verdict, S gains the target's top-k on the emitted path, the emitted and the
//            drafted ids (draft_vocab::grow), or stages them for an owner that may not touch S while
//            another thread drafts over it (SSD: draft_vocab::stage_growth).
//
// The draft_vocab is the mechanism (S, its gathered head rows); this class decides what goes into it.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/stats.h"
#include "speculative/speculator.h"

namespace specgen {

class draft_vocab;
class target_head;
class nanospec_prefix;

class nanospec {
public:
    // The last prompt rows whose top-k seeds S: the full 262k-row head over every prompt row would cost
    // more than the prefill's layers (docs/ALGORITHMS.md section 3).
    static constexpr int kSeedRows = 64;
    // The top-k of a prompt row whose top-k never ran (before the last kSeedRows rows): kept with the
    // slot's rows like the others, and skipped when a later request that reuses the row seeds S.
    static constexpr int32_t kNotComputed = -1;

    // S: a growing set (draft_vocab::grows()), owned by the caller. head: the target's head service (null:
    // S starts from the prompt ids alone). prefix: the slot's prefix state holder, where this puts its
    // own. deferred: the prompt's top-k waits for seed_waiting(), and a request may go without it.
    nanospec(draft_vocab& S, target_head* head, std::unique_ptr<prefix_state>* prefix, bool deferred);
    ~nanospec();

    // A request starts: S = its prompt ids; what the slot kept of its first n_cached rows is taken up.
    // Deferred, a request that joins others (n_sequences > 1) or whose cached rows the slot kept nothing
    // for goes without the prompt's top-k.
    void begin(const std::vector<int32_t>& prompt, int n_cached, int n_sequences, generation_stats& stats);
    // Prompt rows forwarded: their top-k now, or (deferred) their hidden states kept; once the prompt is
    // in, S gains the top-k of its last kSeedRows rows unless they wait.
    void observe(const prefill_rows& rows, generation_stats& stats);
    // Deferred: the prompt rows kept whose top-k has not run, and the head service's cost share per row.
    int waiting_rows() const;
    double seed_share() const;
    // Deferred: S gains the top-k of the last n waiting rows (all of them: n >= waiting_rows()) now.
    void seed_waiting(int n, generation_stats& stats);
    // A verdict's growth: into S now, or appended to *staged (not null) for draft_vocab::apply() later.
    void observe(const verify_outcome& v, std::vector<int32_t>* staged, generation_stats& stats);
    // The request ends: the slot's prefix state keeps what covers its committed prompt rows. Idempotent.
    void end();
    // Prefix reuse across slots: of the first n committed rows of `from`'s running request, those whose
    // top-k it holds (not deferred: a deferred state reuses copied rows as they are, prefix_state);
    // copy_prefix() makes them this slot's prefix state, as if its last request had left them.
    int copyable_rows(const nanospec& from, int n) const;
    void copy_prefix(const nanospec& from, int n);

private:
    void top_k_rows(const float* hidden, int n, int row0, generation_stats& stats);
    void seed_from(int first);  // S gains the top-k of prompt rows first..the last
    void set_size(generation_stats& stats, bool staged) const;

    draft_vocab& S_;
    target_head* head_;
    nanospec_prefix* kept_ = nullptr;  // the slot's prefix state (owned by the slot, or owned_)
    std::unique_ptr<prefix_state> owned_;
    bool deferred_;
    int k_;
    // This request (begin() .. end()).
    bool running_ = false;
    bool with_topk_ = false;          // it seeds S from the target's top-k
    int prompt_rows_ = 0;             // rows the prefill forwards: the prompt without its pending token
    int n_past_ = 0;                  // rows in the slot's cache: the prompt's, then each round's committed ones
    std::vector<int32_t> topk_;       // [rows, k] the target's top-k ids: the prompt's (never computed: kNotComputed), then the rounds' committed rows'
    std::vector<float> waiting_;      // [rows, n_embd] hidden states of prompt rows whose top-k waits
    int waiting_row0_ = 0;            // from this row on (contiguous)
    std::vector<int32_t> scratch_, emitted_;
};

}  // namespace specgen
