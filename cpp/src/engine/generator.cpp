#include "engine/generator.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "common/error.h"
#include "gguf/gguf_reader.h"
#include "speculative/draft_vocab.h"

namespace specgen {

namespace {
using clock_type = std::chrono::steady_clock;
double seconds_since(clock_type::time_point t0) {
    return std::chrono::duration<double>(clock_type::now() - t0).count();
}
constexpr int kVocabHeadChunk = 16;  // prompt rows per full-head pass when seeding NanoSpec's set ([16, n_vocab] floats)

int default_threads() {
    unsigned hw = std::thread::hardware_concurrency();
    return int(std::max(1u, std::min(hw ? hw : 1u, 8u)));
}
}  // namespace

const char* finish_reason_name(finish_reason r) {
    switch (r) {
        case finish_reason::stop: return "stop";
        case finish_reason::length: return "length";
        case finish_reason::eos: return "eos";
        case finish_reason::cancelled: return "cancelled";
        default: return "";
    }
}

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
    cache_ = std::make_unique<kv_cache>(model_->hp(), params_.n_ctx);
    cache_->allocate(*backend_);  // now, so that a cache too large for the device fails at load
    verifier_ = verifier(model_->hp().n_vocab);
    const char* check = std::getenv("SPECGEN_CHECK_REUSE");
    check_reuse_ = check && *check && std::string(check) != "0";
    spec_ = make_speculator(params_, *model_, *tokenizer_, *cache_, *backend_);
}

generator::~generator() {
    std::unique_lock<std::mutex> lock(guard_->mu);
    guard_->cv.wait(lock, [&] { return !guard_->running; });
    if (guard_->live) guard_->live->detach();
}

run_scope::~run_scope() {
    {
        std::lock_guard<std::mutex> lock(g_.mu);
        g_.running = false;
    }
    g_.cv.notify_all();
}

void generator::acquire(std::unique_lock<std::mutex>& lock) {
    run_guard& g = *guard_;
    const std::thread::id me = std::this_thread::get_id();
    g.cv.wait(lock, [&] {
        if (g.running) return false;
        return !(g.live && g.live_exclusive && !g.live->done() && g.live_owner != me);
    });
    if (g.live) g.live->detach();  // superseded
    g.running = true;
}

std::vector<float> generator::logits(const std::vector<int32_t>& tokens, int batch_size) {
    if (batch_size < 1) throw invalid_argument_error("batch_size must be >= 1");
    if (tokens.empty()) throw invalid_argument_error("logits() needs at least one token");
    if (int64_t(tokens.size()) > params_.n_ctx)
        throw context_overflow_error(std::to_string(tokens.size()) + " tokens exceed n_ctx = " + std::to_string(params_.n_ctx));
    for (int32_t t : tokens)
        if (t < 0 || t >= n_vocab()) throw invalid_argument_error("token id " + std::to_string(t) + " out of range [0, " + std::to_string(n_vocab()) + ")");
    {
        std::unique_lock<std::mutex> lock(guard_->mu);
        acquire(lock);
    }
    run_scope running(*guard_);
    const int n = int(tokens.size());
    std::vector<float> out(size_t(n) * n_vocab());
    for (int i = 0; i < n; i += batch_size) {
        const int m = std::min(batch_size, n - i);
        eval_->forward(*cache_, tokens.data() + i, m, i, model_->hp().n_layer);
        eval_->logits(eval_->hidden(), m, out.data() + size_t(i) * n_vocab());
    }
    return out;
}

std::unique_ptr<generation> generator::start(const std::vector<int32_t>& prompt, const generate_params& params,
                                             bool exclusive) {
    params.validate();
    auto g = std::make_unique<generation>(*this, prompt, params);  // checks the prompt; touches no shared state
    {
        std::unique_lock<std::mutex> lock(guard_->mu);
        acquire(lock);
        guard_->live = g.get();
        guard_->live_exclusive = exclusive;
        guard_->live_owner = std::this_thread::get_id();
    }
    {
        run_scope running(*guard_);  // ends before g can be destroyed by an exception below
        g->prefill();
    }
    return g;
}

generation::generation(generator& g, const std::vector<int32_t>& prompt, const generate_params& params)
    : gen_(&g), guard_(g.guard_), params_(params), history_(prompt), stream_(params.stop), rng_(params.seed),
      method_(g.params().verify == verify_mode::block ? verify_method::block : verify_method::token) {
    const tokenizer& tok = g.tok();
    if (params_.add_bos && tok.add_bos() && tok.bos_id() >= 0 && (history_.empty() || history_[0] != tok.bos_id()))
        history_.insert(history_.begin(), tok.bos_id());
    if (history_.empty()) throw invalid_argument_error("empty prompt (and the model adds no BOS token)");
    for (int32_t t : history_)
        if (t < 0 || t >= g.n_vocab())
            throw invalid_argument_error("prompt token id " + std::to_string(t) + " out of range [0, " + std::to_string(g.n_vocab()) + ")");
    if (int64_t(history_.size()) > g.n_ctx())
        throw context_overflow_error("prompt of " + std::to_string(history_.size()) + " tokens does not fit into n_ctx = " +
                                     std::to_string(g.n_ctx()) + "; use a larger n_ctx or a shorter prompt");
    stats_.n_prompt_tokens = int64_t(history_.size());
}

generation::~generation() {
    std::lock_guard<std::mutex> lock(guard_->mu);
    if (guard_->live == this) detach();
}

void generation::detach() {
    if (gen_ && guard_->live == this) {
        if (gen_->spec_) gen_->spec_->end();  // joins SSD's drafter thread
        guard_->live = nullptr;
    }
    finish_reason none = finish_reason::none;
    reason_.compare_exchange_strong(none, finish_reason::cancelled);
    gen_ = nullptr;
    guard_->cv.notify_all();
}

void generation::prefill() {
    auto t0 = clock_type::now();
    generator& g = *gen_;
    const int n = int(history_.size()) - 1;  // the last prompt token is forwarded by the first step
    const int n_layer = g.target().hp().n_layer;
    // The speculator's draft vocabulary may start from the target's top-k at the prompt rows.
    const int k = g.spec_ ? g.spec_->prompt_topk() : 0;
    const int first = std::max(0, n - speculator::kPromptTopkRows);  // the rows whose top-k S gets
    if (k > 0) topk_.resize(size_t(n - first) * k);
    for (int i = 0; i < n; i += evaluator::kChunk) {
        const int m = std::min(evaluator::kChunk, n - i);
        g.eval_->forward(*g.cache_, history_.data() + i, m, i, n_layer);
        if (k > 0 && i + m > first) {
            auto t_head = clock_type::now();
            const int n_vocab = g.n_vocab(), E = g.target().hp().n_embd;
            logits_.resize(size_t(std::min(kVocabHeadChunk, m)) * n_vocab);
            for (int r = std::max(0, first - i); r < m; r += kVocabHeadChunk) {
                const int c = std::min(kVocabHeadChunk, m - r);
                g.eval_->logits(g.eval_->hidden() + size_t(r) * E, c, logits_.data());
                for (int j = 0; j < c; ++j)
                    top_ids(logits_.data() + size_t(j) * n_vocab, n_vocab, k, &topk_[size_t(i + r + j - first) * k]);
            }
            stats_.nanospec_prefill_seconds += seconds_since(t_head);
        }
    }
    n_past_ = n;
    if (g.spec_) g.spec_->begin(history_, {params_.sampling, params_.seed, method_}, k > 0 ? topk_.data() : nullptr,
                                k > 0 ? n - first : 0, stats_);
    stats_.prefill_seconds = seconds_since(t0);
    if (params_.max_tokens == 0) finish(finish_reason::length);
}

void generation::cancel() {
    std::unique_lock<std::mutex> lock(guard_->mu);
    guard_->cv.wait(lock, [&] { return !(guard_->running && guard_->live == this); });
    if (!done() && gen_) {
        finish_reason none = finish_reason::none;
        reason_.compare_exchange_strong(none, finish_reason::cancelled);
        out_ += stream_.finish();
    }
    detach();
}

std::string generation::finish(finish_reason r) {
    reason_.store(r);
    if (gen_ && gen_->spec_) gen_->spec_->end();  // joins SSD's drafter thread
    out_ += stream_.finish();
    return out_;
}

int generation::emit(int32_t token) {
    const tokenizer& tok = gen_->tok();
    if (!params_.ignore_eos && tok.is_eog(token)) {
        finish(finish_reason::eos);
        return 0;
    }
    history_.push_back(token);
    generated_.push_back(token);
    stats_.n_generated += 1;
    out_ += stream_.push(tok.token_bytes(token));
    if (stream_.stopped()) {
        finish(finish_reason::stop);
        return 0;
    }
    if (params_.max_tokens >= 0 && int64_t(generated_.size()) >= params_.max_tokens) {
        finish(finish_reason::length);
        return 0;
    }
    return 1;
}

std::string generation::step() {
    {
        std::unique_lock<std::mutex> lock(guard_->mu);
        // Another thread stepping this same generation finishes its step first.
        guard_->cv.wait(lock, [&] { return !(guard_->running && guard_->live == this); });
        out_.clear();
        if (done() || !gen_) return out_;  // finished, cancelled or superseded
        guard_->running = true;
    }
    run_scope running(*guard_);
    run_step();
    return out_;
}

// One round (docs/ALGORITHMS.md sections 1-2): propose -> the target's rows -> process -> verify ->
// observe -> commit. Plain decoding is the round with no speculator (gamma = 0).
void generation::run_step() {
    generator& g = *gen_;
    if (n_past_ >= g.n_ctx()) {
        finish(finish_reason::length);
        return;
    }
    const auto t_round = clock_type::now();

    // 1. Propose x_1..x_g with q_1..q_g, within the context left and the token budget.
    proposal_.clear();
    if (g.spec_) {
        const int64_t budget = params_.max_tokens < 0 ? INT64_MAX : params_.max_tokens - int64_t(generated_.size());
        const int64_t room = g.n_ctx() - n_past_ - 1;
        g.spec_->propose(history_, int(std::max<int64_t>(0, std::min(room, budget - 1))), rng_, proposal_, stats_);
    }
    const int gamma = int(proposal_.tokens.size());

    // 2. The target's rows over [pending, x_1..x_g], then its processors: p_1..p_{g+1}.
    const auto t_verify = clock_type::now();
    target_rows(gamma);
    process_rows(gamma);

    // 3. Verify: keep x_1..x_k and one corrected/bonus token y.
    const verify_result vr = g.verifier_.verify(method_, proposal_.tokens.data(), gamma, p_.data(), proposal_.q.data(),
                                                rng_, &row_stats_);
    stats_.verify_seconds += seconds_since(t_verify);
    count_round(gamma, vr);

    // 4. Observe: the speculator learns the verdict (draft length, vocabulary, SSD's next round).
    if (g.spec_)
        g.spec_->observe({proposal_.tokens.data(), gamma, vr.n_accepted, vr.next_token, logits_.data(), g.n_vocab()},
                         stats_);

    // 5. Commit.
    commit(vr);
    stats_.decode_seconds += seconds_since(t_round);
}

void generation::target_rows(int gamma) {
    generator& g = *gen_;
    const int n_vocab = g.n_vocab(), n_layer = g.target().hp().n_layer, E = g.target().hp().n_embd;
    batch_.assign(1, history_.back());  // pending
    batch_.insert(batch_.end(), proposal_.tokens.begin(), proposal_.tokens.begin() + gamma);
    logits_.resize(size_t(gamma + 1) * n_vocab);
    // Rows already forwarded (the hand-over, speculative/proposal.h): their keys and values are in the
    // target's cache and their hidden states are the target's own, so only the rest go through the
    // layers; then one head pass over the g+1 rows.
    const int reused = std::min(proposal_.n_forwarded, gamma + 1);
    stats_.n_target_rows_reused += reused;
    if (reused == 0) {
        g.eval_->forward(*g.cache_, batch_.data(), gamma + 1, n_past_, n_layer);
        g.eval_->logits(g.eval_->hidden(), gamma + 1, logits_.data());
        return;
    }
    hidden_.resize(size_t(gamma + 1) * E);
    std::memcpy(hidden_.data(), proposal_.hidden.data(), sizeof(float) * size_t(reused) * E);
    if (reused < gamma + 1) {
        g.eval_->forward(*g.cache_, batch_.data() + reused, gamma + 1 - reused, n_past_ + reused, n_layer);
        std::memcpy(hidden_.data() + size_t(reused) * E, g.eval_->hidden(), sizeof(float) * size_t(gamma + 1 - reused) * E);
    }
    g.eval_->logits(hidden_.data(), gamma + 1, logits_.data());
    if (g.check_reuse_) check_reused_rows(gamma);
}

void generation::check_reused_rows(int gamma) {
    // Debug check (SPECGEN_CHECK_REUSE=1): the plain verification forward over the same rows must give
    // the same logits bit for bit. It rewrites the same cache rows, with the same values when it passes.
    generator& g = *gen_;
    const size_t n = size_t(gamma + 1) * g.n_vocab();
    g.eval_->forward(*g.cache_, batch_.data(), gamma + 1, n_past_, g.target().hp().n_layer);
    check_logits_.resize(n);
    g.eval_->logits(g.eval_->hidden(), gamma + 1, check_logits_.data());
    if (std::memcmp(check_logits_.data(), logits_.data(), n * sizeof(float)) != 0)
        throw error("SPECGEN_CHECK_REUSE: the target rows computed from the drafter's hidden states differ from a "
                    "verification forward at position " + std::to_string(n_past_));
}

void generation::process_rows(int gamma) {
    const int n_vocab = gen_->n_vocab();
    if (int(p_.size()) < gamma + 1) p_.resize(gamma + 1);
    // Row i's penalty history is the context it was computed in: history + x_1..x_i.
    history_.insert(history_.end(), batch_.begin() + 1, batch_.end());
    for (int i = 0; i <= gamma; ++i)
        processor_.process(logits_.data() + size_t(i) * n_vocab, nullptr, n_vocab, params_.sampling, history_.data(),
                           history_.size() - gamma + i, p_[i]);
    history_.resize(history_.size() - gamma);
}

void generation::count_round(int gamma, const verify_result& vr) {
    if (gen_->spec_) {
        stats_.n_rounds += 1;
        stats_.n_drafted += gamma;
        stats_.n_accepted += vr.n_accepted;
        if (int(stats_.drafted_at.size()) < gamma) {
            stats_.drafted_at.resize(gamma, 0);
            stats_.accepted_at.resize(gamma, 0);
        }
        for (int i = 0; i < gamma; ++i) stats_.drafted_at[i] += 1;
        for (int i = 0; i < vr.n_accepted; ++i) stats_.accepted_at[i] += 1;
    }
    for (const auto& rs : row_stats_) {
        stats_.n_target_rows += 1;
        stats_.sum_entropy += rs.entropy;
        stats_.sum_entropy2 += rs.entropy_sq;
        if (rs.alpha == rs.alpha) {  // NaN for the bonus row
            stats_.sum_alpha += rs.alpha;
            stats_.n_alpha += 1;
        }
    }
}

void generation::commit(const verify_result& vr) {
    // The KV cache now holds pending and x_1..x_k; y becomes the new pending token.
    n_past_ += 1 + vr.n_accepted;
    const int n_vocab = gen_->n_vocab();
    bool go = true;
    for (int i = 0; i <= vr.n_accepted && go; ++i) {
        // Accepted draft i was emitted by row i, the corrected/bonus token by row k (engine/logprobs.h).
        const int32_t token = i < vr.n_accepted ? proposal_.tokens[i] : vr.next_token;
        const size_t n_before = generated_.size();
        token_logprob lp;
        if (params_.logprobs >= 0)
            lp = logprob_recorder_.record(logits_.data() + size_t(i) * n_vocab, n_vocab, p_[i], params_.sampling,
                                          history_.data(), history_.size(), token, params_.logprobs);
        go = emit(token) != 0;
        if (params_.logprobs >= 0 && generated_.size() > n_before) logprobs_.push_back(std::move(lp));
    }
    if (go && n_past_ >= gen_->n_ctx()) finish(finish_reason::length);
}

}  // namespace specgen
