// The SSD / Saguaro speculator: worker thread, speculation cache, Saguaro reweighting, fan-out
// schedule. Design and invariants: ssd.h.
#include "spec/ssd.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "backend/backend.h"
#include "common/error.h"
#include "gguf/gguf_reader.h"
#include "model/model.h"
#include "model/vocab_compat.h"
#include "spec/drafters.h"
#include "spec/nanospec_vocab.h"
#include "tokenizer/tokenizer.h"

namespace specgen {

namespace {
using clock_type = std::chrono::steady_clock;
double seconds_between(clock_type::time_point a, clock_type::time_point b) {
    return std::chrono::duration<double>(b - a).count();
}
constexpr int kChunk = 128;
constexpr double kMissPowerR = 1.0;  // r of the power-law miss model (geometric schedule)
constexpr double kAcceptDecay = 0.9;  // per round, of the acceptance estimate's sums

uint64_t mix64(uint64_t x) {  // splitmix64 finaliser
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

}  // namespace

void saguaro_reweight(const token_dist& q, int f, float c, token_dist& out) {
    if (!(c >= 0.0f && c <= 1.0f)) throw invalid_argument_error("saguaro_reweight: c must be in [0, 1]");
    const size_t n = q.size();
    if (n == 0) throw invalid_argument_error("saguaro_reweight: empty distribution");
    out.ids.assign(q.ids.begin(), q.ids.end());
    out.probs.assign(q.probs.begin(), q.probs.end());
    if (c == 1.0f || f <= 0) return;
    // Indices of the f most probable entries (ties: lower id first).
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), size_t(0));
    const size_t top = std::min(n, size_t(f));
    auto better = [&](size_t a, size_t b) {
        return q.probs[a] != q.probs[b] ? q.probs[a] > q.probs[b] : q.ids[a] < q.ids[b];
    };
    std::partial_sort(order.begin(), order.begin() + top, order.end(), better);
    double rest = 0, head = 0;
    for (size_t i = 0; i < n; ++i) rest += q.probs[i];
    for (size_t i = 0; i < top; ++i) head += q.probs[order[i]];
    rest -= head;
    const double total = c * head + rest;
    if (!(total > 0)) return;  // c == 0 and the top f cover the support: keep q (documented in ssd.h)
    for (size_t i = 0; i < top; ++i) out.probs[order[i]] *= c;
    for (auto& p : out.probs) p = float(p / total);
    // Drop entries that became zero (c == 0): a token_dist lists only positive probabilities.
    size_t w = 0;
    for (size_t i = 0; i < n; ++i)
        if (out.probs[i] > 0.0f) {
            out.ids[w] = out.ids[i];
            out.probs[w] = out.probs[i];
            ++w;
        }
    out.ids.resize(w);
    out.probs.resize(w);
}

std::vector<int> ssd_fanouts(ssd_schedule schedule, int f0, int K, double a, double r) {
    std::vector<int> f(size_t(std::max(0, K) + 1), f0);
    if (schedule == ssd_schedule::geometric)
        for (int k = 0; k <= K; ++k)
            f[size_t(k)] = std::max(1, int(std::lround(f0 * std::pow(a, k / (1.0 + r)))));
    return f;
}

struct ssd_speculator::entry {
    uint64_t round = 0;  // the round whose verdict it serves
    int k = -1;
    int32_t bonus = -1;
    std::vector<int32_t> tokens;
    std::vector<token_dist> q;
    std::vector<std::vector<int32_t>> cands;
    // Hand-over to the target (all-layers self drafter only, ssd.h): the hidden states and KV rows
    // of the rows the draft forwarded, positions pos0.. (the bonus first).
    int pos0 = -1;
    std::vector<float> hidden, kv;
};

struct ssd_speculator::job {
    std::vector<int32_t> ctx;                 // history (ending with pending) + x_1..x_K
    int n_hist = 0;
    int K = 0;
    std::vector<std::vector<int32_t>> cands;  // [K] known candidates of l_0..l_{K-1} (empty: unknown)
    std::vector<int> fanout;                  // [K+1] F_k for this round's outcomes
    std::vector<int> fanout_next;             // [draft_max+1] F for the branches' own positions
    std::vector<int32_t> grow;                // NanoSpec: ids to add to S before drafting (ssd.h)
    std::vector<float> last_hidden;           // [n_embd] hand-over: x_K's hidden state (empty: unknown)
    double a = 0.5;
    uint64_t round = 0;
};

ssd_speculator::ssd_speculator(const generator_params& params, const model& target, const tokenizer& tok,
                               kv_cache* target_cache)
    : params_(params) {
    if (params_.draft == "self") {
        m_ = &target;
        const int n_layer = target.hp().n_layer;
        n_layers_ = params_.self_layers == 0 ? n_layer : params_.self_layers;
        if (n_layers_ < 1 || n_layers_ > n_layer)
            throw invalid_argument_error("self_layers = " + std::to_string(params_.self_layers) + " out of range [0, " +
                                         std::to_string(n_layer) + "] (0 = all layers)");
    } else if (!params_.draft.empty() && params_.draft != "ngram") {
        draft_file_ = std::make_shared<gguf_file>(params_.draft);
        draft_model_ = std::make_unique<model>(draft_file_);
        tokenizer draft_tok(*draft_file_);
        check_draft_vocabulary(target, tok, *draft_model_, draft_tok, "draft model " + params_.draft);
        m_ = draft_model_.get();
        n_layers_ = m_->hp().n_layer;
    } else {
        throw invalid_argument_error("ssd=True needs a neural drafter: draft='self' or a draft model (got '" +
                                     params_.draft + "')");
    }
    // The drafter's pool also has threads for the target's cores, used only while the target waits
    // for the drafter (resolve()). n_threads_draft 0 was resolved by the generator (its split).
    n_threads_draft_ = std::max(1, params_.n_threads_draft);
    n_threads_lent_ = n_threads_draft_ + std::max(1, params_.n_threads);
    backend_ = make_cpu_backend(n_threads_lent_);
    backend_->set_active_threads(n_threads_draft_);
    eval_ = std::make_unique<evaluator>(*m_, *backend_);
    cache_ = std::make_unique<kv_cache>(m_->hp(), params_.n_ctx);
    ngram_ = make_ngram_drafter(params_.ngram_max, params_.ngram_min);
    fanout_max_ = params_.ssd_fanout;
    int max_entries = (params_.draft_max + 1) * fanout_max_;
    if (params_.ssd_budget >= 0) max_entries = std::min(max_entries, params_.ssd_budget);
    entries_.resize(size_t(max_entries));
    vocab_ = make_draft_vocab(params_, *m_);
    if (vocab_ && vocab_->grows()) s_member_.assign(size_t(m_->hp().n_vocab), 0);
    s_size_ = vocab_ ? vocab_->size() : 0;
    // Same weights, every layer, batch- and thread-invariant kernels: the drafter's rows are the
    // target's, so they can be handed over instead of recomputed.
    if (params_.reuse_draft_hidden && !draft_model_ && n_layers_ == target.hp().n_layer) target_cache_ = target_cache;
}

ssd_speculator::~ssd_speculator() { end(); }

double ssd_speculator::accept_estimate() const {
    return std::min(0.95, std::max(0.05, accepted_sum_ / tried_sum_));
}

uint64_t ssd_speculator::stream_seed(uint64_t tag, int k, int32_t bonus) const {
    return mix64(mix64(mix64(seed_ ^ 0x55D5A6A0ull) ^ tag) ^ (uint64_t(uint32_t(k)) << 32 | uint32_t(bonus)));
}

bool ssd_speculator::vocab_grows() const { return vocab_ && vocab_->grows(); }

void ssd_speculator::begin(const std::vector<int32_t>& prompt, const sampling_params& sp, uint64_t seed,
                           verify_method method, const int32_t* topk, int64_t n_topk_rows) {
    end();
    // The worker is joined: S is the main thread's until the worker starts below.
    grow_pending_.clear();
    if (vocab_grows()) {
        vocab_->reset();
        vocab_->seed(prompt.data(), int64_t(prompt.size()), topk, n_topk_rows);
        std::fill(s_member_.begin(), s_member_.end(), uint8_t(0));
        for (int32_t i = 0; i < vocab_->size(); ++i) s_member_[size_t(vocab_->ids()[i])] = 1;
        s_size_ = vocab_->size();
    }
    sp_ = sp;
    seed_ = seed;
    method_ = method;
    round_ = 0;
    hit_ = -1;
    have_verdict_ = false;
    n_entries_ = 0;
    error_ = nullptr;
    cached_.clear();
    cur_cands_.clear();
    ngram_->begin(prompt);
    stop_ = false;
    busy_ = false;
    interrupt_.store(false);
    worker_ = std::thread([this] { worker_loop(); });
}

void ssd_speculator::end() {
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

void ssd_speculator::grow_vocab(const int32_t* topk, int64_t n_rows, const int32_t* emitted, int64_t n_emitted,
                                const int32_t* drafted, int64_t n_drafted) {
    if (!vocab_grows()) return;
    // The main thread's copy of the set rule (nanospec_vocab::add): new ids in grow()'s order until
    // the capacity. Applying grow_pending_ with add() later gives the same S.
    grow_order_.clear();
    nanospec_vocab::growth_order(topk, vocab_->top_k(), n_rows, emitted, n_emitted, drafted, n_drafted, grow_order_);
    const int64_t n_vocab = int64_t(s_member_.size());
    for (int32_t id : grow_order_) {
        if (id < 0 || id >= n_vocab)
            throw invalid_argument_error("nanospec: token id " + std::to_string(id) + " out of range");
        if (s_member_[size_t(id)] || s_size_ >= vocab_->capacity()) continue;
        s_member_[size_t(id)] = 1;
        s_size_ += 1;
        grow_pending_.push_back(id);
    }
}

void ssd_speculator::snapshot_kv(int pos0, const std::vector<float>& hidden, std::vector<float>& kv) const {
    const int n_rows = int(hidden.size() / size_t(m_->hp().n_embd));
    kv.resize(2 * size_t(m_->hp().n_layer) * size_t(n_rows) * cache_->row_floats());
    cache_->read_rows(pos0, n_rows, kv.data());
}

void ssd_speculator::hand_over(int pos0, const std::vector<float>& hidden, const std::vector<float>& kv,
                               draft_proposal& out) const {
    const int n_embd = m_->hp().n_embd, n_rows = int(hidden.size() / size_t(n_embd));
    target_cache_->write_rows(pos0, n_rows, kv.data());
    // The rows of [pending, x_1..x_g] the target would compute: at most g + 1 (more when max_n cut the entry).
    const int n = std::min(n_rows, int(out.tokens.size()) + 1);
    out.target_hidden.assign(hidden.begin(), hidden.begin() + size_t(n) * n_embd);
    out.n_target_hidden = n;
}

void ssd_speculator::apply_growth(const std::vector<int32_t>& ids) {
    if (ids.empty()) return;
    vocab_->add(ids.data(), int64_t(ids.size()));
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

template <class Abort>
bool ssd_speculator::forward_context(const std::vector<int32_t>& ctx, const std::vector<int>& rows, Abort should_abort,
                                     std::vector<float>* hidden_out, bool head) {
    const int n = int(ctx.size());
    size_t lcp = 0;
    const size_t lim = std::min(cached_.size(), ctx.size());
    while (lcp < lim && cached_[lcp] == ctx[lcp]) ++lcp;
    int n_keep = std::min<int>(int(lcp), n - 1);
    if (!rows.empty()) n_keep = std::min(n_keep, rows.front());
    cached_.resize(size_t(n_keep));
    if (logits_rows_.size() < rows.size()) logits_rows_.resize(rows.size());
    const int n_embd = m_->hp().n_embd;
    size_t next_row = 0;
    for (int off = n_keep; off < n; off += kChunk) {
        if (should_abort()) return false;
        const int m = std::min(kChunk, n - off);
        eval_->forward(*cache_, ctx.data() + off, m, off, n_layers_);
        cached_.insert(cached_.end(), ctx.begin() + off, ctx.begin() + off + m);
        for (; next_row < rows.size() && rows[next_row] < off + m; ++next_row) {
            const float* h = eval_->hidden() + size_t(rows[next_row] - off) * n_embd;
            if (hidden_out) hidden_out->insert(hidden_out->end(), h, h + n_embd);
            if (head) head_row(h, logits_rows_[next_row]);
        }
    }
    return true;
}

void ssd_speculator::head_row(const float* h, std::vector<float>& logits) {
    // The head over S (NanoSpec / FR-Spec) or over the whole vocabulary.
    logits.resize(size_t(vocab_ ? vocab_->size() : m_->hp().n_vocab));
    const auto t_head = clock_type::now();
    if (vocab_) vocab_->logits(*backend_, h, 1, logits.data());
    else eval_->logits(h, 1, logits.data());
    head_seconds_ += seconds_between(t_head, clock_type::now());
}

template <class Abort>
bool ssd_speculator::draft(const std::vector<int32_t>& ctx, int n, float p_min, rng& gen, std::vector<int32_t>& tokens,
                           std::vector<token_dist>& q, std::vector<std::vector<int32_t>>& cands,
                           const std::vector<int>& fanout, Abort should_abort, std::vector<float>* hidden) {
    tokens.clear();
    if (hidden) hidden->clear();
    n = std::min(n, cache_->n_ctx() - int(ctx.size()));
    if (n <= 0) return true;
    if (q.size() < size_t(n)) q.resize(size_t(n));
    if (cands.size() < size_t(n)) cands.resize(size_t(n));
    work_.assign(ctx.begin(), ctx.end());
    // Over S (constant during a draft: growth is applied only between drafts, ssd.h) or everything.
    const int n_logits = vocab_ ? int(vocab_->size()) : m_->hp().n_vocab;
    const int32_t* ids = vocab_ ? vocab_->ids() : nullptr;
    std::vector<int> row(1);
    for (int i = 0; i < n; ++i) {
        row[0] = int(work_.size()) - 1;
        if (!forward_context(work_, row, should_abort, hidden, true)) return false;
        const float* logits = logits_rows_[0].data();
        // Over S this is the top probability of q_S's softmax, as in drafter_neural.cpp.
        if (p_min > 0 && top_probability(logits, n_logits) < p_min) break;
        top_candidates(logits, n_logits, ids, cands[size_t(i)]);
        // q_S: the processed distribution over S (zero outside it); Saguaro reweights q_S.
        processor_.process(logits, ids, n_logits, sp_, work_.data(), work_.size(), q_raw_);
        const int f = fanout.empty() ? fanout_max_ : fanout[std::min(size_t(i), fanout.size() - 1)];
        saguaro_reweight(q_raw_, f, params_.saguaro_c, q[size_t(i)]);
        const int32_t x = sample_token(q[size_t(i)], gen);
        tokens.push_back(x);
        work_.push_back(x);
    }
    // For the hand-over, x_n's row too (no head): the verification then forwards nothing, and the
    // next job takes l_n from this hidden state (ssd.h). A p_min stop has forwarded it already.
    if (hidden && tokens.size() == size_t(n)) {
        row[0] = int(work_.size()) - 1;
        if (!forward_context(work_, row, should_abort, hidden, false)) return false;
    }
    return true;
}

void ssd_speculator::acquire(const std::vector<int32_t>& history, int max_n, float p_min, draft_proposal& out,
                             generation_stats& stats) {
    out.tokens.clear();
    if (max_n <= 0) {
        cur_cands_.clear();
        return;
    }
    if (have_verdict_ && hit_ >= 0) {
        const entry& e = entries_[size_t(hit_)];
        const size_t g = std::min(e.tokens.size(), size_t(max_n));
        out.tokens.assign(e.tokens.begin(), e.tokens.begin() + g);
        if (out.q.size() < g) out.q.resize(g);
        cur_cands_.resize(g);
        for (size_t i = 0; i < g; ++i) {
            out.q[i] = e.q[i];
            cur_cands_[i] = e.cands[i];
        }
        if (target_cache_ && !e.hidden.empty() && e.pos0 == int(history.size()) - 1)
            hand_over(e.pos0, e.hidden, e.kv, out);
        stats.ssd_hits += 1;
        return;
    }
    if (have_verdict_) stats.ssd_misses += 1;
    const auto t0 = clock_type::now();
    if (params_.ssd_backup == ssd_backup_mode::fast) {
        rng unused(0);
        ngram_->observe(history);
        ngram_->propose(history, max_n, sp_, p_min, unused, out);
        cur_cands_.assign(out.tokens.size(), {});
        stats.draft_seconds += seconds_between(t0, clock_type::now());
        return;
    }
    {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return !busy_; });
        if (error_) std::rethrow_exception(error_);
    }
    const auto t1 = clock_type::now();
    stats.ssd_wait_seconds += seconds_between(t0, t1);
    // The worker is idle: the drafter (and S) is ours until launch().
    apply_growth(grow_pending_);
    grow_pending_.clear();
    rng gen(stream_seed(round_ + 1, -1, -1));
    const std::vector<int> fan = ssd_fanouts(params_.ssd_fanout_schedule, params_.ssd_fanout, params_.draft_max,
                                             accept_estimate(), kMissPowerR);
    head_seconds_ = 0;
    draft(history, max_n, p_min, gen, out.tokens, out.q, cur_cands_, fan, [] { return false; },
          target_cache_ ? &backup_hidden_ : nullptr);
    cur_cands_.resize(out.tokens.size());
    if (target_cache_ && !backup_hidden_.empty()) {
        const int pos0 = int(history.size()) - 1;
        snapshot_kv(pos0, backup_hidden_, backup_kv_);
        hand_over(pos0, backup_hidden_, backup_kv_, out);
    }
    stats.draft_seconds += seconds_between(t1, clock_type::now());
    stats.draft_head_seconds += head_seconds_;
}

void ssd_speculator::launch(const std::vector<int32_t>& history, const draft_proposal& prop, int gamma) {
    auto j = std::make_unique<job>();
    j->ctx.assign(history.begin(), history.end());
    j->ctx.insert(j->ctx.end(), prop.tokens.begin(), prop.tokens.begin() + gamma);
    j->n_hist = int(history.size());
    j->K = gamma;
    j->cands.resize(size_t(gamma));
    for (int i = 0; i < gamma && i < int(cur_cands_.size()); ++i) j->cands[size_t(i)] = cur_cands_[size_t(i)];
    j->a = accept_estimate();
    j->fanout = ssd_fanouts(params_.ssd_fanout_schedule, params_.ssd_fanout, gamma, j->a, kMissPowerR);
    j->fanout_next = ssd_fanouts(params_.ssd_fanout_schedule, params_.ssd_fanout, params_.draft_max, j->a, kMissPowerR);
    j->round = ++round_;
    const size_t n_embd = size_t(m_->hp().n_embd);
    if (target_cache_ && prop.n_target_hidden > gamma)  // row gamma is x_gamma's (pending's for gamma = 0)
        j->last_hidden.assign(prop.target_hidden.begin() + gamma * n_embd, prop.target_hidden.begin() + (gamma + 1) * n_embd);
    j->grow.swap(grow_pending_);
    grow_pending_.clear();
    last_gamma_ = gamma;
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (error_) std::rethrow_exception(error_);
        // A job the worker never picked up (it was still finishing an older one) is replaced; its
        // growth of S must not be lost: it goes first.
        if (next_job_ && !next_job_->grow.empty()) j->grow.insert(j->grow.begin(), next_job_->grow.begin(), next_job_->grow.end());
        next_job_ = std::move(j);
        n_entries_ = 0;
        busy_ = true;
        verdict_posted_ = false;
        hit_ = -1;
        have_verdict_ = false;
        t_launch_ = clock_type::now();
        interrupt_.store(true);  // a job still finishing an aborted forward stops at its next check
    }
    cv_.notify_all();
}

void ssd_speculator::resolve(int n_accepted, int32_t next_token, generation_stats& stats) {
    const auto t0 = clock_type::now();
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
    hit_ = -1;
    for (int i = 0; i < n_entries_; ++i)
        if (entries_[size_t(i)].round == round_ && entries_[size_t(i)].k == n_accepted && entries_[size_t(i)].bonus == next_token) hit_ = i;
    have_verdict_ = true;
    if (last_gamma_ > 0) {  // a round is k successes, then one failure unless all were accepted
        accepted_sum_ = kAcceptDecay * accepted_sum_ + n_accepted;
        tried_sum_ = kAcceptDecay * tried_sum_ + n_accepted + (n_accepted < last_gamma_ ? 1 : 0);
    }
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
            n_entries_ = 0;
            interrupt_.store(verdict_posted_);  // the verdict may already be in
        }
        const auto t0 = clock_type::now();
        try {
            run_job(*j);
        } catch (...) {
            std::lock_guard<std::mutex> lock(mu_);
            error_ = std::current_exception();
            cached_.clear();  // a forward may have stopped half-way
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
    apply_growth(j.grow);  // first, whatever happens next: S is fixed for the rest of the job
    const int K = j.K;
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
    if (!rows.empty() &&
        !forward_context(j.ctx, rows, [&] { return interrupt_.load(std::memory_order_relaxed); }, nullptr, true))
        return;
    if (have_last) {
        row_of[size_t(K)] = int(rows.size());
        if (logits_rows_.size() <= rows.size()) logits_rows_.resize(rows.size() + 1);
        head_row(j.last_hidden.data(), logits_rows_[rows.size()]);
    }
    const int n_logits = vocab_ ? int(vocab_->size()) : m_->hp().n_vocab;
    const int32_t* ids = vocab_ ? vocab_->ids() : nullptr;
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
            top_candidates(logits_rows_[size_t(row_of[size_t(k)])].data(), n_logits, ids, computed);
        else
            src = &j.cands[size_t(k)];  // k < K: recorded when x_{k+1} was drafted
        const double p_k = k < K ? std::pow(a, k) * (1 - a) : std::pow(a, K);
        int rank = 0;
        for (int32_t t : *src) {
            if (rank >= j.fanout[size_t(k)]) break;
            if (k < K && method_ == verify_method::token && t == j.ctx[size_t(j.n_hist + k)]) continue;
            branches.push_back({p_k / double((rank + 1) * (rank + 1)), k, t});
            ++rank;
        }
    }
    std::stable_sort(branches.begin(), branches.end(), [](const branch& x, const branch& y) { return x.score > y.score; });
    size_t limit = std::min(branches.size(), entries_.size());
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
            slot = n_entries_;
        }
        entry& e = entries_[size_t(slot)];
        ctx_b.assign(j.ctx.begin(), j.ctx.begin() + j.n_hist + br.k);
        ctx_b.push_back(br.bonus);
        rng gen(stream_seed(j.round, br.k, br.bonus));
        auto abort = [&] {
            if (!interrupt_.load(std::memory_order_relaxed)) return false;
            std::lock_guard<std::mutex> lock(mu_);
            if (stop_ || next_job_) return true;
            return verdict_posted_ && !(verdict_k_ == br.k && verdict_y_ == br.bonus);
        };
        const bool done = draft(ctx_b, params_.draft_max, params_.draft_p_min, gen, e.tokens, e.q, e.cands,
                                j.fanout_next, abort, target_cache_ ? &e.hidden : nullptr);
        if (done && target_cache_) {  // still "drafting (k, bonus)": a target waiting for this hit waits for this too
            e.pos0 = int(ctx_b.size()) - 1;
            snapshot_kv(e.pos0, e.hidden, e.kv);
        }
        {
            std::lock_guard<std::mutex> lock(mu_);
            cur_k_ = -1;
            cur_bonus_ = -1;
            if (done) {
                e.round = j.round;
                e.k = br.k;
                e.bonus = br.bonus;
                n_entries_ = slot + 1;
                branches_ += 1;
            }
        }
        cv_.notify_all();
        if (!done) return;
    }
}

}  // namespace specgen
