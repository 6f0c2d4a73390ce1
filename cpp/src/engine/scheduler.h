// The scheduler: continuous batching of a generator's requests (docs/DESIGN.md section 9).
//
// n_parallel slots (engine/slot.h) share one model. One engine thread, started with the generator,
// runs steps while requests are active: between steps it ends cancelled requests (their slot is
// free at once) and admits waiting ones into free slots (the slot whose cached tokens share the
// longest prefix with the prompt, or a copy of a busy slot's prefix); each step every decoding
// sequence proposes its draft (length from the batch-aware policy, docs/ALGORITHMS.md section 7),
// then ONE evaluator::forward_batch runs all sequences' rows -- each decoding sequence's pending
// token and drafts (rows a hand-over already forwarded excluded) plus chunks of prefills in the
// rows left -- then one head pass over the decoding rows, and each sequence verifies and commits its
// own rows. Kernels are batch-invariant, so a sequence's tokens do not depend on its neighbours.
//
// Requests come as two objects (engine/request.h): the sequence, which the scheduler owns from
// submit() to its release and runs on the engine thread, and the reader handle, into which it
// publishes each step's results under its lock.
//
// Threads: submit(), cancel() and the readers of a request may be called from any thread; they
// block on the scheduler's lock and condition variables only (the bindings release the GIL). A full
// waiting queue (max_queued requests beyond the free slots) refuses a request with queue_full_error.
// Every request, streamed or not, waits its turn: one only ends when it finishes or its own caller
// cancels it. The engine never waits for a reader, so a reader that waits for a second request of
// the same generator (a generate() inside a stream's loop) does not deadlock: the first one runs on.
#pragma once
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/draft_policy.h"
#include "engine/loaded_target.h"
#include "engine/slot.h"
#include "model/batch.h"
#include "speculative/speculator.h"

namespace specgen {

class request;
class sequence;

class scheduler {
public:
    // Builds one speculator per slot (speculator_factory) and starts the engine thread. `target`
    // outlives the engine thread (shutdown()).
    explicit scheduler(const loaded_target& target);
    ~scheduler();

    // Queues s with its reader handle r (admitted between steps). Throws queue_full_error (r is then
    // released and s dropped).
    void submit(request* r, std::unique_ptr<sequence> s);
    // Asks the engine to end r and (wait) waits until it has released r.
    void cancel(request* r, bool wait = true);
    // Ends every request ("cancelled") and stops the engine thread (the generator is going away).
    void shutdown();

    // Held by the engine thread during a step: whoever else uses the evaluator takes it.
    std::mutex& step_mutex() { return step_mu_; }
    int n_slots() const { return int(slots_.size()); }
    int n_free_slots() const;
    int n_waiting() const;

    // Reader side of a request (request.cpp).
    std::mutex& mu() const { return mu_; }
    std::condition_variable& readers() { return readers_cv_; }

private:
    void loop();
    void end_cancelled();   // mu_ held
    void admit_waiting();   // mu_ held
    void pick_slot(sequence* s);
    void run_step(const std::vector<sequence*>& active);
    void publish(const std::vector<sequence*>& active, std::exception_ptr err);  // mu_ held
    void release(sequence* s);  // mu_ held; s is gone after it

    const loaded_target& target_;
    speculator_factory speculators_;   // before the slots: their speculators share what it loaded
    std::vector<slot> slots_;
    mutable std::mutex mu_;
    std::condition_variable engine_cv_, readers_cv_;
    std::deque<std::unique_ptr<sequence>> waiting_;
    std::vector<std::unique_ptr<sequence>> active_;  // admitted, in admission order
    bool stop_ = false;
    int64_t n_released_ = 0;  // the clock of slot::last_used
    std::thread thread_;
    std::thread::id engine_id_;
    std::mutex step_mu_;

    draft_policy policy_;
    // The step's scratch.
    batch batch_;
    std::vector<float> hidden_, logits_;
    std::vector<int> caps_;
    std::vector<int> rows_behind_;  // per decoding sequence: rows its draft model must forward before drafting
};

}  // namespace specgen
