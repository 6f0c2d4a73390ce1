#include "engine/generator.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "common/error.h"
#include "gguf/gguf_reader.h"
#include "spec/drafters.h"
#include "spec/ssd.h"
#include "spec/nanospec_vocab.h"

namespace specgen {

namespace {
using clock_type = std::chrono::steady_clock;
double seconds_since(clock_type::time_point t0) {
    return std::chrono::duration<double>(clock_type::now() - t0).count();
}
constexpr int kPrefillChunk = 128;
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
        // cores (one each at n_threads 1).
        const int total = params_.n_threads;
        params_.n_threads_draft = std::max(1, total / 2);
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
    if (params_.ssd)
        ssd_ = std::make_unique<ssd_speculator>(params_, *model_, *tokenizer_,
                                                backend_->host_memory() ? cache_.get() : nullptr);
    else
        drafter_ = make_drafter(params_, *model_, *tokenizer_, *cache_, *backend_);
}

generator::~generator() {
    if (live_) live_->gen_ = nullptr;
}

std::vector<float> generator::logits(const std::vector<int32_t>& tokens, int batch_size) {
    if (batch_size < 1) throw invalid_argument_error("batch_size must be >= 1");
    if (tokens.empty()) throw invalid_argument_error("logits() needs at least one token");
    if (int64_t(tokens.size()) > params_.n_ctx)
        throw context_overflow_error(std::to_string(tokens.size()) + " tokens exceed n_ctx = " + std::to_string(params_.n_ctx));
    for (int32_t t : tokens)
        if (t < 0 || t >= n_vocab()) throw invalid_argument_error("token id " + std::to_string(t) + " out of range [0, " + std::to_string(n_vocab()) + ")");
    if (live_) live_->cancel();
    const int n = int(tokens.size());
    std::vector<float> out(size_t(n) * n_vocab());
    for (int i = 0; i < n; i += batch_size) {
        const int m = std::min(batch_size, n - i);
        eval_->forward(*cache_, tokens.data() + i, m, i, model_->hp().n_layer);
        eval_->logits(eval_->hidden(), m, out.data() + size_t(i) * n_vocab());
    }
    return out;
}

std::unique_ptr<generation> generator::start(const std::vector<int32_t>& prompt, const generate_params& params) {
    params.validate();
    if (live_) live_->cancel();
    auto g = std::make_unique<generation>(*this, prompt, params);
    live_ = g.get();
    g->prefill();
    return g;
}

generation::generation(generator& g, const std::vector<int32_t>& prompt, const generate_params& params)
    : gen_(&g), params_(params), history_(prompt), stream_(params.stop), rng_(params.seed) {
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
    draft_cap_ = g.params().draft_max;
}

generation::~generation() {
    if (gen_ && gen_->live_ == this) {
        if (gen_->ssd_) gen_->ssd_->end();
        gen_->live_ = nullptr;
    }
}

verify_method generation::method() const {
    return gen_->params_.verify == verify_mode::block ? verify_method::block : verify_method::token;
}

void generation::prefill() {
    auto t0 = clock_type::now();
    const int n = int(history_.size()) - 1;  // the last prompt token is forwarded by the first step
    const int n_layer = gen_->target().hp().n_layer;
    nanospec_vocab* vocab = gen_->drafter_ ? gen_->drafter_->vocab() : nullptr;
    // NanoSpec's set is the sequential drafter's, or the SSD speculator's (spec/ssd.h).
    const bool seed = (vocab && vocab->grows()) || (gen_->ssd_ && gen_->ssd_->vocab_grows());
    const int k = params_topk();
    if (seed) topk_.resize(size_t(n) * k);
    for (int i = 0; i < n; i += kPrefillChunk) {
        const int m = std::min(kPrefillChunk, n - i);
        gen_->eval_->forward(*gen_->cache_, history_.data() + i, m, i, n_layer);
        if (seed) {
            auto t_head = clock_type::now();
            const int n_vocab = gen_->n_vocab(), E = gen_->target().hp().n_embd;
            logits_.resize(size_t(std::min(kVocabHeadChunk, m)) * n_vocab);
            for (int r = 0; r < m; r += kVocabHeadChunk) {
                const int c = std::min(kVocabHeadChunk, m - r);
                gen_->eval_->logits(gen_->eval_->hidden() + size_t(r) * E, c, logits_.data());
                for (int j = 0; j < c; ++j) top_ids(logits_.data() + size_t(j) * n_vocab, n_vocab, k, &topk_[size_t(i + r + j) * k]);
            }
            stats_.nanospec_prefill_seconds += seconds_since(t_head);
        }
    }
    n_past_ = n;
    if (gen_->drafter_) gen_->drafter_->begin(history_);
    if (gen_->ssd_) {
        gen_->ssd_->begin(history_, params_.sampling, params_.seed, method(), seed ? topk_.data() : nullptr, seed ? n : 0);
        stats_.vocab_set_size = gen_->ssd_->vocab_size();
    }
    if (seed && vocab) vocab->seed(history_.data(), int64_t(history_.size()), topk_.data(), n);
    if (vocab) stats_.vocab_set_size = vocab->size();
    stats_.prefill_seconds = seconds_since(t0);
    if (params_.max_tokens == 0) finish(finish_reason::length);
}

void generation::cancel() {
    if (!done()) finish(finish_reason::cancelled);
    if (gen_ && gen_->live_ == this) gen_->live_ = nullptr;
    gen_ = nullptr;
}

std::string generation::finish(finish_reason r) {
    reason_ = r;
    if (gen_ && gen_->ssd_ && gen_->live_ == this) gen_->ssd_->end();  // joins the drafter thread
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
    out_.clear();
    if (done()) return out_;
    if (!gen_) throw invalid_argument_error("this generation was superseded by a newer one on the same Generator");
    generator& g = *gen_;
    const int n_ctx = g.n_ctx();
    if (n_past_ >= n_ctx) return finish(finish_reason::length);
    const auto t_round = clock_type::now();
    proposal_.clear();

    // 1. Draft (ALGORITHMS.md: x_1..x_g with proposals q_1..q_g).
    const int32_t pending = history_.back();
    int gamma = 0;
    int64_t budget = params_.max_tokens < 0 ? INT64_MAX : params_.max_tokens - int64_t(generated_.size());
    if (g.ssd_) {
        const int room = n_ctx - n_past_ - 1;
        const int max_n = int(std::max<int64_t>(0, std::min<int64_t>({g.params_.draft_max, room, budget - 1})));
        g.ssd_->acquire(history_, max_n, g.params_.draft_p_min, proposal_, stats_);  // cache hit or backup
        gamma = int(proposal_.tokens.size());
        if (gamma < g.params_.draft_min) gamma = 0;
        g.ssd_->launch(history_, proposal_, gamma);  // drafts round t+1 while the target verifies
    } else if (g.drafter_) {
        const int room = n_ctx - n_past_ - 1;
        const int max_n = int(std::min<int64_t>({draft_cap_, room, budget - 1}));
        if (max_n > 0) {
            auto t0 = clock_type::now();
            g.drafter_->propose(history_, max_n, params_.sampling, g.params_.draft_p_min, rng_, proposal_);
            stats_.draft_seconds += seconds_since(t0);
            stats_.draft_head_seconds += proposal_.head_seconds;
            gamma = int(proposal_.tokens.size());
            if (gamma < g.params_.draft_min) gamma = 0;
        }
    }

    // 2. The target's rows over [pending, x_1..x_g]: p_1..p_{g+1}.
    auto t_verify = clock_type::now();
    batch_.assign(1, pending);
    batch_.insert(batch_.end(), proposal_.tokens.begin(), proposal_.tokens.begin() + gamma);
    const int n_vocab = g.n_vocab();
    target_logits(gamma);
    if (int(p_.size()) < gamma + 1) p_.resize(gamma + 1);
    // Row i's penalty history is the context it was computed in: history + x_1..x_i.
    history_.insert(history_.end(), batch_.begin() + 1, batch_.end());
    for (int i = 0; i <= gamma; ++i)
        processor_.process(logits_.data() + size_t(i) * n_vocab, nullptr, n_vocab, params_.sampling, history_.data(),
                           history_.size() - gamma + i, p_[i]);
    history_.resize(history_.size() - gamma);

    // 3. Verify: keep x_1..x_k and one corrected/bonus token y.
    verify_result vr = g.verifier_.verify(method(), proposal_.tokens.data(), gamma, p_.data(), proposal_.q.data(), rng_, &row_stats_);
    grow_vocab(gamma, vr);
    stats_.verify_seconds += seconds_since(t_verify);
    if (g.ssd_) g.ssd_->resolve(vr.n_accepted, vr.next_token, stats_);  // a hit readies round t+1's draft
    if (g.drafter_ || g.ssd_) {
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

    // The next round's gamma depends only on outcomes already emitted, so adapting it keeps the
    // output distribution unchanged.
    if (g.params_.draft_adaptive && gamma > 0)
        draft_cap_ = vr.n_accepted == gamma ? std::min(g.params_.draft_max, 2 * draft_cap_)
                                            : std::max(1, vr.n_accepted + 1);

    // 4. Commit: the KV cache now holds pending and x_1..x_k; y becomes the new pending token.
    n_past_ += 1 + vr.n_accepted;
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
    if (g.drafter_ && go) g.drafter_->observe(history_);
    stats_.decode_seconds += seconds_since(t_round);
    if (go && n_past_ >= n_ctx) finish(finish_reason::length);
    return out_;
}

void generation::target_logits(int gamma) {
    generator& g = *gen_;
    const int n_vocab = g.n_vocab(), n_layer = g.target().hp().n_layer, E = g.target().hp().n_embd;
    logits_.resize(size_t(gamma + 1) * n_vocab);
    // All-layers shortcut: the self drafter ran every target layer over [pending, x_1..x_{m-1}]
    // (m = n_target_hidden), and the target's cache holds the keys/values it wrote (the sequential
    // drafter writes the target's cache itself; SSD copied its rows in), the same a verification
    // forward would write (batch- and thread-invariant kernels). So only the rows it did not forward
    // (x_g when it drafted the full budget) go through the layers; then one head pass over g+1 rows.
    const int reused = g.params_.reuse_draft_hidden ? std::min(proposal_.n_target_hidden, gamma + 1) : 0;
    stats_.n_target_rows_reused += reused;
    if (reused == 0) {
        g.eval_->forward(*g.cache_, batch_.data(), gamma + 1, n_past_, n_layer);
        g.eval_->logits(g.eval_->hidden(), gamma + 1, logits_.data());
        return;
    }
    hidden_.resize(size_t(gamma + 1) * E);
    std::memcpy(hidden_.data(), proposal_.target_hidden.data(), sizeof(float) * size_t(reused) * E);
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

void generation::grow_vocab(int gamma, const verify_result& vr) {
    nanospec_vocab* vocab = gen_->drafter_ ? gen_->drafter_->vocab() : nullptr;
    ssd_speculator* ssd = gen_->ssd_.get();  // owns its own set; grows it between its drafts (spec/ssd.h)
    if (!vocab && !ssd) return;
    if (vocab ? vocab->grows() : ssd->vocab_grows()) {
        // The target rows on the emitted path (1..k+1: the ones whose context was kept) and the
        // emitted tokens x_1..x_k, y.
        const int n_rows = vr.n_accepted + 1, n_vocab = gen_->n_vocab(), k = params_topk();
        topk_.resize(size_t(n_rows) * k);
        for (int r = 0; r < n_rows; ++r) top_ids(logits_.data() + size_t(r) * n_vocab, n_vocab, k, &topk_[size_t(r) * k]);
        emitted_.assign(proposal_.tokens.begin(), proposal_.tokens.begin() + vr.n_accepted);
        emitted_.push_back(vr.next_token);
        if (vocab)
            vocab->grow(topk_.data(), n_rows, emitted_.data(), int64_t(emitted_.size()), proposal_.tokens.data(), gamma);
        else
            ssd->grow_vocab(topk_.data(), n_rows, emitted_.data(), int64_t(emitted_.size()), proposal_.tokens.data(), gamma);
    }
    stats_.vocab_set_size = vocab ? vocab->size() : ssd->vocab_size();
}

}  // namespace specgen
