// One request on a generator (class `generation`): its prompt, sampler state (rng, logits
// processor), verification rule, emitted tokens, text stream and stats. The scheduler's engine thread
// (engine/scheduler.h) runs it: prefill in chunks, then rounds of propose -> [one batched forward of
// every sequence's rows] -> process -> verify -> observe -> commit (docs/ALGORITHMS.md sections 1-2,
// 7). Plain decoding is the round with gamma = 0.
//
// Two sides. The engine side (everything the rounds touch) belongs to the engine thread while the
// request is admitted. The reader side (step(), tokens(), text(), stats(), logprobs(), done(),
// cancel()) may be called from any thread: it reads copies the engine publishes after each step
// under the scheduler's lock.
//
// State invariant between the engine's steps: the slot's KV rows hold the first n_past tokens of
// history(); the last history token (`pending`) is sampled but not yet forwarded.
#pragma once
#include <atomic>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "engine/logprobs.h"
#include "engine/params.h"
#include "engine/stats.h"
#include "engine/text_stream.h"
#include "sampling/rng.h"
#include "sampling/sampling.h"
#include "speculative/proposal.h"
#include "speculative/verify/verify.h"

namespace specgen {

class generator;
class scheduler;
class batch;
struct slot;

enum class finish_reason { none, stop, length, eos, cancelled };
const char* finish_reason_name(finish_reason r);

// A reader's timeout that means "wait for ever": negative, infinite, or a year or more (a deadline
// that far past steady_clock's now overflows its duration type).
inline bool waits_forever(double timeout_s) { return timeout_s < 0 || timeout_s >= 365.0 * 24 * 3600; }

class generation {
public:
    // Checks the prompt (throws invalid_argument_error, context_overflow_error); the generator
    // submits it (generator::start).
    generation(generator& g, const std::vector<int32_t>& prompt, const generate_params& params);
    // Cancels it if still running and waits until the engine has let go of it.
    ~generation();
    generation(const generation&) = delete;
    generation& operator=(const generation&) = delete;

    // ---- reader side (any thread) ----
    // Ended (finished or cancelled) and every piece of text taken by step().
    bool done() const;
    finish_reason reason() const;
    // Waits until the engine made progress on this request (or it ended) and returns the text made
    // safe to show since the last call (whole UTF-8 characters, stop strings withheld); "" once
    // done(). Rethrows an error the engine met while running it.
    std::string step();
    // As step(), waiting at most timeout_s seconds (waits_forever(): forever, 0: not at all);
    // *ready = false when nothing happened in time.
    std::string next(double timeout_s, bool* ready);
    // Ends it early (finish_reason "cancelled" unless already ended); text not yet taken is dropped.
    // Returns once the engine has released its slot (wait = false: at once; the engine ends it before
    // its next step, and the destructor waits).
    void cancel(bool wait = true);

    std::vector<int32_t> tokens() const;  // emitted tokens, EOS excluded
    std::string text() const;
    generation_stats stats() const;
    // Entries [start, ...) : one per tokens() entry when generate_params::logprobs >= 0.
    std::vector<token_logprob> logprobs(size_t start = 0) const;
    uint64_t seed() const { return params_.seed; }

private:
    friend class scheduler;

    // ---- engine side (the engine thread, scheduler.cpp) ----
    int prompt_rows() const { return int(history_.size()) - 1; }  // rows the prefill forwards
    bool prefilling() const { return n_past_ < prompt_rows(); }
    void admit(slot& s, int n_cached, int topk_k);   // rows 0..n_cached-1 already in the slot
    int add_prefill(batch& b, int max_rows);         // the next chunk; returns its rows
    // After forward_batch: the chunk's rows are in the cache; `hidden` = the chunk's hidden rows.
    void prefill_done_rows(int m, const float* hidden, std::vector<float>& logits_scratch);
    // The optional prompt top-k (speculator.h), once the speculator first drafts with S: the head over
    // the last n_rows kept rows (all of them: n_rows >= their count), then add_prompt_topk(). Nothing
    // when it ran already.
    void seed_prompt_topk(std::vector<float>& logits_scratch, int n_rows);
    // The target's top-k ids of n consecutive prompt rows from row0 on, from their hidden states.
    void topk_rows(const float* hidden, int n, int row0, std::vector<float>& logits_scratch);
    void propose(int cap, int batch_size);  // cap: the batch policy's longest draft; batch_size: the step's sequences
    // Adds [pending, x_1..x_g] minus the rows already forwarded; returns the rows it added.
    int add_round_rows(batch& b);
    int round_rows() const { return gamma_ + 1; }    // rows of the head: g + 1
    // Copies the round's g+1 hidden rows (hand-over rows, then the batch's) into out [g+1, n_embd].
    void gather_hidden(const float* batch_hidden, float* out) const;
    // The round given the target's logits over its g+1 rows (valid during the call).
    void finish_round(const float* logits);
    int emit(int32_t token);
    void finish(finish_reason r);
    void check_reused_rows(const float* logits);

    generator* gen_;
    std::shared_ptr<scheduler> sched_;
    generate_params params_;
    std::vector<int32_t> history_;     // prompt + emitted tokens (the last one pending)
    std::vector<int32_t> generated_;
    int32_t n_past_ = 0;
    slot* slot_ = nullptr;
    text_stream stream_;
    std::string out_;                  // text produced during the current step
    finish_reason engine_reason_ = finish_reason::none;
    generation_stats stats_;
    rng rng_;
    logits_processor processor_;
    verify_method method_;
    proposal proposal_;
    int gamma_ = 0;
    int row0_ = -1;                    // the round's (or chunk's) first row in the step's batch
    int topk_k_ = 0;
    std::vector<int32_t> topk_;        // [prompt rows, k] the target's top-k ids for the speculator
    std::vector<float> seed_hidden_;   // [rows, n_embd] hidden states of the prompt rows whose top-k waits
    int seed_row0_ = 0;                // for the speculator (an optional top-k), from this row on
    std::vector<token_dist> p_;
    std::vector<int32_t> batch_;
    std::vector<float> check_logits_;
    std::vector<verify_row_stats> row_stats_;
    logprob_recorder logprob_recorder_;
    std::vector<token_logprob> logprobs_;
    double t_admit_ = 0;

    // ---- published (scheduler lock) ----
    std::vector<int32_t> pub_tokens_;
    std::vector<token_logprob> pub_logprobs_;
    std::string pub_text_, unread_;
    generation_stats pub_stats_;
    std::atomic<finish_reason> reason_{finish_reason::none};
    bool released_ = false;            // the engine let go of it (no slot, not queued)
    bool cancel_requested_ = false;
    uint64_t n_published_ = 0, n_seen_ = 0;
    std::exception_ptr error_;
};

}  // namespace specgen
