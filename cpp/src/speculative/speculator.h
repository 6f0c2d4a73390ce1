// The one interface the engine speculates through (docs/ALGORITHMS.md sections 1-2): per request
// begin(), then per round propose() -> [the engine computes the target's rows and verifies] ->
// observe(), and end(). Implementations: the sequential speculator (any drafter, drafting on the
// caller's thread: speculative/sequential.cpp) and SSD (speculative/ssd/ssd.h: drafts round t+1
// while the target verifies round t). Each owns its draft vocabulary (NanoSpec / FR-Spec,
// speculative/draft_vocab.h) and its growth, and its draft length (adaptive gamma): the engine sees
// tokens, their proposals, and how many target rows were already forwarded.
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "engine/params.h"
#include "engine/stats.h"
#include "sampling/rng.h"
#include "sampling/sampling.h"
#include "speculative/proposal.h"
#include "speculative/verify/verify.h"

namespace specgen {

class model;
class tokenizer;
class kv_cache;
struct backend;

// What verification decided, handed to observe().
struct verify_outcome {
    const int32_t* drafted = nullptr;  // x_1..x_g  [gamma]
    int gamma = 0;
    int n_accepted = 0;                // k: x_1..x_k kept
    int32_t next_token = -1;           // y: correction (k < g) or bonus (k == g)
    // The target's raw logits over [pending, x_1..x_g]  [gamma + 1, n_vocab]; rows 0..k are on the
    // emitted path (NanoSpec's growth reads their top-k). nullptr: S grows by the emitted and drafted
    // tokens only this round (auto in a batch skips the per-row top-k pass over the vocabulary).
    const float* target_logits = nullptr;
    int32_t n_vocab = 0;
};

// Per request: what the speculator needs to sample like the target.
struct speculation_request {
    sampling_params sampling;
    uint64_t seed = 0;
    verify_method method = verify_method::block;
    // An optional prompt top-k that begin() went without (prompt_topk_optional): runs the head over
    // the last n (all: n >= n_seed_rows) kept prompt rows now and hands S their top-k through
    // add_prompt_topk(). Empty: none to run.
    std::function<void(int n)> seed_prompt_topk;
    int n_seed_rows = 0;       // the prompt rows kept for it
    double seed_share = 1;     // the share of the full head's rows it runs (its seed head's ids / n_vocab)
    int64_t max_tokens = -1;   // the request's token budget (-1: until EOS or the context is full)
};

class speculator {
public:
    virtual ~speculator() = default;

    // k > 0: begin() wants the target's top-k ids at every prompt row the prefill forwards (NanoSpec
    // seeds S from them; docs/ALGORITHMS.md section 3); 0: it does not.
    virtual int prompt_topk() const { return 0; }
    // How many of the LAST prompt rows the top-k is wanted for (the rest contribute their prompt ids
    // only, which S holds anyway): the full 262k-row head over every prompt row would cost more than
    // the prefill's layers (docs/ALGORITHMS.md section 3).
    static constexpr int kPromptTopkRows = 64;
    // true: the top-k only improves S, so the engine may leave it out (S then starts from the prompt
    // ids): for a request that joins a batch, where this speculator drafts without S (auto, see
    // set_batch_size), and for one whose reusable cached prefix has no top-k rows kept, where reusing
    // the rows saves a whole prefill. Otherwise the engine keeps the rows' hidden states and the
    // speculator runs the head over them when it first drafts with S (speculation_request::seed_prompt_topk).
    virtual bool prompt_topk_optional() const { return false; }
    // A request starts: prompt = its history (the last token pending); topk: [n_topk_rows, prompt_topk()]
    // ids, best first, of the last n_topk_rows (<= kPromptTopkRows) forwarded prompt rows. Sets stats.vocab_set_size.
    virtual void begin(const std::vector<int32_t>& prompt, const speculation_request& request, const int32_t* topk,
                       int64_t n_topk_rows, generation_stats& stats) = 0;
    // The prompt top-k begin() went without (optional top-k only), from seed_prompt_topk(): the seeding
    // of S waits until a round drafts with it, so it never delays the first token and a request that
    // never drafts with S never pays for it (docs/ALGORITHMS.md section 8.2). Same layout as begin()'s.
    virtual void add_prompt_topk(const int32_t* /*topk*/, int64_t /*n_topk_rows*/, generation_stats& /*stats*/) {}
    // The proposal for the round after `history` (its last token pending): at most max_n tokens
    // (max_n >= 0: the room left in the context and the token budget), no more than the current
    // draft length, and none when fewer than draft_min. Adds draft time to stats.
    virtual void propose(const std::vector<int32_t>& history, int max_n, rng& gen, proposal& out,
                         generation_stats& stats) = 0;
    // The round's verdict, before the engine commits it: vocabulary growth, draft length, SSD's
    // speculation cache. Sets stats.vocab_set_size.
    virtual void observe(const verify_outcome& v, generation_stats& stats) = 0;
    // Before a round's propose(): how many sequences decode in this step (1 alone). Draft lengths
    // already follow it through max_n (engine/draft_policy.h); auto also drops the drafters whose
    // cost is one forward per sequence and would serialise the batch (docs/ALGORITHMS.md section 8).
    virtual void set_batch_size(int n_sequences) {}
    // The acceptance the batch policy should expect of this sequence's next drafts, in [0, 1); < 0: the
    // request's own counts (n_accepted / n_drafted). auto drafts by n-gram in a batch, whose acceptance
    // is not that of the self drafter's rounds the request may have run alone.
    virtual double batch_acceptance() const { return -1.0; }
    // The request ends (finished or cancelled). Idempotent.
    virtual void end() {}
};

// The draft length gamma of the next round (params.draft_max, draft_min, draft_adaptive). The next
// round's gamma depends only on outcomes already emitted, so adapting it keeps the output
// distribution unchanged: halve to the accepted length + 1 on a rejection, double after a fully
// accepted round (up to draft_max).
class draft_length {
public:
    explicit draft_length(const generator_params& p) : max_(p.draft_max), min_(p.draft_min), adaptive_(p.draft_adaptive) {}
    void reset() { cap_ = max_; }
    int limit(int max_n) const { return std::max(0, std::min(cap_, max_n)); }
    int keep(int n) const { return n < min_ ? 0 : n; }  // draft_min: short drafts are not verified
    // The gamma after a round that verified `gamma` tokens and accepted n_accepted of them.
    int after(int gamma, int n_accepted) const {
        if (!adaptive_ || gamma <= 0) return cap_;
        return n_accepted == gamma ? std::min(max_, 2 * cap_) : std::max(1, n_accepted + 1);
    }
    void update(int gamma, int n_accepted) { cap_ = after(gamma, n_accepted); }
    int current() const { return cap_; }
    int max() const { return max_; }

private:
    int max_, min_;
    bool adaptive_;
    int cap_ = 0;
};

// The speculator params ask for: nullptr for plain decoding (no draft), SSD when params.ssd, else the
// sequential speculator over make_drafter(). target_cache: the target's KV cache (the self drafter
// writes it; SSD hands rows over into it when it is in host memory). be: the target's backend.
// seq: the sequence (slot) of target_cache the speculator's request runs in, one speculator per slot
// (SSD: slot 0 only, so n_parallel = 1).
std::unique_ptr<speculator> make_speculator(const generator_params& params, const model& target, const tokenizer& tok,
                                            kv_cache& target_cache, backend& be, int seq = 0);

}  // namespace specgen
