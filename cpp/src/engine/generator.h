// The generator: a loaded target model (plus the speculators of its slots) that serves requests.
//
// start() returns a request (engine/request.h: what readers see); the engine runs its sequence
// (engine/sequence.h: the round state). The generator's scheduler (engine/scheduler.h) decodes up to
// n_parallel of them together: one engine thread runs steps, each one batched target forward over
// every active sequence's rows; plain decoding is a round with gamma = 0, speculative decoding drafts
// up to gamma tokens per sequence and verifies them in the same forward (docs/ALGORITHMS.md sections
// 1-2 and 7). All speculation goes through one speculator per slot (speculative/speculator.h): the
// engine never knows which drafter, vocabulary or SSD runs.
//
// Threads: any thread may call start() and logits() and read or cancel any request; concurrent
// requests are batched, not serialised (scheduler.h states the queue rule).
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
#include "engine/loaded_target.h"
#include "engine/logprobs.h"
#include "engine/params.h"
#include "engine/request.h"
#include "engine/stats.h"
#include "engine/verify_trace.h"
#include "model/model.h"
#include "speculative/verify/verify.h"
#include "tokenizer/tokenizer.h"

namespace specgen {

class gguf_file;
class scheduler;
class target_head;

class generator {
public:
    explicit generator(const generator_params& params);
    ~generator();

    const generator_params& params() const { return params_; }
    const model& target() const { return *model_; }
    const tokenizer& tok() const { return *tokenizer_; }
    // The ids the head service ranks its top-k over (NanoSpec's prompt seed; empty: every id;
    // speculative/target_head.h).
    std::vector<int32_t> seed_ids() const;
    const gguf_file& file() const { return *file_; }
    int32_t n_ctx() const { return params_.n_ctx; }
    int32_t n_vocab() const { return model_->hp().n_vocab; }
    size_t kv_bytes() const { return cache_->bytes(); }
    size_t kv_bytes_per_sequence() const { return cache_->bytes_per_sequence(); }
    // What the load found worth telling the user without failing (a KV cache larger than the memory
    // available): the front-ends print these (Python: RuntimeWarning; CLI: stderr).
    const std::vector<std::string>& load_warnings() const { return load_warnings_; }
    int n_parallel() const { return params_.n_parallel; }
    int n_free_slots() const;   // slots no request holds now
    int n_waiting() const;      // requests queued for a slot

    // Logits of every position of `tokens` in a fresh context: [n, n_vocab] row-major, computed in
    // forward passes of batch_size tokens (results do not depend on it: batch invariance).
    std::vector<float> logits(const std::vector<int32_t>& tokens, int batch_size = 128);

    // The target's hidden states over `tokens` in a fresh context, as an EAGLE-3 head reads them
    // (docs/DESIGN.md section 4.1): `features` [n, layers.size() * n_embd] holds the residual stream
    // entering each listed layer (layer 0: the scaled embedding), captured by the same
    // evaluator::capture_layers the speculator's rows come from, so training and drafting see the
    // same numbers; `final_hidden` [n, n_embd] the output-normed rows the LM head reads. Throws
    // invalid_argument_error for no tokens, an id outside the vocabulary, no layers or a layer
    // outside [0, n_layer); context_overflow_error past n_ctx.
    struct hidden_states_result {
        std::vector<float> features, final_hidden;
    };
    hidden_states_result hidden_states(const std::vector<int32_t>& tokens, const std::vector<int>& layers,
                                       int batch_size = 128);

    // Submits a request; the engine prefills and decodes it (read it with request::step()). It
    // waits for a slot in the queue (engine/scheduler.h). Throws context_overflow_error when the
    // prompt does not fit, queue_full_error when every slot is busy and the queue is full.
    std::unique_ptr<request> start(const std::vector<int32_t>& prompt, const generate_params& params);

private:
    void warn_if_cache_exceeds_memory();
    // "the KV cache for N tokens x P sequences (types: size)", for the load's error and warning.
    std::string describe_cache() const;

    generator_params params_;
    std::shared_ptr<const gguf_file> file_;
    std::unique_ptr<model> model_;
    std::unique_ptr<tokenizer> tokenizer_;
    std::unique_ptr<backend> backend_;
    std::unique_ptr<evaluator> eval_;
    std::unique_ptr<kv_cache> cache_;
    verifier verifier_;
    std::unique_ptr<target_head> head_;  // the speculators' head service
    std::unique_ptr<verify_trace> trace_;  // $SPECGEN_VERIFY_TRACE, null when unset
    std::unique_ptr<loaded_target> target_;  // the parts above, lent to the engine
    std::vector<std::string> load_warnings_;
    std::shared_ptr<scheduler> sched_;  // last: its engine thread uses everything above
};

}  // namespace specgen
