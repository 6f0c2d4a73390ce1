// Batched drafting with a draft model (speculative/draft_batch.h).
#include "speculative/draft_batch.h"

#include <algorithm>
#include <chrono>

#include "backend/backend.h"
#include "engine/stats.h"
#include "speculative/drafters/drafters.h"
#include "speculative/drafters/neural.h"
#include "speculative/proposal.h"

namespace specgen {

namespace {
using clock_type = std::chrono::steady_clock;
double seconds_since(clock_type::time_point t0) { return std::chrono::duration<double>(clock_type::now() - t0).count(); }
}  // namespace

// One joined sequence during run().
struct draft_batch::state {
    job j;
    int n = 0;                  // tokens it may still draft in all (j.n clipped to the cache)
    std::vector<int32_t> work;  // history + the tokens drafted so far
    int pos0 = 0, rows = 0;     // its entry in the current forward: positions pos0 .. pos0 + rows - 1
    int row = 0;                // its last row in the forward's hidden states
    const float* logits = nullptr;  // the head's logits of that row [drafter->n_logits()]
};

draft_batch::draft_batch(std::shared_ptr<const neural_weights> w, int n_ctx, int n_seq, backend& be, int n_threads)
    : w_(std::move(w)), cache_(w_->m->hp(), n_ctx, n_seq), eval_(*w_->m, be), be_(be), n_threads_(n_threads) {}

draft_batch::~draft_batch() = default;

const model& draft_batch::weights() const { return *w_->m; }
int draft_batch::n_layers() const { return w_->n_layers; }

void draft_batch::join(const job& j) { jobs_.push_back(j); }

void draft_batch::run() {
    // The jobs are this step's, whatever happens: a forward that throws leaves none for the next step.
    struct forget {
        std::vector<job>& jobs;
        ~forget() { jobs.clear(); }
    } forget_jobs{jobs_};
    const active_threads_scope threads(be_, n_threads_);
    timings_.clear();
    if (states_.size() < jobs_.size()) states_.resize(jobs_.size());
    std::vector<state*> live;
    const int L = w_->n_layers;
    for (size_t b = 0; b < jobs_.size(); ++b) {
        state& s = states_[b];
        s.j = jobs_[b];
        proposal& out = *s.j.out;
        out.clear();
        s.work.assign(s.j.history->begin(), s.j.history->end());
        // The context before the proposal bounds it, as in neural_drafter::draft().
        s.n = std::min(s.j.n, cache_.n_ctx() - (int(s.work.size()) - s.j.chained));
        if (s.n <= 0) continue;
        if (s.j.chained > s.n) {  // never from the speculator (its n bounds the match), but keep q's size
            s.work.resize(s.work.size() - size_t(s.j.chained - s.n));
            s.j.chained = s.n;
        }
        if (out.q.size() < size_t(s.n)) out.q.resize(size_t(s.n));
        for (auto x = s.work.end() - s.j.chained; x != s.work.end(); ++x) {
            out.q[out.tokens.size()].set_point_mass(*x);
            out.tokens.push_back(*x);
        }
        if (int(out.tokens.size()) >= s.n) continue;  // the match fills the draft: no draft forward
        int keep = s.j.drafter->keep_prefix(s.work);
        // A long catch-up (the prompt after admission) runs alone in chunks first, as
        // neural_drafter::forward does: it bounds the forward's scratch. The last rows join the batch.
        while (int(s.work.size()) - keep > evaluator::kChunk) {
            const auto t0 = clock_type::now();
            eval_.forward(cache_, s.work.data() + keep, evaluator::kChunk, keep, L, s.j.drafter->seq());
            ++n_forwards_;
            s.j.drafter->forwarded(s.work.data() + keep, evaluator::kChunk);
            keep += evaluator::kChunk;
            s.j.stats->draft_seconds += seconds_since(t0);
            s.j.stats->n_draft_forwards += 1;
            s.j.stats->n_draft_batch_sequences += 1;
        }
        s.pos0 = keep;
        s.rows = int(s.work.size()) - keep;
        live.push_back(&s);
    }
    // Position i: one forward over every live sequence's rows, one head pass, then each samples x_i.
    while (!live.empty()) {
        forward_and_head(live);
        size_t kept = 0;
        for (state* s : live) {
            const auto t0 = clock_type::now();
            proposal& out = *s->j.out;
            const int n_logits = s->j.drafter->n_logits();
            // Over S this is the top probability of q_S's softmax (>= the full head's), as in draft().
            bool go = !(s->j.p_min > 0 && top_probability(s->logits, n_logits) < s->j.p_min);
            if (go) {
                token_dist& q = out.q[out.tokens.size()];
                s->j.drafter->process(s->logits, *s->j.sampling, s->work, q);
                const int32_t x = sample_token(q, *s->j.gen);
                out.tokens.push_back(x);
                s->work.push_back(x);
                go = int(out.tokens.size()) < s->n;
            }
            s->j.stats->draft_seconds += seconds_since(t0);
            if (!go) continue;
            s->pos0 = int(s->work.size()) - 1;
            s->rows = 1;
            live[kept++] = s;
        }
        live.resize(kept);
    }
    for (size_t b = 0; b < jobs_.size(); ++b) {
        proposal& out = *jobs_[b].out;
        if (int(out.tokens.size()) < jobs_[b].draft_min) out.tokens.clear();  // draft_min: not verified
    }
}

void draft_batch::forward_and_head(std::vector<state*>& live) {
    const auto t0 = clock_type::now();
    batch_.clear();
    for (state* s : live) {
        s->row = batch_.n_rows() + s->rows - 1;
        batch_.add(s->j.drafter->seq(), s->work.data() + s->pos0, s->rows, s->pos0);
    }
    eval_.forward_batch(cache_, batch_, w_->n_layers);
    ++n_forwards_;
    for (state* s : live) s->j.drafter->forwarded(s->work.data() + s->pos0, s->rows);
    const int E = w_->m->hp().n_embd, V = w_->m->hp().n_vocab;
    const float* bh = eval_.hidden();

    // The full head: one pass over every such sequence's row (one row each on device memory, where
    // rows cannot be gathered on the host). A NanoSpec / FR-Spec head is the sequence's own set S.
    const auto t_head = clock_type::now();
    int n_full = 0;
    for (state* s : live) n_full += s->j.drafter->full_head();
    logits_.resize(size_t(n_full) * V);
    if (n_full > 0 && be_.host_memory()) {
        hidden_.resize(size_t(n_full) * E);
        int k = 0;
        for (state* s : live)
            if (s->j.drafter->full_head()) std::copy_n(bh + size_t(s->row) * E, E, hidden_.data() + size_t(k++) * E);
        eval_.logits(hidden_.data(), n_full, logits_.data());
    } else if (n_full > 0) {
        int k = 0;
        for (state* s : live)
            if (s->j.drafter->full_head()) eval_.logits(bh + size_t(s->row) * E, 1, logits_.data() + size_t(k++) * V);
    }
    const double full_head_s = seconds_since(t_head);
    int k = 0;
    for (state* s : live) {
        if (s->j.drafter->full_head()) {
            s->logits = logits_.data() + size_t(k++) * V;
            s->j.stats->draft_head_seconds += full_head_s / n_full;
        } else {
            s->j.drafter->head_seconds = 0;
            s->j.drafter->head(bh + size_t(s->row) * E, 0);
            s->logits = s->j.drafter->logits(0).data();
            s->j.stats->draft_head_seconds += s->j.drafter->head_seconds;
        }
    }
    // The forward's time is shared evenly: each sequence ran one of its rows.
    const double seconds = seconds_since(t0);
    bool one_row_each = true;
    for (state* s : live) {
        one_row_each = one_row_each && s->rows == 1;
        s->j.stats->draft_seconds += seconds / double(live.size());
        s->j.stats->n_draft_forwards += 1;
        s->j.stats->n_draft_batch_sequences += int64_t(live.size());
    }
    if (one_row_each) timings_.push_back({int(live.size()), seconds});
}

}  // namespace specgen
