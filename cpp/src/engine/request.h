// One request on a generator, as its readers see it (C: specgen_request, Python: Request): the tokens,
// text, stats, logprobs and finish reason the engine has published so far. Any thread may read,
// wait on or cancel it. The engine's side of the request, the round state only the engine thread
// touches, is its sequence (engine/sequence.h); after each step the scheduler publishes what the
// sequence added into the request under the scheduler's lock (publish()), and when the engine lets
// go of it, the final state (release()).
#pragma once
#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "engine/logprobs.h"
#include "engine/stats.h"

namespace specgen {

class scheduler;
class sequence;

enum class finish_reason { none, stop, length, eos, cancelled };
const char* finish_reason_name(finish_reason r);

// A reader's timeout that means "wait for ever": negative, infinite, or a year or more (a deadline
// that far past steady_clock's now overflows its duration type).
inline bool waits_forever(double timeout_s) { return timeout_s < 0 || timeout_s >= 365.0 * 24 * 3600; }

class request {
public:
    // The handle of `s` (generator::start() submits both).
    request(std::shared_ptr<scheduler> sched, const sequence& s);
    // Cancels it if still running and waits until the engine has let go of it.
    ~request();
    request(const request&) = delete;
    request& operator=(const request&) = delete;

    // ---- readers (any thread) ----
    // Ended (finished or cancelled) and every piece of text taken by step().
    bool done() const;
    finish_reason reason() const { return reason_.load(); }
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
    uint64_t seed() const { return seed_; }

    // ---- the scheduler (its lock held) ----
    // What the step added to s: tokens, logprobs, text (then dropped from s), stats.
    void publish(sequence& s);
    // The engine let go of it: the final text and stats of s, its finish reason ("cancelled" when none).
    void release(const sequence& s);
    // Never queued (the queue was full or the generator shutting down): nothing to let go of.
    void refuse();
    // Ended while waiting in the queue: never ran.
    void release_unqueued();
    // The engine met an error running it: step() rethrows it.
    void fail(std::exception_ptr e) { error_ = std::move(e); }
    bool released() const { return released_; }
    bool cancel_requested() const { return cancel_requested_; }
    void request_cancel() { cancel_requested_ = true; }
    void drop_unread() { unread_.clear(); }

private:
    std::shared_ptr<scheduler> sched_;
    uint64_t seed_;
    std::vector<int32_t> tokens_;
    std::vector<token_logprob> logprobs_;
    std::string text_, unread_;
    generation_stats stats_;
    std::atomic<finish_reason> reason_{finish_reason::none};
    bool released_ = false;            // the engine let go of it (no slot, not queued)
    bool cancel_requested_ = false;
    uint64_t n_published_ = 0, n_seen_ = 0;
    std::exception_ptr error_;
};

}  // namespace specgen
