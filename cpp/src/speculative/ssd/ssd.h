// Speculative speculative decoding (Saguaro, docs/ALGORITHMS.md section 4): the drafter works on its own
// thread and backend WHILE the target verifies, pre-drafting round t+1 for the likely verdicts of
// round t into a speculation cache keyed by (accepted length k, bonus token).
//
// Notation as in speculative/verify/verify.h: round t verifies x_1..x_K (proposal q'_1..q'_K) after `pending`; its verdict
// is (k, y): x_1..x_k accepted, y the correction (k < K) or bonus (k == K).
//
// One round, main thread (the speculator interface, speculative/speculator.h):
//   propose() = acquire: the proposal for this round: the cache entry of the last verdict (hit),
//              else the backup: `neural` drafts K tokens now with the SSD drafter, `fast` proposes
//              n-gram point masses; then launch: hands [history, x_1..x_K] to the worker and returns
//              at once; the target verifies.
//   observe() = resolve: posts the verdict (k, y). The worker stops at its next check unless it is
//              drafting the branch (k, y), which it finishes (the target waits for that: ssd_wait_seconds).
// Draft length: K follows the adaptive gamma of the sequential speculator (speculator.h draft_length),
// and a branch for outcome k drafts the gamma that verdict k gives the next round.
// Worker, per round:
//   A. one forward of the drafter over the K+1 positions [pending, x_1..x_K] (only the rows its own
//      KV cache lacks), giving l_0..l_K. l_k for k < K is the drafter's distribution at x_{k+1}: when
//      the proposal came from this drafter its candidates were recorded while drafting, so only l_K's
//      head row is computed; after an n-gram proposal all K+1 head rows are.
//   B. for each outcome k the bonus candidates are the top-F_k tokens of l_k (raw logit order; over
//      S with NanoSpec / FR-Spec),
//      excluding x_{k+1} when k < K under token-wise verification (its residual is zero there). Under
//      block verification the next token CAN equal x_{k+1} (speculative/verify/verify.h), so it is not excluded.
//      Branches (k, bonus) are drafted one after another, most likely first (score P(k) / rank^2 with
//      P(k) from the measured acceptance), until the verdict arrives or the budget is spent.
//
// Branches are drafted SEQUENTIALLY, not as one batched tree-masked forward: the backend's attention
// takes positions = cache rows (no tree mask), and on CPU a batch of B rows costs about B single rows
// (compute-bound), so batching would buy little here. Sequential branches can stop at any forward
// when the verdict arrives, which a batch cannot.
//
// Drafter: the neural drafter of speculative/drafters/neural.h (the same loader, vocabulary check
// and draft loop as the sequential one), with a KV cache and backend of its own (the `self` drafter
// computes its own first L layers on the shared, immutable target weights; a `model` drafter uses its
// own file). Branches are drafted in place at the positions they would occupy; the drafter records
// which tokens its cache rows hold, and every forward first keeps only the longest common prefix
// with the context it needs, so a branch that overwrote rows of the main line is simply recomputed next
// time (a few rows, batched). No rows are copied between branches, and a hit costs no KV work beyond
// those rows.
//
// Hand-over (draft "self" with every layer, reuse_draft_hidden): that drafter runs the target's own
// layers on the target's weights, and the kernels are batch- and thread-invariant, so the hidden
// states and KV rows it computes for [bonus, x'_1..x'_g] are exactly the target's. Every draft
// (branch or neural backup) also forwards its last token x'_g (body only), records the hidden
// states of its g+1 rows and a copy of their KV rows (taken by the drafter's owner right after the
// draft, before any other branch overwrites them in place); acquire() writes those KV rows into the
// target's cache at the positions the target would write them and hands the hidden states over as
// rows already forwarded (proposal::n_forwarded; speculative/ssd/handover.h), so the verification runs no layer at all, only the head over the
// g+1 rows, and the next job computes l_g from x'_g's hidden state instead of forwarding it again.
// Only main writes the target's cache, and only between verifications. SPECGEN_CHECK_REUSE=1 recomputes
// every such verification with a plain forward and raises unless the logits are bit-identical
// (tests/test_ssd.py).
//
// NanoSpec / FR-Spec (params.nanospec, params.frspec; docs/ALGORITHMS.md section 3, speculative/draft_vocab.h):
// the speculator owns the draft head's token set S over its drafter's head, and every draft row it
// computes (the l_k of step A, each drafted position of a branch or of the neural backup) is the head
// over S only, exactly as speculative/drafters/neural.cpp: the proposal q_S is the processed softmax over S (zero
// outside it), Saguaro's reweighting applies to q_S, and the bonus candidates of outcome k are the
// top-F_k of l_k over S. S follows the sequential rule (speculative/nanospec.h): seeded from the prompt
// and the target's top-k at the forwarded prompt rows; after each verification it gains the target's
// top-k on the emitted path, the emitted and the drafted ids. S is drafter state, so the main
// thread does not add to it while the worker runs: observe() only stages the ids
// (draft_vocab::stage_growth: those new to S, in grow()'s order, up to the capacity; the staged
// size is what the stats report), and the queue is applied by whoever owns the drafter next: the worker at the start
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
// destructor. With no drafter thread (n_threads_draft resolved to 0: SSD at n_threads = 1, see
// engine/generator.cpp) there is no worker: nothing is drafted concurrently, every round drafts on
// the caller's thread after the verdict (the backup, counted as a miss), with the target's threads. The main thread touches the drafter's evaluator, cache, S and entries only while the
// worker is idle; the hand-off is one mutex + condition variable. The drafter's thread pool has
// n_threads_draft threads plus one per target thread; the extra ones sleep except while resolve()
// waits for a hit branch, when the target's cores would idle (thread_pool::set_active_threads). On
// 2 cores that measured +0-8% tokens/s (SSD bench configurations, 1 + 1 threads).
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

#include "speculative/drafters/drafter.h"
#include "speculative/drafters/neural.h"
#include "speculative/speculator.h"
#include "speculative/ssd/cache.h"
#include "speculative/ssd/saguaro.h"

namespace specgen {

class draft_vocab;
class nanospec;

class ssd_speculator final : public speculator {
public:
    // The drafter (params.draft: "self" or a draft GGUF path; t.draft when shared, else
    // load_neural_weights) with its own backend and KV cache. Throws invalid_argument_error for "ngram"
    // or "". The target's KV cache (t.cache) takes the hand-over of an all-layers self drafter's rows
    // when it is in host memory.
    ssd_speculator(const generator_params& params, const speculation_target& t);
    ~ssd_speculator() override;
    ssd_speculator(const ssd_speculator&) = delete;
    ssd_speculator& operator=(const ssd_speculator&) = delete;

    // Resets the drafter's cache and S (S = the prompt ids), starts the worker thread.
    void begin(const std::vector<int32_t>& prompt, const speculation_request& request, step_context& step,
               generation_stats& stats) override;
    // The prompt's rows seed S (the worker drafts nothing before the first propose()).
    void observe(const prefill_rows& rows, generation_stats& stats) override;
    // acquire, then launch (see the top).
    void propose(const std::vector<int32_t>& history, int max_n, const step_context& step, rng& gen, proposal& out,
                 generation_stats& stats) override;
    // Stages S's growth, then resolve (see the top).
    void observe(const verify_outcome& v, step_context& step, generation_stats& stats) override;
    // Stops and joins the worker (idempotent).
    void end() override;

private:
    struct job;
    bool concurrent() const { return n_threads_draft_ > 0; }
    void acquire(const std::vector<int32_t>& history, int max_n, proposal& out, generation_stats& stats);
    void launch(const std::vector<int32_t>& history, const proposal& prop, int gamma);
    void resolve(int n_accepted, int32_t next_token, generation_stats& stats);
    void worker_loop();
    void run_job(const job& j);
    // Drafts with the SSD drafter: candidates recorded per position, Saguaro sampling with fan-out
    // `fanout` per position, rows kept for the hand-over when `rows` is not null.
    bool draft(const std::vector<int32_t>& ctx, int n, rng& gen, std::vector<int32_t>& tokens,
               std::vector<token_dist>& q, std::vector<std::vector<int32_t>>& cands, const std::vector<int>& fanout,
               const neural_drafter::abort_check* abort, handover_rows* rows);
    // The fanout_max + 1 largest of logits[0, n) as token ids (ids[i], or i when ids is null).
    void top_candidates(const float* logits, int n, const int32_t* ids, std::vector<int32_t>& out) const;
    uint64_t stream_seed(uint64_t tag, int k, int32_t bonus) const;

    generator_params params_;
    std::shared_ptr<const neural_weights> weights_;
    std::unique_ptr<backend> backend_;  // n_threads_lent_ threads, n_threads_draft_ active but while lent
    int n_threads_draft_ = 1;           // the drafter's own threads; 0: no worker (see the top)
    int n_threads_lent_ = 1;            // n_threads_draft_ + the target's: the pool's size
    std::unique_ptr<kv_cache> cache_;
    std::unique_ptr<draft_vocab> vocab_;     // S over the drafter's head (null: full head); drafter state
    std::unique_ptr<nanospec> nanospec_;     // S's rules when it grows (main thread)
    std::unique_ptr<neural_drafter> drafter_;
    std::unique_ptr<drafter> ngram_;         // fast backup
    kv_cache* target_cache_ = nullptr;       // set: hand drafted rows over to the target (all-layers self)
    int n_embd_ = 0;
    int fanout_max_;
    draft_length length_;

    // Request state (main thread between launches; the worker reads copies through `job`).
    speculation_request request_;
    uint64_t round_ = 0;
    acceptance_estimate accept_;      // kept across requests: it orders work, never changes output
    int last_gamma_ = 0;
    std::vector<std::vector<int32_t>> cur_cands_;  // candidates of the proposal being verified
    int hit_ = -1;                  // entry index of the last verdict's hit, -1 miss
    bool have_verdict_ = false;
    std::vector<int32_t> grow_pending_;   // ids staged for S, not yet handed to a job

    // Drafter scratch (worker while busy, main while idle).
    token_dist q_tmp_;
    handover_rows backup_rows_;  // the neural backup's hand-over (main thread)

    // Speculation cache (guarded by mu_ while the worker runs).
    speculation_cache entries_;

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
    std::chrono::steady_clock::time_point t_verdict_;
};

}  // namespace specgen
