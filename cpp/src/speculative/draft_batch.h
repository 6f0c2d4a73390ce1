// Batched drafting with a draft model (docs/DESIGN.md section 4, docs/ALGORITHMS.md section 7): the
// slots' drafters share ONE KV cache (sequence = slot) and one evaluator, and each draft position of
// every sequence that drafts in an engine step runs in one evaluator::forward_batch plus one head pass,
// as the target's verification does. Position 0 forwards each sequence's rows its cache lacks (the
// prompt after admission, the accepted tokens and the correction after a round); position i forwards
// x_i of every sequence still drafting. Sequences stop independently: their own length (max_n, the
// adaptive gamma, the token budget), draft_p_min and draft_min.
//
// Kernels are batch-invariant, so each sequence's draft logits are bit for bit those of drafting alone;
// sampling stays per sequence (its rng, sampling params, NanoSpec set S), so a batch changes no
// proposal. The speculators join in propose() (speculator.h, step_context::drafts), then the engine
// calls run() once, before its verification forward.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "model/batch.h"
#include "model/kv_cache.h"
#include "model/model.h"
#include "sampling/rng.h"
#include "sampling/sampling.h"

namespace specgen {

struct backend;
struct neural_weights;
struct proposal;
struct generation_stats;
class neural_drafter;

class draft_batch {
public:
    // w: a draft GGUF's weights (w.own); n_seq sequences (slots) of n_ctx rows in the shared cache;
    // n_threads: the backend threads its forwards use (n_threads_draft; 0: all).
    draft_batch(std::shared_ptr<const neural_weights> w, int n_ctx, int n_seq, backend& be, int n_threads = 0);
    ~draft_batch();

    kv_cache& cache() { return cache_; }
    const model& weights() const;
    int n_layers() const;

    // One sequence's draft of this step: up to n tokens after history (its last token pending), into out
    // (out.tokens cleared, out.q sized); none kept when fewer than draft_min. Adds its share of the
    // draft time to stats. Everything referenced lives until run() returns.
    // chained > 0 (ngram_chain, docs/ALGORITHMS.md section 6.1): history's last `chained` tokens are an
    // n-gram match that starts the proposal as point masses, counted in n; the model drafts on after them,
    // and its first forward takes their rows with the rows its cache lacks.
    struct job {
        neural_drafter* drafter = nullptr;
        const std::vector<int32_t>* history = nullptr;
        int n = 0;
        int chained = 0;
        int draft_min = 0;
        float p_min = 0;
        const sampling_params* sampling = nullptr;
        rng* gen = nullptr;
        proposal* out = nullptr;
        generation_stats* stats = nullptr;
    };
    void join(const job& j);
    bool empty() const { return jobs_.empty(); }
    // Drafts every joined sequence, then forgets them (also when it throws what forward_batch throws).
    void run();
    // Forgets the joined sequences without drafting (a step that failed before run()).
    void clear() { jobs_.clear(); }

    // The draft forwards of the last run() that ran one row per sequence (rows, seconds of the forward
    // and its head pass): the batch policy's measured draft step times (engine/draft_policy.h).
    struct forward_time {
        int rows;
        double seconds;
    };
    const std::vector<forward_time>& timings() const { return timings_; }
    int64_t n_forwards() const { return n_forwards_; }  // forward_batch calls since construction

private:
    struct state;
    void forward_and_head(std::vector<state*>& live);

    std::shared_ptr<const neural_weights> w_;
    kv_cache cache_;
    evaluator eval_;
    backend& be_;
    int n_threads_;
    batch batch_;
    std::vector<job> jobs_;
    std::vector<state> states_;
    std::vector<float> hidden_, logits_;
    std::vector<forward_time> timings_;
    int64_t n_forwards_ = 0;
};

}  // namespace specgen
