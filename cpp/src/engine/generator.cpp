#include "engine/generator.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <thread>

#include "common/error.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "gguf/gguf_reader.h"
#include "model/kv_cache.h"
#include "speculative/target_head.h"

namespace specgen {

namespace {
constexpr const char* kCacheAdvice = "lower n_ctx or n_parallel, or store it as f16 / q8_0";

std::string gib(size_t bytes) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f GiB", double(bytes) / double(1ull << 30));
    return text;
}

int default_threads() {
    unsigned hw = std::thread::hardware_concurrency();
    return int(std::max(1u, std::min(hw ? hw : 1u, 8u)));
}
}  // namespace

generator::generator(const generator_params& params) : params_(params), verifier_(1) {
    params_.validate();
    if (params_.n_threads == 0) params_.n_threads = default_threads();
    if (params_.ssd && params_.n_threads_draft == 0) {
        // Target and drafter run at the same time: split the threads rather than oversubscribe the
        // cores. With one thread in all the drafter gets none of its own: SSD then drafts on this
        // thread after each verdict (speculative/ssd/ssd.h), so no more threads run than asked.
        const int total = params_.n_threads;
        params_.n_threads_draft = total / 2;
        params_.n_threads = std::max(1, total - params_.n_threads_draft);
    }
    backend_ = make_backend(params_.device, params_.n_threads);  // first: an unusable device fails fast
    file_ = std::make_shared<gguf_file>(params_.model_path);
    model_ = std::make_unique<model>(file_);
    tokenizer_ = std::make_unique<tokenizer>(*file_);
    if (tokenizer_->n_vocab() != model_->hp().n_vocab)
        throw model_load_error("GGUF " + params_.model_path + ": tokenizer has " + std::to_string(tokenizer_->n_vocab()) +
                               " tokens but token_embd.weight has " + std::to_string(model_->hp().n_vocab) + " rows");
    eval_ = std::make_unique<evaluator>(*model_, *backend_);
    auto kv_ggml = [](kv_type t) { return kv_cache_type_from_name(kv_type_name(t)); };
    cache_ = std::make_unique<kv_cache>(model_->hp(), params_.n_ctx, params_.n_parallel, kv_ggml(params_.type_k),
                                        kv_ggml(params_.type_v));
    try {
        cache_->allocate(*backend_);  // now, so that a cache too large for the device fails at load
    } catch (const std::bad_alloc&) {
        throw invalid_argument_error(describe_cache() + " does not fit in memory; " + kCacheAdvice);
    }
    warn_if_cache_exceeds_memory();
    verifier_ = verifier(model_->hp().n_vocab);
    head_ = make_target_head(params_, *eval_, *backend_, *tokenizer_);
    trace_ = verify_trace::from_env();
    const char* check = std::getenv("SPECGEN_CHECK_REUSE");
    const bool check_reuse = check && *check && std::string(check) != "0";
    target_ = std::make_unique<loaded_target>(
        loaded_target{params_, *model_, *tokenizer_, *backend_, *eval_, *cache_, verifier_, *head_, check_reuse,
                      trace_.get()});
    sched_ = std::make_shared<scheduler>(*target_);  // builds one speculator per slot, starts the engine thread
}

generator::~generator() { sched_->shutdown(); }

void generator::warn_if_cache_exceeds_memory() {
    // The cache's pages become resident as sequences write rows (backend::alloc), so a cache the kernel
    // agreed to map may still be more than the machine holds: say so now rather than die at run time.
    const size_t available = backend_->host_memory() ? available_host_memory() : 0;
    if (available == 0 || cache_->bytes() <= available) return;
    load_warnings_.push_back(describe_cache() + " is more than the memory available now (" + gib(available) +
                             "): requests that fill it will run out of memory; " + kCacheAdvice);
}

std::string generator::describe_cache() const {
    return "the KV cache for " + std::to_string(params_.n_ctx) + " tokens x " + std::to_string(params_.n_parallel) +
           " sequences (" + kv_type_name(params_.type_k) + " keys, " + kv_type_name(params_.type_v) +
           " values: " + gib(cache_->bytes()) + ")";
}

std::vector<int32_t> generator::seed_ids() const { return head_->seed_ids(); }

int generator::n_free_slots() const { return sched_->n_free_slots(); }
int generator::n_waiting() const { return sched_->n_waiting(); }

std::vector<float> generator::logits(const std::vector<int32_t>& tokens, int batch_size) {
    if (batch_size < 1) throw invalid_argument_error("batch_size must be >= 1");
    if (tokens.empty()) throw invalid_argument_error("logits() needs at least one token");
    if (int64_t(tokens.size()) > params_.n_ctx)
        throw context_overflow_error(std::to_string(tokens.size()) + " tokens exceed n_ctx = " + std::to_string(params_.n_ctx));
    for (int32_t t : tokens)
        if (t < 0 || t >= n_vocab()) throw invalid_argument_error("token id " + std::to_string(t) + " out of range [0, " + std::to_string(n_vocab()) + ")");
    const int n = int(tokens.size());
    // A cache of its own (f32, as the slots' default): the slots and their cached prefixes stay as
    // they are. The evaluator is shared with the engine thread: between its steps only.
    kv_cache fresh(model_->hp(), n, 1, cache_->type_k(), cache_->type_v());
    std::lock_guard<std::mutex> step(sched_->step_mutex());
    fresh.allocate(*backend_);
    std::vector<float> out(size_t(n) * n_vocab());
    for (int i = 0; i < n; i += batch_size) {
        const int m = std::min(batch_size, n - i);
        eval_->forward(fresh, tokens.data() + i, m, i, model_->hp().n_layer);
        eval_->logits(eval_->hidden(), m, out.data() + size_t(i) * n_vocab());
    }
    return out;
}

generator::hidden_states_result generator::hidden_states(const std::vector<int32_t>& tokens,
                                                         const std::vector<int>& layers, int batch_size) {
    if (batch_size < 1) throw invalid_argument_error("batch_size must be >= 1");
    if (tokens.empty()) throw invalid_argument_error("hidden_states() needs at least one token");
    if (layers.empty()) throw invalid_argument_error("hidden_states() needs at least one layer");
    const int n_layer = model_->hp().n_layer;
    for (int il : layers)
        if (il < 0 || il >= n_layer)
            throw invalid_argument_error("layer " + std::to_string(il) + " is outside the target's layers [0, " +
                                         std::to_string(n_layer) + ")");
    if (int64_t(tokens.size()) > params_.n_ctx)
        throw context_overflow_error(std::to_string(tokens.size()) + " tokens exceed n_ctx = " + std::to_string(params_.n_ctx));
    for (int32_t t : tokens)
        if (t < 0 || t >= n_vocab()) throw invalid_argument_error("token id " + std::to_string(t) + " out of range [0, " + std::to_string(n_vocab()) + ")");
    const int n = int(tokens.size());
    const size_t E = size_t(model_->hp().n_embd), width = layers.size() * E;
    kv_cache fresh(model_->hp(), n, 1, cache_->type_k(), cache_->type_v());
    // The engine's evaluator, between its steps (as logits()): its capture list is the speculators'
    // (an EAGLE-3 head's layers), so it is put back before the lock is released.
    std::lock_guard<std::mutex> step(sched_->step_mutex());
    fresh.allocate(*backend_);
    const std::vector<int> engine_capture = eval_->captured_layers();
    hidden_states_result out;
    out.features.resize(size_t(n) * width);
    out.final_hidden.resize(size_t(n) * E);
    try {
        eval_->capture_layers(layers);
        for (int i = 0; i < n; i += batch_size) {
            const int m = std::min(batch_size, n - i);
            eval_->forward(fresh, tokens.data() + i, m, i, n_layer);
            backend_->download(out.features.data() + size_t(i) * width, eval_->features(), size_t(m) * width * sizeof(float));
            backend_->download(out.final_hidden.data() + size_t(i) * E, eval_->hidden(), size_t(m) * E * sizeof(float));
        }
    } catch (...) {
        eval_->capture_layers(engine_capture);
        throw;
    }
    eval_->capture_layers(engine_capture);
    return out;
}

std::unique_ptr<request> generator::start(const std::vector<int32_t>& prompt, const generate_params& params) {
    params.validate();
    auto s = std::make_unique<sequence>(*target_, prompt, params);  // checks the prompt
    auto r = std::make_unique<request>(sched_, *s);
    sched_->submit(r.get(), std::move(s));
    return r;
}

}  // namespace specgen
