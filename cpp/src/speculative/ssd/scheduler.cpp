// The SSD / Saguaro speculator: request lifetime, the worker thread and its hand-off, and the order
// in which branches are drafted. Design and invariants: speculative/ssd/ssd.h.
#include <algorithm>
#include <chrono>
#include <cmath>

#include "backend/backend.h"
#include "common/error.h"
#include "model/model.h"
#include "speculative/draft_vocab.h"
#include "speculative/drafters/drafters.h"
#include "speculative/nanospec.h"
#include "speculative/ssd/handover.h"
#include "speculative/ssd/ssd.h"

namespace specgen {

namespace {
using clock_type = std::chrono::steady_clock;
double seconds_between(clock_type::time_point a, clock_type::time_point b) {
    return std::chrono::duration<double>(b - a).count();
}
constexpr double kMissPowerR = 1.0;  // r of the power-law miss model (geometric schedule)

uint64_t mix64(uint64_t x) {  // splitmix64 finaliser
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

}  // namespace

struct ssd_speculator::job {
    std::vector<int32_t> ctx;                 // history (ending with pending) + x_1..x_K
    int n_hist = 0;
    int K = 0;
    std::vector<std::vector<int32_t>> cands;  // [K] known candidates of l_0..l_{K-1} (empty: unknown)
    std::vector<int> fanout;                  // [K+1] F_k for this round's outcomes
    std::vector<int> fanout_next;             // [draft_max+1] F for the branches' own positions
    std::vector<int> length;                  // [K+1] gamma of the next round after verdict k
    std::vector<int32_t> grow;                // NanoSpec: ids to add to S before drafting (ssd.h)
    std::vector<float> last_hidden;           // [n_embd] hand-over: x_K's hidden state (empty: unknown)
    double a = 0.5;
    uint64_t round = 0;
};

ssd_speculator::ssd_speculator(const generator_params& params, const speculation_target& t)
    : params_(params), length_(params) {
    if (params_.draft.empty() || params_.draft == "ngram")
        throw invalid_argument_error("ssd=True needs a neural drafter: draft='self' or a draft model (got '" +
                                     params_.draft + "')");
    weights_ = t.draft ? t.draft : load_neural_weights(params_, t.target, t.tok);
    const model& m = *weights_->m;
    n_embd_ = m.hp().n_embd;
    // The drafter's pool also has threads for the target's cores, used only while the target waits
    // for the drafter (resolve()), or always when the drafter has no thread of its own (it then
    // drafts on the caller's thread while the target is idle). n_threads_draft was resolved by the
    // generator (its split).
    n_threads_draft_ = std::max(0, params_.n_threads_draft);
    n_threads_lent_ = n_threads_draft_ + std::max(1, params_.n_threads);
    backend_ = make_cpu_backend(n_threads_lent_);
    backend_->set_active_threads(concurrent() ? n_threads_draft_ : n_threads_lent_);
    cache_ = std::make_unique<kv_cache>(m.hp(), params_.n_ctx);
    vocab_ = make_draft_vocab(params_, m, t.target.hp().n_vocab);
    if (vocab_ && vocab_->grows()) nanospec_ = std::make_unique<nanospec>(*vocab_, t.head, t.prefix, false);
    drafter_ = std::make_unique<neural_drafter>(m, weights_->n_layers, *cache_, *backend_, vocab_.get(), false);
    ngram_ = make_ngram_drafter(params_.ngram_max, params_.ngram_min);
    fanout_max_ = params_.ssd_fanout;
    int max_entries = (params_.draft_max + 1) * fanout_max_;
    if (params_.ssd_budget >= 0) max_entries = std::min(max_entries, params_.ssd_budget);
    entries_.resize(size_t(max_entries));
    // Same weights, every layer, batch- and thread-invariant kernels: the drafter's rows are the
    // target's, so they can be handed over instead of recomputed.
    if (params_.reuse_draft_hidden && weights_->is_target && t.be.host_memory()) target_cache_ = &t.cache;
}

ssd_speculator::~ssd_speculator() { end(); }

uint64_t ssd_speculator::stream_seed(uint64_t tag, int k, int32_t bonus) const {
    return mix64(mix64(mix64(request_.seed ^ 0x55D5A6A0ull) ^ tag) ^ (uint64_t(uint32_t(k)) << 32 | uint32_t(bonus)));
}

void ssd_speculator::begin(const std::vector<int32_t>& prompt, const speculation_request& request, step_context& step,
                           generation_stats& stats) {
    end();
    // The worker is joined: S is the main thread's until the first job (launch()).
    grow_pending_.clear();
    if (nanospec_) nanospec_->begin(prompt, request.n_cached, step.n_sequences, stats);
    else if (vocab_) stats.vocab_set_size = vocab_->staged_size();  // static (FR-Spec)
    request_ = request;
    length_.reset();
    round_ = 0;
    hit_ = -1;
    have_verdict_ = false;
    entries_.clear();
    error_ = nullptr;
    // The drafter's cache keeps the rows the new prompt shares with the slot's last request (an
    // interrupted forward recorded only the rows it finished).
    stats.n_draft_prompt_tokens_cached = drafter_->rows_cached(prompt);
    cur_cands_.clear();
    ngram_->begin(prompt);
    stop_ = false;
    busy_ = false;
    interrupt_.store(false);
    if (concurrent()) worker_ = std::thread([this] { worker_loop(); });
}

void ssd_speculator::observe(const prefill_rows& rows, generation_stats& stats) {
    if (nanospec_) nanospec_->observe(rows, stats);  // the worker has no job yet: S is ours
}

void ssd_speculator::end() {
    if (nanospec_) nanospec_->end();
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
        interrupt_.store(true);
    }
    cv_.notify_all();
    if (worker_.joinable()) worker_.join();
    next_job_.reset();
    busy_ = false;
    cur_k_ = -1;
}

void ssd_speculator::top_candidates(const float* logits, int n, const int32_t* ids, std::vector<int32_t>& out) const {
    // The fanout_max + 1 largest logits (one more than any F_k so that excluding x_{k+1} leaves F),
    // best first, ties to the lower index; as token ids through `ids` when the row is over S.
    out.resize(size_t(std::min(fanout_max_ + 1, n)));
    if (out.empty()) return;
    top_ids(logits, n, int(out.size()), out.data());
    if (ids)
        for (int32_t& t : out) t = ids[t];
}

bool ssd_speculator::draft(const std::vector<int32_t>& ctx, int n, rng& gen, std::vector<int32_t>& tokens,
                           std::vector<token_dist>& q, std::vector<std::vector<int32_t>>& cands,
                           const std::vector<int>& fanout, const neural_drafter::abort_check* abort,
                           handover_rows* rows) {
    if (cands.size() < size_t(std::max(n, 0))) cands.resize(size_t(n));
    // q_S: the processed distribution over S (zero outside it); Saguaro reweights it, and the
    // position's raw top tokens are the next round's bonus candidates.
    const neural_drafter::position_hook hook = [&](int i, const float* logits, int n_logits, const int32_t* ids,
                                                   token_dist& qi) {
        top_candidates(logits, n_logits, ids, cands[size_t(i)]);
        const int f = fanout.empty() ? fanout_max_ : fanout[std::min(size_t(i), fanout.size() - 1)];
        saguaro_reweight(qi, f, params_.saguaro_c, q_tmp_);
        std::swap(qi, q_tmp_);
    };
    if (rows) rows->clear();
    const bool done = drafter_->draft(ctx, n, params_.effective_draft_p_min(), request_.sampling, gen, tokens, q,
                                      rows ? &rows->hidden : nullptr, rows != nullptr, &hook, abort);
    // Still the drafter's owner: the rows it forwarded have not been overwritten by another branch.
    if (done && rows && !rows->hidden.empty()) snapshot_kv(*cache_, n_embd_, int(ctx.size()) - 1, *rows);
    return done;
}

void ssd_speculator::propose(const std::vector<int32_t>& history, int max_n, const step_context&, rng&,
                             proposal& out, generation_stats& stats) {
    acquire(history, length_.limit(max_n), out, stats);  // cache hit or backup
    if (length_.keep(int(out.tokens.size())) == 0) out.tokens.clear();
    launch(history, out, int(out.tokens.size()));  // drafts round t+1 while the target verifies
}

void ssd_speculator::acquire(const std::vector<int32_t>& history, int max_n, proposal& out, generation_stats& stats) {
    out.clear();
    if (max_n <= 0) {
        cur_cands_.clear();
        return;
    }
    if (have_verdict_ && hit_ >= 0) {
        const ssd_branch& e = entries_[hit_];
        const size_t g = std::min(e.tokens.size(), size_t(max_n));
        out.tokens.assign(e.tokens.begin(), e.tokens.begin() + g);
        if (out.q.size() < g) out.q.resize(g);
        cur_cands_.resize(g);
        for (size_t i = 0; i < g; ++i) {
            out.q[i] = e.q[i];
            cur_cands_[i] = e.cands[i];
        }
        if (target_cache_ && !e.rows.hidden.empty() && e.rows.pos0 == int(history.size()) - 1)
            hand_over(e.rows, n_embd_, *target_cache_, out);
        stats.ssd_hits += 1;
        return;
    }
    if (have_verdict_) stats.ssd_misses += 1;
    const auto t0 = clock_type::now();
    if (params_.ssd_backup == ssd_backup_mode::fast) {
        rng unused(0);
        ngram_->propose(history, max_n, request_.sampling, params_.effective_draft_p_min(), unused, out);
        cur_cands_.assign(out.tokens.size(), {});
        stats.draft_seconds += seconds_between(t0, clock_type::now());
        return;
    }
    if (concurrent()) {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return !busy_; });
        if (error_) std::rethrow_exception(error_);
    }
    const auto t1 = clock_type::now();
    stats.ssd_wait_seconds += seconds_between(t0, t1);
    // The worker is idle: the drafter (and S) is ours until launch().
    if (vocab_) vocab_->apply(grow_pending_);
    grow_pending_.clear();
    rng gen(stream_seed(round_ + 1, -1, -1));
    const std::vector<int> fan = ssd_fanouts(params_.ssd_fanout_schedule, params_.ssd_fanout, params_.draft_max,
                                             accept_.value(), kMissPowerR);
    drafter_->head_seconds = 0;
    draft(history, max_n, gen, out.tokens, out.q, cur_cands_, fan, nullptr, target_cache_ ? &backup_rows_ : nullptr);
    cur_cands_.resize(out.tokens.size());
    if (target_cache_ && !backup_rows_.hidden.empty()) hand_over(backup_rows_, n_embd_, *target_cache_, out);
    stats.draft_seconds += seconds_between(t1, clock_type::now());
    stats.draft_head_seconds += drafter_->head_seconds;
}

void ssd_speculator::launch(const std::vector<int32_t>& history, const proposal& prop, int gamma) {
    last_gamma_ = gamma;
    round_ += 1;
    if (!concurrent()) return;  // no worker: the next round drafts after the verdict (ssd.h)
    auto j = std::make_unique<job>();
    j->ctx.assign(history.begin(), history.end());
    j->ctx.insert(j->ctx.end(), prop.tokens.begin(), prop.tokens.begin() + gamma);
    j->n_hist = int(history.size());
    j->K = gamma;
    j->cands.resize(size_t(gamma));
    for (int i = 0; i < gamma && i < int(cur_cands_.size()); ++i) j->cands[size_t(i)] = cur_cands_[size_t(i)];
    j->a = accept_.value();
    j->fanout = ssd_fanouts(params_.ssd_fanout_schedule, params_.ssd_fanout, gamma, j->a, kMissPowerR);
    j->fanout_next = ssd_fanouts(params_.ssd_fanout_schedule, params_.ssd_fanout, params_.draft_max, j->a, kMissPowerR);
    j->length.resize(size_t(gamma) + 1);
    for (int k = 0; k <= gamma; ++k) j->length[size_t(k)] = length_.after(gamma, k);
    j->round = round_;
    if (target_cache_ && prop.n_forwarded > gamma)  // row gamma is x_gamma's (pending's for gamma = 0)
        j->last_hidden.assign(prop.hidden.begin() + size_t(gamma) * n_embd_, prop.hidden.begin() + size_t(gamma + 1) * n_embd_);
    j->grow.swap(grow_pending_);
    grow_pending_.clear();
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (error_) std::rethrow_exception(error_);
        // A job the worker never picked up (it was still finishing an older one) is replaced; its
        // growth of S must not be lost: it goes first.
        if (next_job_ && !next_job_->grow.empty()) j->grow.insert(j->grow.begin(), next_job_->grow.begin(), next_job_->grow.end());
        next_job_ = std::move(j);
        entries_.clear();
        busy_ = true;
        verdict_posted_ = false;
        hit_ = -1;
        have_verdict_ = false;
        interrupt_.store(true);  // a job still finishing an aborted forward stops at its next check
    }
    cv_.notify_all();
}

void ssd_speculator::observe(const verify_outcome& v, step_context&, generation_stats& stats) {
    // The growth of the sequential rule, staged for the drafter's owner.
    if (nanospec_) nanospec_->observe(v, &grow_pending_, stats);
    else if (vocab_) stats.vocab_set_size = vocab_->staged_size();
    resolve(v.n_accepted, v.next_token, stats);  // a hit readies round t+1's draft
    length_.update(v.gamma, v.n_accepted);
}

void ssd_speculator::resolve(int n_accepted, int32_t next_token, generation_stats& stats) {
    const auto t0 = clock_type::now();
    accept_.update(last_gamma_, n_accepted);
    if (!concurrent()) {
        hit_ = -1;
        have_verdict_ = true;
        return;
    }
    std::unique_lock<std::mutex> lock(mu_);
    verdict_k_ = n_accepted;
    verdict_y_ = next_token;
    verdict_posted_ = true;
    t_verdict_ = t0;
    interrupt_.store(true);
    // A started branch that is the hit is always finished (ssd.h: losslessness). Meanwhile the
    // drafter may use the target's threads.
    const auto done = [&] { return error_ || !(cur_k_ == n_accepted && cur_bonus_ == next_token); };
    if (!done()) {
        backend_->set_active_threads(n_threads_lent_);
        cv_.wait(lock, done);
        backend_->set_active_threads(n_threads_draft_);
    }
    if (error_) std::rethrow_exception(error_);
    hit_ = entries_.find(round_, n_accepted, next_token);
    have_verdict_ = true;
    stats.ssd_branches += branches_;
    stats.ssd_overlap_seconds += overlap_seconds_;
    branches_ = 0;
    overlap_seconds_ = 0;
    lock.unlock();
    stats.ssd_wait_seconds += seconds_between(t0, clock_type::now());
}

void ssd_speculator::worker_loop() {
    for (;;) {
        std::unique_ptr<job> j;
        {
            std::unique_lock<std::mutex> lock(mu_);
            cv_.wait(lock, [&] { return stop_ || next_job_ != nullptr; });
            if (stop_) return;
            j = std::move(next_job_);
            entries_.clear();
            interrupt_.store(verdict_posted_);  // the verdict may already be in
        }
        const auto t0 = clock_type::now();
        try {
            run_job(*j);
        } catch (...) {
            std::lock_guard<std::mutex> lock(mu_);
            error_ = std::current_exception();
            drafter_->reset();  // a forward may have stopped half-way
        }
        const auto t1 = clock_type::now();
        {
            std::lock_guard<std::mutex> lock(mu_);
            cur_k_ = -1;
            cur_bonus_ = -1;
            const auto end = verdict_posted_ ? std::min(t1, t_verdict_) : t1;
            if (end > t0) overlap_seconds_ += seconds_between(t0, end);
            busy_ = next_job_ != nullptr;
        }
        cv_.notify_all();
    }
}

void ssd_speculator::run_job(const job& j) {
    if (vocab_) vocab_->apply(j.grow);  // first, whatever happens next: S is fixed for the rest of the job
    const int K = j.K;
    const neural_drafter::abort_check interrupted = [&] { return interrupt_.load(std::memory_order_relaxed); };
    // A. l_0..l_K: head rows only where the candidates are not known yet. l_K's row is forwarded
    // unless the proposal's draft did it already (the hand-over's hidden state came with the job).
    const bool have_last = !j.last_hidden.empty();
    std::vector<int> rows;
    std::vector<int> row_of(size_t(K) + 1, -1);
    for (int k = 0; k <= K; ++k)
        if (k == K ? !have_last : j.cands[size_t(k)].empty()) {
            row_of[size_t(k)] = int(rows.size());
            rows.push_back(j.n_hist - 1 + k);
        }
    if (!rows.empty() && !drafter_->forward(j.ctx, rows, &interrupted, nullptr, true)) return;
    if (have_last) {
        row_of[size_t(K)] = int(rows.size());
        drafter_->head(j.last_hidden.data(), rows.size());
    }
    const int n_logits = drafter_->n_logits();
    const int32_t* ids = drafter_->ids();
    struct branch {
        double score;
        int k;
        int32_t bonus;
    };
    std::vector<branch> branches;
    std::vector<int32_t> computed;
    const double a = j.a;
    for (int k = 0; k <= K; ++k) {
        const std::vector<int32_t>* src = &computed;
        if (row_of[size_t(k)] >= 0)
            top_candidates(drafter_->logits(size_t(row_of[size_t(k)])).data(), n_logits, ids, computed);
        else
            src = &j.cands[size_t(k)];  // k < K: recorded when x_{k+1} was drafted
        const double p_k = k < K ? std::pow(a, k) * (1 - a) : std::pow(a, K);
        int rank = 0;
        for (int32_t t : *src) {
            if (rank >= j.fanout[size_t(k)]) break;
            if (k < K && request_.method == verify_method::token && t == j.ctx[size_t(j.n_hist + k)]) continue;
            branches.push_back({p_k / double((rank + 1) * (rank + 1)), k, t});
            ++rank;
        }
    }
    std::stable_sort(branches.begin(), branches.end(), [](const branch& x, const branch& y) { return x.score > y.score; });
    const size_t limit = std::min(branches.size(), entries_.capacity());
    // B. Draft branches, most likely first, until the verdict (or a new job / stop) interrupts.
    std::vector<int32_t> ctx_b;
    for (size_t b = 0; b < limit; ++b) {
        const branch& br = branches[b];
        int slot;
        {
            std::lock_guard<std::mutex> lock(mu_);
            if (stop_ || next_job_ || verdict_posted_) return;
            cur_k_ = br.k;
            cur_bonus_ = br.bonus;
            slot = entries_.size();
        }
        ssd_branch& e = entries_.slot(slot);
        ctx_b.assign(j.ctx.begin(), j.ctx.begin() + j.n_hist + br.k);
        ctx_b.push_back(br.bonus);
        rng gen(stream_seed(j.round, br.k, br.bonus));
        const neural_drafter::abort_check abort = [&] {
            if (!interrupt_.load(std::memory_order_relaxed)) return false;
            std::lock_guard<std::mutex> lock(mu_);
            if (stop_ || next_job_) return true;
            return verdict_posted_ && !(verdict_k_ == br.k && verdict_y_ == br.bonus);
        };
        // The next round's gamma after verdict k; the snapshot of the hand-over rows is taken inside,
        // still "drafting (k, bonus)": a target waiting for this hit waits for it too.
        const bool done = draft(ctx_b, j.length[size_t(br.k)], gen, e.tokens, e.q, e.cands, j.fanout_next, &abort,
                                target_cache_ ? &e.rows : nullptr);
        {
            std::lock_guard<std::mutex> lock(mu_);
            cur_k_ = -1;
            cur_bonus_ = -1;
            if (done) {
                entries_.commit(slot, j.round, br.k, br.bonus);
                branches_ += 1;
            }
        }
        cv_.notify_all();
        if (!done) return;
    }
}

}  // namespace specgen
