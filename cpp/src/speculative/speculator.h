// The one interface the engine speculates through (docs/ALGORITHMS.md sections 1-2). Per request:
//
//   begin()                   the request is admitted to the speculator's slot, before its prefill;
//   observe(prefill_rows)     after each prefill chunk, the last one saying that the prompt is in;
//   then per round:           propose() -> [the engine forwards and verifies] -> observe(verify_outcome);
//   end()                     it finished or was cancelled.
//
// The engine sees tokens, their proposals and how many target rows were already forwarded. Which drafter,
// draft vocabulary (NanoSpec / FR-Spec, speculative/nanospec.h) or SSD runs, and how long each draft
// is (adaptive gamma), is the speculator's business. A speculator gets what it needs of the target when it
// is built (speculation_target): the model, its KV cache and backend, the head service
// (speculative/target_head.h) and its slot's prefix state, which it may keep between requests.
// Implementations: the sequential speculator (any drafter, drafting on the engine thread:
// speculative/sequential.h), SSD (speculative/ssd/ssd.h: drafts round t+1 while the target verifies
// round t), auto (speculative/auto/auto_speculator.h: picks one of two sequential ones per round) and
// EAGLE-3 (speculative/eagle3.h: a draft head over the target layers' inputs the engine hands over).
//
// Control flows one way: engine -> speculator -> head service. Every call runs on the engine thread.
//
// Batched drafting (draft models: speculative/draft_batch.h): the factory owns one draft_batch that
// every slot's speculator drafts through. The engine hands it to propose() (step_context::drafts);
// a speculator built over it then joins it instead of drafting, and its proposal is complete once the
// engine has called drafts->run(), which drafts every joined sequence position by position in one draft
// forward each. Without step_context::drafts, propose() drafts alone and returns the proposal whole.
#pragma once
#include <algorithm>
#include <cstdint>
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
class target_head;
struct backend;
struct neural_weights;
struct eagle3_head;
class draft_batch;

// Per request, at begin(): what the speculator needs to sample like the target.
struct speculation_request {
    sampling_params sampling;
    uint64_t seed = 0;
    verify_method method = verify_method::block;
    int64_t max_tokens = -1;  // the request's token budget (-1: until EOS or the context is full)
    int n_cached = 0;         // prompt rows the slot's KV cache already held (prefix reuse): no prefill rows for them
};

// One sequence's place in the engine's batched step, passed to begin(), propose() and observe() (the
// engine keeps one per request). Draft lengths already follow the batch through propose()'s max_n
// (engine/draft_policy.h); auto also drops the drafters whose cost is one forward per sequence and
// would serialise the batch (docs/ALGORITHMS.md section 8).
struct step_context {
    // Engine -> speculator: the sequences decoding in this step, this one included (1: alone); at begin(),
    // the requests active with it.
    int n_sequences = 1;
    // Engine -> speculator, in propose(): the step's batched drafter (null: draft alone). A speculator
    // drafting through it joins, and the engine runs it after every sequence's propose().
    draft_batch* drafts = nullptr;
    // Speculator -> engine (set by begin() and observe()): the acceptance the batch policy should expect
    // of this sequence's next drafts, in [0, 1); < 0: the request's own counts (n_accepted / n_drafted).
    // auto drafts by n-gram in a batch, whose acceptance is not that of the self drafter's rounds the
    // request may have run alone.
    double expected_acceptance = -1;
};

// Prompt rows the target forwarded for the request, handed to observe() after each prefill chunk.
struct prefill_rows {
    int pos0 = 0;                   // the first row's position
    int n = 0;                      // rows (0: none, as when the slot's cache held the whole prompt)
    const float* hidden = nullptr;  // their output-normed hidden states, backend memory [n, n_embd]
    bool complete = false;          // the prompt's last row is in: the first propose() follows
    // The target layers' inputs the evaluator captures for an EAGLE-3 head (evaluator::capture_layers),
    // backend memory [n, n_layers_captured * n_embd]; null when none are captured.
    const float* features = nullptr;
};

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
    // The captured target layers' inputs (prefill_rows::features) of the rows [pending, x_1..x_g], backend
    // memory [gamma + 1, n_layers_captured * n_embd] (hand-over rows': the drafter's capture, proposal::features);
    // null when none are captured (or rows were handed over by a drafter that captured none).
    const float* features = nullptr;
};

// What a speculator keeps of its slot's committed rows between requests (NanoSpec: the prompt rows'
// top-k ids, and the hidden states of rows whose top-k never ran). The slot holds it (engine/slot.h);
// the engine never looks inside and only asks it how much of a cached prefix a new request may reuse.
class prefix_state {
public:
    virtual ~prefix_state() = default;
    // A request whose prompt shares its first n rows with the slot's cache (copied: with another slot's,
    // whose rows the engine would copy in), admitted with n_sequences - 1 others active: how many of those
    // rows it may reuse as they are (it prefills the rest, which lets the speculator see them).
    virtual int reusable_rows(int n, bool copied, int n_sequences) const = 0;
};

class speculator {
public:
    virtual ~speculator() = default;

    // A request starts, before its prefill: prompt = its history (the last token pending). Sets
    // stats.vocab_set_size.
    virtual void begin(const std::vector<int32_t>& prompt, const speculation_request& request, step_context& step,
                       generation_stats& stats) = 0;
    // Prompt rows the prefill forwarded (rows.complete: the prompt is in). Sets stats.vocab_set_size.
    virtual void observe(const prefill_rows& rows, generation_stats& stats) {}
    // The proposal for the round after `history` (its last token pending): at most max_n tokens
    // (max_n >= 0: the room left in the context, the token budget and the batch policy's cap), no more
    // than the current draft length, and none when fewer than draft_min. Adds draft time to stats.
    virtual void propose(const std::vector<int32_t>& history, int max_n, const step_context& step, rng& gen,
                         proposal& out, generation_stats& stats) = 0;
    // The round's verdict, before the engine commits it: vocabulary growth, draft length, SSD's
    // speculation cache. Also after a round the batch policy left without a draft (gamma 0). Sets
    // stats.vocab_set_size.
    virtual void observe(const verify_outcome& v, step_context& step, generation_stats& stats) = 0;
    // Rows of `history` a batched draft model has not forwarded yet besides the last (the rounds the
    // batch policy left without a draft, or the prompt after admission): its next first draft forward
    // carries them, and the policy prices them (engine/draft_policy.h). 0: none, or no draft model.
    virtual int draft_rows_behind(const std::vector<int32_t>& history) const { return 0; }
    // Prefix reuse across slots (engine/scheduler.cpp): the engine copies the first n committed rows of
    // the request running in another slot, whose speculator is `from` (built with the same parameters),
    // into this idle slot. copyable_rows(): how many of them this speculator can take up with their
    // share of what `from` holds (NanoSpec's top-k rows); 0 leaves the slot's prefix state to say
    // (prefix_state::reusable_rows with copied rows). copy_prefix(from, n, tokens): takes them up, tokens
    // being the new request's history (its first n are the rows copied), before begin().
    virtual int copyable_rows(const speculator& /*from*/, int /*n*/) const { return 0; }
    virtual void copy_prefix(const speculator& /*from*/, int /*n*/, const std::vector<int32_t>& /*tokens*/) {}
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
    int min() const { return min_; }
    int max() const { return max_; }

private:
    int max_, min_;
    bool adaptive_;
    int cap_ = 0;
};

// What a speculator gets of the target when it is built: one per slot.
struct speculation_target {
    const model& target;
    const tokenizer& tok;
    kv_cache& cache;    // the target's KV cache: the self drafter writes its slot; SSD hands rows over into it
    backend& be;        // the target's backend
    int seq = 0;        // the slot: its sequence of `cache`
    target_head* head = nullptr;                      // the head service (null: NanoSpec seeds S from the prompt ids only)
    std::unique_ptr<prefix_state>* prefix = nullptr;  // the slot's: a speculator that keeps one puts it there
    // Draft weights every slot's speculator shares (null: the speculator loads its own).
    std::shared_ptr<const neural_weights> draft;
    std::shared_ptr<const eagle3_head> eagle3;  // params.draft_head's head, shared the same way
    // A draft model's batched drafter, whose KV cache holds every slot's draft rows (sequence = seq):
    // the speculator drafts through it (null: a drafter of its own).
    draft_batch* batch = nullptr;
};

// The speculator params ask for: nullptr for plain decoding (no draft), SSD when params.ssd, auto for
// draft auto, the EAGLE-3 speculator for params.draft_head (speculative/eagle3.h), else the sequential
// speculator. SSD runs one sequence: slot 0 only (n_parallel = 1).
std::unique_ptr<speculator> make_speculator(const generator_params& params, const speculation_target& t);

// Builds the speculators of a generator's slots, loading what they share once: a draft model's weights
// and, for the sequential speculator over a draft model, the draft_batch all slots draft through (one
// KV cache, n_parallel sequences). SSD, auto and EAGLE-3 keep drafters of their own.
class speculator_factory {
public:
    speculator_factory(const generator_params& params, const model& target, const tokenizer& tok);
    ~speculator_factory();
    // The speculator of one slot (null: plain decoding); t.draft, t.eagle3 and t.batch are filled in.
    std::unique_ptr<speculator> make(speculation_target t);
    // The target layers whose inputs the target's evaluator must capture for the speculators
    // (evaluator::capture_layers; an EAGLE-3 head's target layers), empty for none.
    std::vector<int> captured_layers() const;
    // The batched drafter the engine hands to propose() (null: none; before the first make(), none yet).
    draft_batch* batch() const { return batch_.get(); }
    // Bytes a draft model's decode step reads over the target's (model::bytes_per_token), 0 without a
    // draft model: the batch policy's price of a draft row before it has measured one.
    double draft_size_ratio() const { return size_ratio_; }

private:
    generator_params params_;
    std::shared_ptr<const neural_weights> draft_;
    std::shared_ptr<const eagle3_head> eagle3_;
    std::unique_ptr<draft_batch> batch_;
    double size_ratio_ = 0;
};

}  // namespace specgen
