// The generator: a loaded target model (plus an optional drafter) that runs requests.
//
// A request is a `generation`: prefill once, then step() repeatedly. Each step is one target call:
// plain decoding verifies nothing and emits one token; speculative decoding drafts up to gamma
// tokens, verifies them in ONE batched forward of gamma+1 positions and emits the accepted prefix
// plus one corrected/bonus token (ALGORITHMS.md sections 1-2). The same code path runs both: plain
// decoding is a round with gamma = 0.
//
// State invariant between steps: the target KV cache holds the first n_past tokens of history();
// the last history token (`pending`) is sampled but not yet forwarded.
#pragma once
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "engine/logprobs.h"
#include "engine/params.h"
#include "engine/stats.h"
#include "engine/text_stream.h"
#include "model/model.h"
#include "spec/drafter.h"
#include "spec/verify.h"
#include "tokenizer/tokenizer.h"

namespace specgen {

class gguf_file;
class generation;
class ssd_speculator;

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

    // Starts a request (runs the prefill). Only one generation may be live per generator: starting
    // a new one ends the previous one. Throws context_overflow_error when the prompt does not fit.
    std::unique_ptr<generation> start(const std::vector<int32_t>& prompt, const generate_params& params);

private:
    friend class generation;
    generator_params params_;
    std::shared_ptr<const gguf_file> file_;
    std::unique_ptr<model> model_;
    std::unique_ptr<tokenizer> tokenizer_;
    std::unique_ptr<backend> backend_;
    std::unique_ptr<evaluator> eval_;
    std::unique_ptr<kv_cache> cache_;
    std::unique_ptr<drafter> drafter_;
    std::unique_ptr<ssd_speculator> ssd_;  // params.ssd: drafts concurrently (spec/ssd.h); drafter_ is null
    verifier verifier_;
    generation* live_ = nullptr;
    bool check_reuse_ = false;  // $SPECGEN_CHECK_REUSE: recompute every shortcut row (generation::check_reused_rows)
};

enum class finish_reason { none, stop, length, eos, cancelled };
const char* finish_reason_name(finish_reason r);

class generation {
public:
    generation(generator& g, const std::vector<int32_t>& prompt, const generate_params& params);
    ~generation();
    generation(const generation&) = delete;
    generation& operator=(const generation&) = delete;

    bool done() const { return reason_ != finish_reason::none; }
    finish_reason reason() const { return reason_; }
    // Runs one target call and returns the text it made safe to show (whole UTF-8 characters, stop
    // strings withheld). Returns "" once done().
    std::string step();
    // Ends the generation early (finish_reason "cancelled" unless already done).
    void cancel();

    const std::vector<int32_t>& tokens() const { return generated_; }  // emitted tokens, EOS excluded
    const std::string& text() const { return stream_.text(); }
    const generation_stats& stats() const { return stats_; }
    // One entry per tokens() entry when generate_params::logprobs >= 0, else empty.
    const std::vector<token_logprob>& logprobs() const { return logprobs_; }

private:
    friend class generator;
    void prefill();
    // The target's logits at [pending, x_1..x_g] into logits_ ([g+1, n_vocab]): one batched forward,
    // or, when the drafter's hidden states are the target's own, only the head over them.
    void target_logits(int gamma);
    void check_reused_rows(int gamma);  // throws error unless a plain forward gives the same logits
    // After verification: NanoSpec's set grows by the target's top-k on the emitted path, the emitted
    // and the drafted tokens (the drafter's set, or the SSD speculator's: queued there, spec/ssd.h);
    // stats_.vocab_set_size follows it.
    void grow_vocab(int gamma, const verify_result& vr);
    int emit(int32_t token);  // returns 1 if generation continues
    verify_method method() const;
    std::string finish(finish_reason r);

    generator* gen_;
    generate_params params_;
    std::vector<int32_t> history_;     // prompt + emitted tokens (the last one pending)
    std::vector<int32_t> generated_;
    int32_t n_past_ = 0;
    int32_t draft_cap_ = 0;            // gamma for the next round (adaptive; see generator_params)
    text_stream stream_;
    std::string out_;                  // text produced during the current step
    finish_reason reason_ = finish_reason::none;
    generation_stats stats_;
    rng rng_;
    logits_processor processor_;
    draft_proposal proposal_;
    std::vector<token_dist> p_;
    std::vector<int32_t> batch_;
    std::vector<float> logits_;
    std::vector<float> hidden_;        // [g+1, n_embd] the all-layers shortcut's rows
    std::vector<float> check_logits_;  // check_reused_rows' scratch
    std::vector<int32_t> topk_;        // [rows, k] target top-k ids for NanoSpec's set
    int params_topk() const { return gen_->params_.nanospec_topk; }
    std::vector<int32_t> emitted_;     // x_1..x_k, y of the current round
    std::vector<verify_row_stats> row_stats_;
    logprob_recorder logprob_recorder_;
    std::vector<token_logprob> logprobs_;
};

}  // namespace specgen
