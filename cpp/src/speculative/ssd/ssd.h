// Speculative speculative decoding (Saguaro, ALGORITHMS.md section 4): the drafter works on its own
// thread and backend WHILE the target verifies, pre-drafting round t+1 for the likely verdicts of
// round t into a speculation cache keyed by (accepted length k, bonus token).
//
// Notation as in verify.h: round t verifies x_1..x_K (proposal q'_1..q'_K) after `pending`; its verdict
// is (k, y): x_1..x_k accepted, y the correction (k < K) or bonus (k == K).
//
// One round, main thread (engine/generator.cpp step() calls acquire -> launch -> resolve):
//   acquire(): the proposal for this round: the cache entry of the last verdict (hit), else the
//              backup: `neural` drafts K tokens now with the SSD drafter, `fast` proposes n-gram point
//              masses.
//   launch():  hands [history, x_1..x_K] to the worker and returns at once; the target verifies.
//   resolve(): posts the verdict (k, y). The worker stops at its next check unless it is drafting
//              the branch (k, y), which it finishes (the target waits for that: ssd_wait_seconds).
// Worker, per round:
//   A. one forward of the drafter over the K+1 positions [pending, x_1..x_K] (only the rows its own
//      KV cache lacks), giving l_0..l_K. l_k for k < K is the drafter's distribution at x_{k+1}: when
//      the proposal came from this drafter its candidates were recorded while drafting, so only l_K's
//      head row is computed; after an n-gram proposal all K+1 head rows are.
//   B. for each outcome k the bonus candidates are the top-F_k tokens of l_k (raw logit order; over
//      S with NanoSpec / FR-Spec),
//      excluding x_{k+1} when k < K under token-wise verification (its residual is zero there). Under
//      block verification the next token CAN equal x_{k+1} (verify.h), so it is not excluded.
//      Branches (k, bonus) are drafted one after another, most likely first (score P(k) / rank^2 with
//      P(k) from the measured acceptance), until the verdict arrives or the budget is spent.
//
// Branches are drafted SEQUENTIALLY, not as one batched tree-masked forward: the backend's attention
// takes positions = cache rows (no tree mask), and on CPU a batch of B rows costs about B single rows
// (compute-bound), so batching would buy little here. Sequential branches can stop at any forward
// when the verdict arrives, which a batch cannot.
//
// KV cache: the SSD drafter owns its cache (the `self` drafter computes its own first L layers on the
// shared, immutable target weights; a `model` drafter uses its own file). Branches are drafted in
// place at the positions they would occupy; `cached_` records which tokens the cache rows hold, and
// every forward first keeps only the longest common prefix with the context it needs (as in
// speculative/drafters/neural.cpp), so a branch that overwrote rows of the main line is simply recomputed next
// time (a few rows, batched). No rows are copied between branches, and a hit costs no KV work beyond
// those rows.
//
// Hand-over (draft "self" with every layer, reuse_draft_hidden): that drafter runs the target's own
// layers on the target's weights, and the kernels are batch- and thread-invariant, so the hidden
// states and KV rows it computes for [bonus, x'_1..x'_g] are exactly the target's. Every draft
// (branch or neural backup) also forwards its last token x'_g (body only), records the hidden
// states of its g+1 rows and a copy of their KV rows (taken by the drafter's owner right after the
// draft, before any other branch overwrites them in place); acquire() writes those KV rows into the
// target's cache at the positions the target would write them and hands the hidden states over in
// draft_proposal::target_hidden, so the verification runs no layer at all, only the head over the
// g+1 rows, and the next job computes l_g from x'_g's hidden state instead of forwarding it again.
// Only main writes the target's cache, and only between verifications. SPECGEN_CHECK_REUSE=1 recomputes
// every such verification with a plain forward and raises unless the logits are bit-identical
// (tests/test_ssd.py).
//
// NanoSpec / FR-Spec (params.nanospec, params.frspec; ALGORITHMS.md section 3, speculative/draft_vocab.h):
// the speculator owns the draft head's token set S over its drafter's head, and every draft row it
// computes (the l_k of step A, each drafted position of a branch or of the neural backup) is the head
// over S only, exactly as speculative/drafters/neural.cpp: the proposal q_S is the processed softmax over S (zero
// outside it), Saguaro's reweighting applies to q_S, and the bonus candidates of outcome k are the
// top-F_k of l_k over S. S follows the sequential rule: seeded by begin() from the prompt and the
// target's top-k at the forwarded prompt rows; after each verification the generator hands
// grow_vocab() the target's top-k on the emitted path, the emitted and the drafted ids. S is
// drafter state, so the main thread does not add to it while the worker runs: grow_vocab() only
// queues the ids (those new to S, in grow()'s order, up to the capacity: the main thread keeps
// S's membership as it will be once the queue is applied, which is also what vocab_size() and the
// stats report), and the queue is applied by whoever owns the drafter next: the worker at the start
// of the next job (launch() hands it over with the job), or acquire() before a neural backup (the
// worker is idle there). So S is constant during a job and during a backup draft, and the drafts
// of round t+1 (backup or job) see S grown by every verdict up to round t, as in sequential decoding;
// only the branches drafted during round t's verification lack round t's growth (they were drafted
// before it was known).
//
// Losslessness: each branch is sampled with its own rng stream (seeded by request seed, round, k,
// bonus), independent of the verifier's coins, and whether a branch is used depends only on the
// verdict and on which branches STARTED before it (never on the branch's own tokens: a started hit
// is always finished). So a hit's x'_i ~ q'_i exactly, and the verifier gets that q'_i (Saguaro:
// q' is the reweighted distribution actually sampled from). With NanoSpec, each q'_i is over the S
// of the draft that sampled it and is stored with the entry; S growing later (never shrinking, never
// during a draft) does not change a stored q'_i, and q'_i = 0 outside that S is covered by the
// verifier's residual. S depends only on verdicts and proposals already verified, never on a
// branch's own tokens. Greedy output equals AR token for token.
// Sampled output follows the AR distribution exactly but, unlike sequential SD, is not reproducible
// from the seed alone: which rounds hit depends on timing.
//
// Threads: one worker std::thread per request, started by begin() and joined by end() / the
// destructor. The main thread touches the drafter's evaluator, cache, S and entries only while the
// worker is idle; the hand-off is one mutex + condition variable. The drafter's thread pool has
// n_threads_draft threads plus one per target thread; the extra ones sleep except while resolve()
// waits for a hit branch, when the target's cores would idle (thread_pool::set_active_threads). On
// 2 cores that measured +0-8% tokens/s (tools/bench_ssd.py configurations, 1 + 1 threads).
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/params.h"
#include "engine/stats.h"
#include "sampling/rng.h"
#include "sampling/sampling.h"
#include "speculative/drafters/drafter.h"
#include "speculative/verify/verify.h"

namespace specgen {

class model;
class tokenizer;
class kv_cache;
class evaluator;
class gguf_file;
class draft_vocab;
struct backend;

// Saguaro sampling (section 4.5): out(t) proportional to c * q(t) for the f most probable tokens of q
// (ties: lower id first), q(t) otherwise. c in [0, 1]. When that leaves no mass (c == 0 and the top f
// cover q's support) the reweighting is skipped and out = q, so out is always a distribution that
// can be sampled. The result lists the same ids as q (zero-probability entries dropped).
void saguaro_reweight(const token_dist& q, int f, float c, token_dist& out);

// Fan-out per outcome k = 0..K. uniform: F_k = f0. geometric (the paper's schedule for a power-law
// miss model 1 - p_hit(F) = F^-r): F_k = max(1, round(f0 * a^(k / (1 + r)))).
std::vector<int> ssd_fanouts(ssd_schedule schedule, int f0, int K, double a, double r);

class ssd_speculator {
public:
    // Loads the drafter (params.draft: "self" or a draft GGUF path) with its own backend of
    // n_threads_draft threads and its own KV cache. Throws invalid_argument_error for "ngram" or "".
    // target_cache: the target's KV cache (host memory) for the hand-over of an all-layers self
    // drafter's rows (see the top); null never hands over.
    ssd_speculator(const generator_params& params, const model& target, const tokenizer& tok,
                   kv_cache* target_cache = nullptr);
    ~ssd_speculator();
    ssd_speculator(const ssd_speculator&) = delete;
    ssd_speculator& operator=(const ssd_speculator&) = delete;

    // A request starts (prompt = its history, the last token pending): resets the cache and S,
    // seeds NanoSpec's S from the prompt and topk ([n_topk_rows, k]: the target's top-k ids at the
    // forwarded prompt rows, see vocab_grows()) and starts the worker thread.
    void begin(const std::vector<int32_t>& prompt, const sampling_params& sp, uint64_t seed, verify_method method,
               const int32_t* topk = nullptr, int64_t n_topk_rows = 0);
    // Stops and joins the worker (idempotent). Called when a request finishes or is cancelled.
    void end();

    // Fills `out` with this round's proposal (at most max_n tokens, max_n >= 0) for `history`.
    void acquire(const std::vector<int32_t>& history, int max_n, float p_min, draft_proposal& out,
                 generation_stats& stats);
    // Starts drafting round t+1 concurrently; `prop` holds round t's x_1..x_gamma.
    void launch(const std::vector<int32_t>& history, const draft_proposal& prop, int gamma);
    // Posts the verdict of the launched round and waits until the worker is not drafting its branch.
    void resolve(int n_accepted, int32_t next_token, generation_stats& stats);

    // NanoSpec / FR-Spec (main thread). vocab_grows(): S is NanoSpec's in-context set, so begin() and
    // grow_vocab() want the target's top-k rows. vocab_size(): |S| including the queued growth (0 with
    // the full head). grow_vocab(): after verifying round t (before resolve), the growth of
    // draft_vocab::grow() (topk: [n_rows, k] target rows on the emitted path; emitted x_1..x_k, y;
    // drafted x_1..x_g), queued for the drafter (see the comment at the top).
    bool vocab_grows() const;
    int64_t vocab_size() const { return s_size_; }
    void grow_vocab(const int32_t* topk, int64_t n_rows, const int32_t* emitted, int64_t n_emitted,
                    const int32_t* drafted, int64_t n_drafted);

private:
    struct entry;
    struct job;
    void worker_loop();
    void run_job(const job& j);
    // Drafts up to n tokens after ctx (its last token not yet forwarded) with rng `gen`, writing
    // tokens, proposals q' and per-position candidates (raw top logits); stops early at p_min or
    // when should_abort() says so (then returns false). hidden (when not null): the hidden states of
    // [ctx's last token, x_1..x_m] (m = the tokens drafted, x_m's forwarded for it), [m + 1, n_embd].
    template <class Abort>
    bool draft(const std::vector<int32_t>& ctx, int n, float p_min, rng& gen, std::vector<int32_t>& tokens,
               std::vector<token_dist>& q, std::vector<std::vector<int32_t>>& cands, const std::vector<int>& fanout,
               Abort should_abort, std::vector<float>* hidden);
    // Forwards ctx rows [n_keep, ctx.size()) after truncating cached_ to the LCP; for each row r in
    // `rows` (ascending) writes raw logits to logits_rows_[i] (when head) and appends its hidden
    // state to hidden_out (when not null).
    template <class Abort>
    bool forward_context(const std::vector<int32_t>& ctx, const std::vector<int>& rows, Abort should_abort,
                         std::vector<float>* hidden_out, bool head);
    // logits = the draft head (over S, or the full vocabulary) of one hidden state; adds to head_seconds_.
    void head_row(const float* h, std::vector<float>& logits);
    // The hand-over. snapshot_kv: the drafter's KV rows of the rows whose hidden states `hidden`
    // holds, from pos0 (kv_cache::read_rows' layout). hand_over: writes them into the target's cache
    // and the hidden states into out.target_hidden.
    void snapshot_kv(int pos0, const std::vector<float>& hidden, std::vector<float>& kv) const;
    void hand_over(int pos0, const std::vector<float>& hidden, const std::vector<float>& kv, draft_proposal& out) const;
    // The fanout_max + 1 largest of logits[0, n) as token ids (ids[i], or i when ids is null).
    void top_candidates(const float* logits, int n, const int32_t* ids, std::vector<int32_t>& out) const;
    // Adds queued growth to S (the drafter's owner only: the worker in a job, main while idle).
    void apply_growth(const std::vector<int32_t>& ids);
    uint64_t stream_seed(uint64_t tag, int k, int32_t bonus) const;

    generator_params params_;
    std::shared_ptr<const gguf_file> draft_file_;
    std::unique_ptr<model> draft_model_;  // null for "self"
    const model* m_;
    int n_layers_;
    std::unique_ptr<backend> backend_;  // n_threads_draft_ + the target's n_threads (lent in resolve())
    int n_threads_draft_ = 1;
    int n_threads_lent_ = 1;            // n_threads_draft_ + the target's: the pool's size
    std::unique_ptr<evaluator> eval_;
    std::unique_ptr<kv_cache> cache_;
    std::unique_ptr<drafter> ngram_;  // fast backup
    std::unique_ptr<draft_vocab> vocab_;  // S over m_'s head (null: full head); drafter state
    kv_cache* target_cache_ = nullptr;       // set: hand drafted rows over to the target (all-layers self)
    int fanout_max_;

    // Request state (main thread between launches; worker reads copies through `job`).
    sampling_params sp_;
    uint64_t seed_ = 0;
    verify_method method_ = verify_method::block;
    uint64_t round_ = 0;
    // Per-token acceptance a (P(outcome k) = a^k (1 - a), a^K for k = K: branch order, geometric F_k):
    // the maximum-likelihood estimate over recent rounds, accepted / (accepted + rejections), with
    // exponentially decayed sums. Kept across requests (prior 0.5): it orders work, never changes output.
    double accepted_sum_ = 1, tried_sum_ = 2;
    double accept_estimate() const;
    int last_gamma_ = 0;
    std::vector<std::vector<int32_t>> cur_cands_;  // candidates of the proposal being verified
    int hit_ = -1;                  // entry index of the last verdict's hit, -1 miss
    bool have_verdict_ = false;
    std::vector<uint8_t> s_member_;       // [n_vocab] NanoSpec: S's membership once grow_pending_ is applied
    int64_t s_size_ = 0;                  // |S| once grow_pending_ is applied
    std::vector<int32_t> grow_pending_;   // ids to add to S, in order, not yet handed to a job
    std::vector<int32_t> grow_order_;     // grow_vocab()'s scratch

    // Drafter scratch (worker while busy, main while idle).
    std::vector<int32_t> cached_;   // tokens whose KV rows the drafter's cache holds (a prefix)
    std::vector<int32_t> work_;
    std::vector<std::vector<float>> logits_rows_;
    logits_processor processor_;
    double head_seconds_ = 0;       // time in the draft head (the backup's: draft_head_seconds)
    token_dist q_raw_;
    std::vector<float> backup_hidden_, backup_kv_;  // the neural backup's hand-over (main thread)

    // Speculation cache: fixed storage, n_entries_ used (guarded by mu_ while the worker runs).
    std::vector<entry> entries_;
    int n_entries_ = 0;

    // Hand-off.
    std::mutex mu_;
    std::condition_variable cv_;
    std::thread worker_;
    std::unique_ptr<job> next_job_;
    bool busy_ = false;
    bool stop_ = false;
    bool verdict_posted_ = false;
    int verdict_k_ = -1;
    int32_t verdict_y_ = -1;
    int cur_k_ = -1;                 // branch the worker is drafting, -1 none
    int32_t cur_bonus_ = -1;
    std::atomic<bool> interrupt_{false};  // verdict posted, new job or stop: check at the next forward
    std::exception_ptr error_;
    // Counters written by the worker under mu_.
    int64_t branches_ = 0;
    double overlap_seconds_ = 0;
    std::chrono::steady_clock::time_point t_launch_, t_verdict_;
};

}  // namespace specgen
