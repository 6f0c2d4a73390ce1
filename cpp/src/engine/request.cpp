// One request (engine/request.h): the reader side and the per-sequence parts of a round.
#include "engine/request.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "common/error.h"
#include "engine/generator.h"
#include "engine/scheduler.h"
#include "engine/slot.h"
#include "model/batch.h"
#include "speculative/draft_vocab.h"

namespace specgen {

namespace {
using clock_type = std::chrono::steady_clock;
double now_seconds() { return std::chrono::duration<double>(clock_type::now().time_since_epoch()).count(); }
double seconds_since(clock_type::time_point t0) { return std::chrono::duration<double>(clock_type::now() - t0).count(); }
constexpr int kVocabHeadChunk = 16;  // prompt rows per full-head pass when seeding NanoSpec's set
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

generation::generation(generator& g, const std::vector<int32_t>& prompt, const generate_params& params)
    : gen_(&g), sched_(g.sched_), params_(params), history_(prompt), stream_(params.stop),
      rng_(params.seed), method_(g.params().verify == verify_mode::block ? verify_method::block : verify_method::token) {
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
    pub_stats_ = stats_;
}

generation::~generation() {
    bool released;
    {
        std::lock_guard<std::mutex> lock(sched_->mu());
        released = released_;
    }
    if (!released) cancel();
}

// ---- reader side ------------------------------------------------------------------------------

bool generation::done() const {
    std::lock_guard<std::mutex> lock(sched_->mu());
    return released_ && unread_.empty() && !error_;
}

finish_reason generation::reason() const { return reason_.load(); }

std::string generation::step() {
    bool ready = false;
    return next(-1.0, &ready);
}

std::string generation::next(double timeout_s, bool* ready) {
    std::unique_lock<std::mutex> lock(sched_->mu());
    auto progressed = [&] { return released_ || n_published_ != n_seen_; };
    if (waits_forever(timeout_s)) sched_->readers().wait(lock, progressed);
    else if (timeout_s > 0)
        sched_->readers().wait_for(lock, std::chrono::duration<double>(timeout_s), progressed);
    *ready = progressed();
    n_seen_ = n_published_;
    if (error_) {
        std::exception_ptr e = error_;
        error_ = nullptr;
        std::rethrow_exception(e);
    }
    std::string out;
    out.swap(unread_);
    return out;
}

void generation::cancel(bool wait) { sched_->cancel(this, wait); }

std::vector<int32_t> generation::tokens() const {
    std::lock_guard<std::mutex> lock(sched_->mu());
    return pub_tokens_;
}

std::string generation::text() const {
    std::lock_guard<std::mutex> lock(sched_->mu());
    return pub_text_;
}

generation_stats generation::stats() const {
    std::lock_guard<std::mutex> lock(sched_->mu());
    return pub_stats_;
}

std::vector<token_logprob> generation::logprobs(size_t start) const {
    std::lock_guard<std::mutex> lock(sched_->mu());
    if (start >= pub_logprobs_.size()) return {};
    return std::vector<token_logprob>(pub_logprobs_.begin() + start, pub_logprobs_.end());
}

// ---- engine side ------------------------------------------------------------------------------

void generation::admit(slot& s, int n_cached, int topk_k) {
    slot_ = &s;
    n_past_ = n_cached;
    topk_k_ = topk_k;
    stats_.n_prompt_tokens_cached = n_cached;
    if (topk_k_ > 0) {
        topk_.assign(size_t(prompt_rows()) * topk_k_, 0);
        // The cached rows may extend past the top-k rows the previous request kept (its generated tokens).
        const size_t n = std::min({s.cached_topk.size(), size_t(n_cached) * topk_k_, topk_.size()});
        std::copy(s.cached_topk.begin(), s.cached_topk.begin() + n, topk_.begin());
        // Cached rows whose top-k the last request never ran: their hidden states wait again, when
        // they run up to the rows this prefill adds (the kept rows must stay contiguous).
        const int row0 = int(s.cached_topk.size() / size_t(topk_k_));
        const int from = std::max(row0, std::max(0, prompt_rows() - speculator::kPromptTopkRows));
        const int to = std::min(n_cached, row0 + s.cached_seed_rows);
        if (s.cached_seed_rows > 0 && from < to && to == n_cached) {
            const size_t E = size_t(gen_->target().hp().n_embd);
            seed_row0_ = from;
            seed_hidden_.assign(s.cached_seed_hidden.begin() + size_t(from - row0) * E,
                                s.cached_seed_hidden.begin() + size_t(to - row0) * E);
        }
    }
    t_admit_ = now_seconds();
    if (!prefilling()) prefill_done_rows(0, nullptr, check_logits_);
}

int generation::add_prefill(batch& b, int max_rows) {
    const int m = std::min(max_rows, prompt_rows() - n_past_);
    if (m <= 0) return 0;
    row0_ = b.n_rows();
    b.add(slot_->index, history_.data() + n_past_, m, n_past_);
    return m;
}

void generation::topk_rows(const float* hidden, int n, int row0, std::vector<float>& scratch) {
    generator& g = *gen_;
    const auto t_head = clock_type::now();
    // Over the seed head's frequent ids when the generator has one (docs/ALGORITHMS.md section 3).
    const draft_vocab* seed = g.seed_vocab_.get();
    const int n_cols = seed ? seed->size() : g.n_vocab(), E = g.target().hp().n_embd;
    scratch.resize(size_t(std::min(kVocabHeadChunk, n)) * n_cols);
    for (int r = 0; r < n; r += kVocabHeadChunk) {
        const int c = std::min(kVocabHeadChunk, n - r);
        if (seed) seed->logits(*g.backend_, hidden + size_t(r) * E, c, scratch.data());
        else g.eval_->logits(hidden + size_t(r) * E, c, scratch.data());
        for (int j = 0; j < c; ++j) {
            int32_t* top = &topk_[size_t(row0 + r + j) * topk_k_];
            top_ids(scratch.data() + size_t(j) * n_cols, n_cols, topk_k_, top);
            if (seed)
                for (int q = 0; q < topk_k_; ++q) top[q] = seed->ids()[top[q]];
        }
    }
    stats_.nanospec_prefill_seconds += seconds_since(t_head);
}

void generation::prefill_done_rows(int m, const float* hidden, std::vector<float>& scratch) {
    // The speculator's draft vocabulary starts from the target's top-k at the last prompt rows
    // (speculator::kPromptTopkRows; docs/ALGORITHMS.md section 3).
    const int first = std::max(0, prompt_rows() - speculator::kPromptTopkRows);
    if (m > 0 && topk_k_ > 0 && n_past_ + m > first) {
        const int r0 = std::max(0, first - n_past_);  // the chunk's first row that needs its top-k
        if (slot_->spec && slot_->spec->prompt_topk_optional()) {
            // An optional top-k waits until the speculator asks for it: keep the rows' hidden states
            // (seed_prompt_topk). A prompt's chunks come in order, so the kept rows are contiguous.
            const int E = gen_->target().hp().n_embd;
            if (seed_hidden_.empty()) seed_row0_ = n_past_ + r0;
            seed_hidden_.insert(seed_hidden_.end(), hidden + size_t(r0) * E, hidden + size_t(m) * E);
        } else {
            topk_rows(hidden + size_t(r0) * gen_->target().hp().n_embd, m - r0, n_past_ + r0, scratch);
        }
    }
    n_past_ += m;
    if (prefilling()) return;
    if (slot_->spec) {
        const bool give = topk_k_ > 0 && seed_hidden_.empty();  // else add_prompt_topk() brings it later
        speculation_request request{params_.sampling, params_.seed, method_, {}};
        // The step's scratch outlives the request's rounds (the scheduler's or this request's own).
        if (!seed_hidden_.empty()) request.seed_prompt_topk = [this, &scratch](int n) { seed_prompt_topk(scratch, n); };
        request.n_seed_rows = int(seed_hidden_.size() / size_t(gen_->target().hp().n_embd));
        request.seed_share = gen_->seed_vocab_ ? double(gen_->seed_vocab_->size()) / gen_->n_vocab() : 1.0;
        request.max_tokens = params_.max_tokens;
        slot_->spec->begin(history_, request, give ? topk_.data() + size_t(first) * topk_k_ : nullptr,
                           give ? prompt_rows() - first : 0, stats_);
    }
    stats_.prefill_seconds = now_seconds() - t_admit_;
    if (params_.max_tokens == 0) finish(finish_reason::length);
}

void generation::seed_prompt_topk(std::vector<float>& scratch, int n_rows) {
    if (seed_hidden_.empty()) return;
    const size_t E = size_t(gen_->target().hp().n_embd);
    const int kept = int(seed_hidden_.size() / E);  // rows seed_row0_ .. the prompt's last row
    const int n_prompt_rows = int(topk_.size() / size_t(topk_k_));  // topk_ holds the prompt's rows only
    const int skip = std::max(0, kept - n_rows);
    topk_rows(seed_hidden_.data() + size_t(skip) * E, kept - skip, seed_row0_ + skip, scratch);
    // All rows: the slot keeps their top-k, and S also gets the cached rows' before them. Only the last
    // ones: the slot still counts every kept row as unseeded, so the next request with this prefix can
    // seed them all.
    if (skip == 0) seed_hidden_.clear();
    const int first = skip > 0 ? seed_row0_ + skip : std::max(0, n_prompt_rows - speculator::kPromptTopkRows);
    slot_->spec->add_prompt_topk(topk_.data() + size_t(first) * topk_k_, n_prompt_rows - first, stats_);
}

void generation::propose(int cap, int batch_size) {
    proposal_.clear();
    gamma_ = 0;
    if (!slot_->spec) return;
    slot_->spec->set_batch_size(batch_size);  // also when the batch policy leaves it no draft this round
    if (cap <= 0) return;
    generator& g = *gen_;
    const int64_t budget = params_.max_tokens < 0 ? INT64_MAX : params_.max_tokens - int64_t(generated_.size());
    const int64_t room = g.n_ctx() - n_past_ - 1;
    const int64_t max_n = std::max<int64_t>(0, std::min<int64_t>({room, budget - 1, int64_t(cap)}));
    slot_->spec->propose(history_, int(max_n), rng_, proposal_, stats_);
    gamma_ = int(proposal_.tokens.size());
}

int generation::add_round_rows(batch& b) {
    batch_.assign(1, history_.back());  // pending
    batch_.insert(batch_.end(), proposal_.tokens.begin(), proposal_.tokens.begin() + gamma_);
    // Rows already forwarded (the hand-over, speculative/proposal.h): their keys and values are in the
    // slot and their hidden states are the target's own, so only the rest go through the layers.
    const int reused = std::min<int>(proposal_.n_forwarded, gamma_ + 1);
    stats_.n_target_rows_reused += reused;
    row0_ = -1;
    if (reused == gamma_ + 1) return 0;
    row0_ = b.n_rows();
    b.add(slot_->index, batch_.data() + reused, gamma_ + 1 - reused, n_past_ + reused);
    return gamma_ + 1 - reused;
}

void generation::gather_hidden(const float* batch_hidden, float* out) const {
    const int E = gen_->target().hp().n_embd;
    const int reused = std::min<int>(proposal_.n_forwarded, gamma_ + 1);
    if (reused > 0) std::memcpy(out, proposal_.hidden.data(), sizeof(float) * size_t(reused) * E);
    if (reused < gamma_ + 1)
        std::memcpy(out + size_t(reused) * E, batch_hidden + size_t(row0_) * E, sizeof(float) * size_t(gamma_ + 1 - reused) * E);
}

void generation::check_reused_rows(const float* logits) {
    // Debug check (SPECGEN_CHECK_REUSE=1): the plain verification forward over the same rows must give
    // the same logits bit for bit. It rewrites the same cache rows, with the same values when it passes.
    generator& g = *gen_;
    const size_t n = size_t(gamma_ + 1) * g.n_vocab();
    g.eval_->forward(*g.cache_, batch_.data(), gamma_ + 1, n_past_, g.target().hp().n_layer, slot_->index);
    check_logits_.resize(n);
    g.eval_->logits(g.eval_->hidden(), gamma_ + 1, check_logits_.data());
    if (std::memcmp(check_logits_.data(), logits, n * sizeof(float)) != 0)
        throw error("SPECGEN_CHECK_REUSE: the target rows computed from the drafter's hidden states differ from a "
                    "verification forward at position " + std::to_string(n_past_));
}

void generation::finish_round(const float* logits) {
    generator& g = *gen_;
    const int gamma = gamma_, n_vocab = g.n_vocab();
    if (g.check_reuse_ && proposal_.n_forwarded > 0) check_reused_rows(logits);
    const auto t_verify = clock_type::now();

    // p_1..p_{g+1}: row i's penalty history is the context it was computed in: history + x_1..x_i.
    if (int(p_.size()) < gamma + 1) p_.resize(gamma + 1);
    history_.insert(history_.end(), batch_.begin() + 1, batch_.end());
    for (int i = 0; i <= gamma; ++i)
        processor_.process(logits + size_t(i) * n_vocab, nullptr, n_vocab, params_.sampling, history_.data(),
                           history_.size() - gamma + i, p_[i]);
    history_.resize(history_.size() - gamma);

    // Verify: keep x_1..x_k and one corrected/bonus token y.
    const verify_result vr = g.verifier_.verify(method_, proposal_.tokens.data(), gamma, p_.data(), proposal_.q.data(),
                                                rng_, &row_stats_);
    stats_.verify_seconds += seconds_since(t_verify);
    if (slot_->spec) {
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

    // Observe: the speculator learns the verdict (draft length, vocabulary, SSD's next round).
    if (slot_->spec)
        slot_->spec->observe({proposal_.tokens.data(), gamma, vr.n_accepted, vr.next_token, logits, n_vocab}, stats_);

    // Commit: the slot now holds pending and x_1..x_k; y becomes the new pending token.
    n_past_ += 1 + vr.n_accepted;
    bool go = true;
    for (int i = 0; i <= vr.n_accepted && go; ++i) {
        // Accepted draft i was emitted by row i, the corrected/bonus token by row k (engine/logprobs.h).
        const int32_t token = i < vr.n_accepted ? proposal_.tokens[i] : vr.next_token;
        const size_t n_before = generated_.size();
        token_logprob lp;
        if (params_.logprobs >= 0)
            lp = logprob_recorder_.record(logits + size_t(i) * n_vocab, n_vocab, p_[i], params_.sampling,
                                          history_.data(), history_.size(), token, params_.logprobs);
        go = emit(token) != 0;
        if (params_.logprobs >= 0 && generated_.size() > n_before) logprobs_.push_back(std::move(lp));
    }
    if (go && n_past_ >= g.n_ctx()) finish(finish_reason::length);
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

void generation::finish(finish_reason r) {
    if (engine_reason_ != finish_reason::none) return;
    engine_reason_ = r;
    out_ += stream_.finish();
}

}  // namespace specgen
