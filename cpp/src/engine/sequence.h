// A request's sequence: the round state the engine thread owns while it runs the request (its reader
// handle is engine/request.h). Its prompt, sampler state (rng, logits processor), verification rule,
// emitted tokens, text stream and stats. The scheduler (engine/scheduler.h) runs it: prefill in chunks,
// then rounds of propose -> [one batched forward of every sequence's rows] -> process -> verify ->
// observe -> commit (docs/ALGORITHMS.md sections 1-2, 7). Plain decoding is the round with gamma = 0.
// Speculation goes through its slot's speculator (speculative/speculator.h) only.
//
// State invariant between the engine's steps: the slot's KV rows hold the first n_past() tokens of
// history(); the last history token (`pending`) is sampled but not yet forwarded.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/loaded_target.h"
#include "engine/logprobs.h"
#include "engine/params.h"
#include "engine/request.h"
#include "engine/stats.h"
#include "engine/text_stream.h"
#include "sampling/rng.h"
#include "sampling/sampling.h"
#include "speculative/proposal.h"
#include "speculative/speculator.h"
#include "speculative/verify/verify.h"

namespace specgen {

class batch;
class draft_batch;
struct slot;

class sequence {
public:
    // Checks the prompt (throws invalid_argument_error, context_overflow_error) and prepends BOS when the
    // tokenizer asks for it and params.add_bos is set.
    sequence(const loaded_target& target, const std::vector<int32_t>& prompt, const generate_params& params);
    sequence(const sequence&) = delete;
    sequence& operator=(const sequence&) = delete;

    // The reader handle it publishes to (scheduler::submit()).
    void attach(request* r) { request_ = r; }
    request* handle() const { return request_; }

    const std::vector<int32_t>& history() const { return history_; }  // prompt + emitted tokens, the last pending
    int n_past() const { return n_past_; }
    int prompt_rows() const { return int(history_.size()) - 1; }      // rows the prefill forwards
    bool prefilling() const { return n_past_ < prompt_rows(); }
    slot* held_slot() const { return slot_; }
    finish_reason reason() const { return reason_; }                  // none while it runs
    bool ended() const { return reason_ != finish_reason::none; }
    const generation_stats& stats() const { return stats_; }
    uint64_t seed() const { return params_.seed; }
    // What the batch policy (engine/draft_policy.h) expects its drafts to accept (step_context).
    double expected_acceptance() const { return step_.expected_acceptance; }
    // History rows the slot's batched draft model lacks before its next draft (speculator.h).
    int draft_rows_behind() const;
    // Tokens it may still emit: its max_tokens budget or the context's room, whichever ends first.
    int64_t tokens_left() const;

    // ---- admission and prefill ----
    // Takes slot s, whose KV rows 0..n_cached-1 hold its prompt's first rows, alongside n_sequences - 1
    // other active requests; the slot's speculator begins.
    void admit(slot& s, int n_cached, int n_sequences);
    int add_prefill(batch& b, int max_rows);  // the next chunk; returns its rows
    // After the forward: the chunk's m rows are in the cache, their hidden states in batch_hidden at the
    // chunk's rows of the batch.
    void prefill_done(int m, const float* batch_hidden);

    // ---- a round ----
    // cap: the batch policy's longest draft; n_sequences: the step's decoding sequences; drafts: the
    // step's batched drafter (null: none), whose run() completes the proposal before add_round_rows().
    void propose(int cap, int n_sequences, draft_batch* drafts = nullptr);
    // Adds [pending, x_1..x_g] minus the rows already forwarded; returns the rows it added.
    int add_round_rows(batch& b);
    int round_rows() const { return gamma_ + 1; }  // rows of the head: g + 1
    int round_row0() const { return row0_; }       // the first row it added to the batch (-1: none)
    // Copies the round's g+1 hidden rows (hand-over rows, then the batch's) into out [g+1, n_embd].
    void gather_hidden(const float* batch_hidden, float* out) const;
    // The round given the target's logits over its g+1 rows (valid during the call).
    void finish_round(const float* logits);
    void add_verify_seconds(double s) { stats_.verify_seconds += s; }
    void add_decode_seconds(double s) { stats_.decode_seconds += s; }

    // Ends it with r (the first reason stays) and flushes the text the stream held back.
    void finish(finish_reason r);
    // Leaves its slot: the speculator's request ends. Returns the slot (null: it held none).
    slot* leave_slot();

    // ---- what the reader handle publishes ----
    const std::vector<int32_t>& generated() const { return generated_; }  // EOS excluded
    const std::vector<token_logprob>& logprobs() const { return logprobs_; }
    // The text made since drop_text() (the reader handle appends it, then drops it).
    const std::string& new_text() const { return out_; }
    void drop_text() { out_.clear(); }
    std::string text() const { return stream_.text(); }

private:
    int emit(int32_t token);
    // The captured target-layer inputs (evaluator::features) of batch row `row` of this step, or null.
    const float* features_at(int row) const;
    // The captured inputs of the round's g+1 rows (hand-over rows' from the drafter, then the batch's), or null.
    const float* round_features();
    void check_reused_rows(const float* logits);

    const loaded_target& target_;
    request* request_ = nullptr;
    generate_params params_;
    std::vector<int32_t> history_;
    std::vector<int32_t> generated_;
    int32_t n_past_ = 0;
    slot* slot_ = nullptr;
    text_stream stream_;
    std::string out_;                  // text produced since drop_text()
    finish_reason reason_ = finish_reason::none;
    generation_stats stats_;
    rng rng_;
    logits_processor processor_;
    verify_method method_;
    step_context step_;
    proposal proposal_;
    int gamma_ = 0;
    int row0_ = -1;                    // the round's (or chunk's) first row in the step's batch
    std::vector<token_dist> p_;
    std::vector<int32_t> batch_;
    std::vector<float> check_logits_;
    std::vector<float> features_;      // round_features()
    std::vector<verify_row_stats> row_stats_;
    logprob_recorder logprob_recorder_;
    std::vector<token_logprob> logprobs_;
    double t_admit_ = 0;
};

}  // namespace specgen
