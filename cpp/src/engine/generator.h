// The generator: a loaded target model (plus an optional drafter) that runs requests.
//
// A request is a `generation`: prefill once, then step() repeatedly. Each step is one target call:
// plain decoding verifies nothing and emits one token; speculative decoding drafts up to gamma
// tokens, verifies them in ONE batched forward of gamma+1 positions and emits the accepted prefix
// plus one corrected/bonus token (docs/ALGORITHMS.md sections 1-2). The same code path runs both: plain
// decoding is a round with gamma = 0. All speculation goes through one speculator
// (speculative/speculator.h): the engine never knows which drafter, vocabulary or SSD runs.
//
// State invariant between steps: the target KV cache holds the first n_past tokens of history();
// the last history token (`pending`) is sampled but not yet forwarded.
//
// Threads (until concurrent requests are batched): a generator runs one generation at a time, and
// any thread may call it. A generation is started either `exclusive` (a call that runs it to the
// end: Python's generate() without stream, the C API) or not (a stream, driven step by step).
// start() and logits() wait while a step (or prefill, or logits()) of the generator runs in another
// thread, and while the live generation is an unfinished exclusive one of ANOTHER thread; then the
// live generation, if still open, is superseded: it ends with finish_reason "cancelled". So blocking
// calls from several threads run one after another, a new call supersedes an open stream after its
// current step, and a thread that starts a new generation while its own exclusive one is open
// supersedes it (it cannot be running it, so waiting would wait forever). No lock is held across
// steps, so an abandoned stream never blocks anyone.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "engine/logprobs.h"
#include "engine/params.h"
#include "engine/stats.h"
#include "engine/text_stream.h"
#include "model/model.h"
#include "speculative/speculator.h"
#include "speculative/verify/verify.h"
#include "tokenizer/tokenizer.h"

namespace specgen {

class gguf_file;
class generation;

// Who runs on a generator now (the thread rule above). Shared with its generations, so a generation
// outliving its generator (C++ callers) still finds the lock.
struct run_guard {
    std::mutex mu;
    std::condition_variable cv;
    generation* live = nullptr;       // the generation the speculator and cache belong to
    bool live_exclusive = false;
    std::thread::id live_owner;       // the thread that started it
    bool running = false;             // a step, prefill or logits() is in progress
};

class generator {
public:
    explicit generator(const generator_params& params);
    ~generator();

    const generator_params& params() const { return params_; }
    const model& target() const { return *model_; }
    const tokenizer& tok() const { return *tokenizer_; }
    const gguf_file& file() const { return *file_; }
    int32_t n_ctx() const { return params_.n_ctx; }
    int32_t n_vocab() const { return model_->hp().n_vocab; }
    size_t kv_bytes() const { return cache_->bytes(); }

    // Logits of every position of `tokens` in a fresh context: [n, n_vocab] row-major, computed in
    // forward passes of batch_size tokens (results do not depend on it: batch invariance).
    std::vector<float> logits(const std::vector<int32_t>& tokens, int batch_size = 128);

    // Starts a request (runs the prefill). One generation is live per generator: see the thread rule
    // at the top for when this waits and when it supersedes the live one. exclusive: the caller runs
    // the generation to the end (or cancels it); false for a stream. Throws context_overflow_error
    // when the prompt does not fit.
    std::unique_ptr<generation> start(const std::vector<int32_t>& prompt, const generate_params& params,
                                      bool exclusive = true);

private:
    friend class generation;
    generator_params params_;
    std::shared_ptr<const gguf_file> file_;
    std::unique_ptr<model> model_;
    std::unique_ptr<tokenizer> tokenizer_;
    std::unique_ptr<backend> backend_;
    std::unique_ptr<evaluator> eval_;
    std::unique_ptr<kv_cache> cache_;
    std::unique_ptr<speculator> spec_;  // null: plain decoding
    verifier verifier_;
    std::shared_ptr<run_guard> guard_ = std::make_shared<run_guard>();
    bool check_reuse_ = false;  // $SPECGEN_CHECK_REUSE: recompute every shortcut row (generation::check_reused_rows)

    // Waits (lock held) until this thread may run on the generator, then supersedes the live
    // generation and marks the generator running. Returns with the lock held.
    void acquire(std::unique_lock<std::mutex>& lock);
};

// Marks the generator not running when it goes out of scope (and wakes whoever waits).
class run_scope {
public:
    explicit run_scope(run_guard& g) : g_(g) {}
    ~run_scope();
    run_scope(const run_scope&) = delete;
    run_scope& operator=(const run_scope&) = delete;

private:
    run_guard& g_;
};

enum class finish_reason { none, stop, length, eos, cancelled };
const char* finish_reason_name(finish_reason r);

class generation {
public:
    generation(generator& g, const std::vector<int32_t>& prompt, const generate_params& params);
    ~generation();
    generation(const generation&) = delete;
    generation& operator=(const generation&) = delete;

    bool done() const { return reason_.load() != finish_reason::none; }
    finish_reason reason() const { return reason_.load(); }
    // Runs one target call and returns the text it made safe to show (whole UTF-8 characters, stop
    // strings withheld). Returns "" once done().
    std::string step();
    // Ends the generation early (finish_reason "cancelled" unless already done). Waits for a step of
    // it running in another thread.
    void cancel();

    const std::vector<int32_t>& tokens() const { return generated_; }  // emitted tokens, EOS excluded
    const std::string& text() const { return stream_.text(); }
    const generation_stats& stats() const { return stats_; }
    // One entry per tokens() entry when generate_params::logprobs >= 0, else empty.
    const std::vector<token_logprob>& logprobs() const { return logprobs_; }

private:
    friend class generator;
    void prefill();
    void run_step();
    // The target's logits at [pending, x_1..x_g] into logits_ ([g+1, n_vocab]): one batched forward
    // of the rows the proposal did not already forward, then the head over all g+1.
    void target_rows(int gamma);
    void check_reused_rows(int gamma);  // throws error unless a plain forward gives the same logits
    // p_1..p_{g+1}: the target's processors over each row, in the context it was computed in.
    void process_rows(int gamma);
    void count_round(int gamma, const verify_result& vr);  // stats of the round
    // Emits x_1..x_k, y; the KV cache then holds pending and x_1..x_k, y is the new pending token.
    void commit(const verify_result& vr);
    int emit(int32_t token);  // returns 1 if generation continues
    std::string finish(finish_reason r);
    // Ends this generation (not done yet: "cancelled") and detaches it from its generator. guard lock held.
    void detach();

    generator* gen_;
    std::shared_ptr<run_guard> guard_;
    generate_params params_;
    std::vector<int32_t> history_;     // prompt + emitted tokens (the last one pending)
    std::vector<int32_t> generated_;
    int32_t n_past_ = 0;
    text_stream stream_;
    std::string out_;                  // text produced during the current step
    std::atomic<finish_reason> reason_{finish_reason::none};  // read by any thread (done())
    generation_stats stats_;
    rng rng_;
    logits_processor processor_;
    verify_method method_;
    proposal proposal_;
    std::vector<token_dist> p_;
    std::vector<int32_t> batch_;
    std::vector<float> logits_;
    std::vector<float> hidden_;        // [g+1, n_embd] the all-layers shortcut's rows
    std::vector<float> check_logits_;  // check_reused_rows' scratch
    std::vector<int32_t> topk_;        // [prompt rows, k] the target's top-k ids the speculator asked for
    std::vector<verify_row_stats> row_stats_;
    logprob_recorder logprob_recorder_;
    std::vector<token_logprob> logprobs_;
};

}  // namespace specgen
