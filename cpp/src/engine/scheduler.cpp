// Continuous batching (engine/scheduler.h): the engine thread, admission with prefix reuse, and the
// batched step.
#include "engine/scheduler.h"

#include <algorithm>
#include <chrono>
#include <climits>

#include "common/error.h"
#include "engine/request.h"
#include "engine/sequence.h"
#include "model/kv_cache.h"
#include "model/model.h"
#include "speculative/draft_batch.h"

namespace specgen {

namespace {
using clock_type = std::chrono::steady_clock;
double seconds_since(clock_type::time_point t0) { return std::chrono::duration<double>(clock_type::now() - t0).count(); }
// Rows per step: prefill chunks fill what the decoding rows leave of kStepRows, and get at least
// kMinPrefillRows so a long queue of decoders never starves a new request's prefill.
constexpr int kStepRows = evaluator::kChunk;
constexpr int kMinPrefillRows = 32;
}  // namespace

scheduler::scheduler(const loaded_target& target)
    : target_(target), speculators_(target.params, target.m, target.tok) {
    const generator_params& p = target_.params;
    // An EAGLE-3 head reads target layers' inputs: every forward keeps them for the rows it computes.
    target_.eval.capture_layers(speculators_.captured_layers());
    slots_.resize(size_t(p.n_parallel));
    for (int i = 0; i < p.n_parallel; ++i) {
        slot& s = slots_[size_t(i)];
        s.index = i;
        s.spec = speculators_.make({target_.m, target_.tok, target_.cache, target_.be, i, &target_.head, &s.prefix, nullptr, nullptr});
    }
    policy_.set_draft_size_ratio(speculators_.draft_size_ratio());
    thread_ = std::thread(&scheduler::loop, this);
}

scheduler::~scheduler() { shutdown(); }

int scheduler::n_free_slots() const {
    std::lock_guard<std::mutex> lock(mu_);
    int n = 0;
    for (const slot& s : slots_) n += s.owner == nullptr;
    return n;
}

int scheduler::n_waiting() const {
    std::lock_guard<std::mutex> lock(mu_);
    return int(waiting_.size());
}

void scheduler::submit(request* r, std::unique_ptr<sequence> s) {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) {
        r->refuse();  // never queued: nothing for the engine to let go of
        throw error("the generator is shutting down");
    }
    // Requests already queued take the free slots first; the rest of the queue waits.
    int free = 0;
    for (const slot& sl : slots_) free += sl.owner == nullptr;
    const int n_would_wait = int(waiting_.size()) + 1 - free;
    if (n_would_wait > target_.params.max_queued) {
        r->refuse();
        throw queue_full_error("all " + std::to_string(slots_.size()) + " slots are busy and " +
                               std::to_string(n_would_wait - 1) + " requests wait (max_queued): try again later");
    }
    s->attach(r);
    waiting_.push_back(std::move(s));
    engine_cv_.notify_one();
}

void scheduler::cancel(request* r, bool wait) {
    std::unique_lock<std::mutex> lock(mu_);
    if (r->released()) return;
    auto it = std::find_if(waiting_.begin(), waiting_.end(), [&](const auto& s) { return s->handle() == r; });
    if (it != waiting_.end()) {
        waiting_.erase(it);
        r->release_unqueued();
        readers_cv_.notify_all();
        return;
    }
    r->request_cancel();
    r->drop_unread();
    engine_cv_.notify_one();
    if (!wait || std::this_thread::get_id() == engine_id_) return;  // the engine ends it before its next step
    readers_cv_.wait(lock, [&] { return r->released(); });
}

void scheduler::shutdown() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
        engine_cv_.notify_all();
    }
    if (thread_.joinable()) thread_.join();
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& s : waiting_) active_.push_back(std::move(s));
    waiting_.clear();
    while (!active_.empty()) {
        sequence* s = active_.front().get();
        s->finish(finish_reason::cancelled);
        s->handle()->drop_unread();
        release(s);
    }
    for (slot& sl : slots_) sl.spec.reset();  // they reference the generator's model
    readers_cv_.notify_all();
}

void scheduler::release(sequence* s) {
    if (slot* sl = s->leave_slot()) {
        // The slot keeps the committed rows for the next request's prefix (rows past n_past are stale).
        const std::vector<int32_t>& h = s->history();
        sl->cached.assign(h.begin(), h.begin() + std::min<size_t>(h.size(), size_t(s->n_past())));
        sl->owner = nullptr;
        sl->last_used = n_released_++;
    }
    s->handle()->release(*s);
    active_.erase(std::find_if(active_.begin(), active_.end(), [&](const auto& a) { return a.get() == s; }));
}

void scheduler::end_cancelled() {
    std::vector<sequence*> ended;
    for (const auto& s : active_)
        if (s->handle()->cancel_requested()) ended.push_back(s.get());
    for (sequence* s : ended) {
        s->finish(finish_reason::cancelled);
        s->drop_text();
        s->handle()->drop_unread();
        release(s);
    }
    if (!ended.empty()) readers_cv_.notify_all();
}

void scheduler::pick_slot(sequence* r) {
    const int n = r->prompt_rows();
    const int n_sequences = int(active_.size());  // r included
    slot* best = nullptr;
    int best_lcp = -1;
    for (slot& s : slots_) {
        if (s.owner) continue;
        const int lcp = s.reusable_rows(common_prefix(s.cached, r->history(), n), false, n_sequences);
        if (lcp > best_lcp || (lcp == best_lcp && s.last_used < best->last_used)) {
            best = &s;
            best_lcp = lcp;
        }
    }
    // A busy slot's committed rows may share more: copy them (prefix reuse across slots), as far as
    // the chosen slot's prefix state lets the request reuse rows it kept nothing for.
    const slot* src = nullptr;
    int src_lcp = best_lcp;
    for (const slot& s : slots_) {
        if (!s.owner || s.owner->prefilling()) continue;
        const int lcp = common_prefix(s.owner->history(), r->history(), std::min(n, s.owner->n_past()));
        if (lcp > src_lcp) {
            src = &s;
            src_lcp = lcp;
        }
    }
    if (src) {
        // The chosen slot's speculator may take up its share of the rows from the other's (NanoSpec's
        // top-k, a draft model's rows); otherwise its prefix state says what copied rows it can reuse.
        const bool speculating = best->spec && src->spec;
        const int taken = speculating ? best->spec->copyable_rows(*src->spec, src_lcp) : 0;
        const int usable = std::max(taken, best->reusable_rows(src_lcp, true, n_sequences));
        if (usable > best_lcp) {
            target_.cache.copy_prefix(src->index, best->index, usable);
            best->cached.assign(r->history().begin(), r->history().begin() + usable);
            if (speculating) best->spec->copy_prefix(*src->spec, usable, r->history());
            best_lcp = usable;
        }
    }
    best->owner = r;
    r->admit(*best, best_lcp, n_sequences);
}

void scheduler::admit_waiting() {
    for (;;) {
        if (waiting_.empty()) return;
        bool free = false;
        for (const slot& s : slots_) free = free || s.owner == nullptr;
        if (!free) return;
        active_.push_back(std::move(waiting_.front()));
        waiting_.pop_front();
        sequence* s = active_.back().get();
        try {
            pick_slot(s);
        } catch (...) {
            s->handle()->fail(std::current_exception());
            s->finish(finish_reason::cancelled);
            release(s);
            readers_cv_.notify_all();
        }
    }
}

void scheduler::loop() {
    engine_id_ = std::this_thread::get_id();
    std::unique_lock<std::mutex> lock(mu_);
    std::vector<sequence*> act;
    for (;;) {
        engine_cv_.wait(lock, [&] { return stop_ || !waiting_.empty() || !active_.empty(); });
        if (stop_) return;
        end_cancelled();
        admit_waiting();
        if (active_.empty()) continue;
        act.clear();
        for (const auto& s : active_) act.push_back(s.get());
        lock.unlock();
        std::exception_ptr err;
        {
            std::lock_guard<std::mutex> step(step_mu_);
            try {
                run_step(act);
            } catch (...) {
                err = std::current_exception();
            }
        }
        lock.lock();
        publish(act, err);
    }
}

void scheduler::publish(const std::vector<sequence*>& act, std::exception_ptr err) {
    // Only the engine thread releases an admitted sequence, so every one of act is still here.
    for (sequence* s : act) {
        request* r = s->handle();
        if (err) {
            r->fail(err);
            s->finish(finish_reason::cancelled);
        }
        if (r->cancel_requested()) {
            s->finish(finish_reason::cancelled);
            s->drop_text();
        }
        r->publish(*s);
        if (s->ended()) release(s);
    }
    readers_cv_.notify_all();
}

void scheduler::run_step(const std::vector<sequence*>& act) {
    const auto t_step = clock_type::now();
    const hparams& hp = target_.m.hp();
    const int n_layer = hp.n_layer, E = hp.n_embd, V = hp.n_vocab;
    const generator_params& p = target_.params;
    std::vector<sequence*> decoding, prefilling;
    for (sequence* s : act) {
        if (s->ended()) continue;
        if (s->prefilling()) {
            prefilling.push_back(s);
        } else if (s->n_past() >= p.n_ctx) {
            s->finish(finish_reason::length);
        } else {
            decoding.push_back(s);
        }
    }

    // 1. Each decoding sequence proposes; with 2+ of them the batch policy bounds each draft
    //    (docs/ALGORITHMS.md section 7). A draft model drafts every sequence's position i in one
    //    batched draft forward (speculative/draft_batch.h): they join in propose(), run() drafts.
    draft_batch* drafts = speculators_.batch();
    if (drafts) drafts->clear();  // nothing a failed step left
    caps_.assign(decoding.size(), INT_MAX);
    rows_behind_.assign(decoding.size(), 0);
    if (drafts)
        for (size_t i = 0; i < decoding.size(); ++i) rows_behind_[i] = decoding[i]->draft_rows_behind();
    if (p.batch_draft_policy && decoding.size() >= 2 && slots_[0].spec) {
        std::vector<draft_policy::sequence> seqs;
        for (size_t i = 0; i < decoding.size(); ++i) {
            const sequence* s = decoding[i];
            const generation_stats& st = s->stats();
            const double e = s->expected_acceptance();
            const double a = e >= 0 ? e : draft_policy::acceptance(st.n_accepted, st.n_drafted);
            seqs.push_back({a, st.n_drafted > 0 ? st.draft_seconds / double(st.n_drafted) : 0.0, p.draft_max,
                            draft_policy::amortized_catch_up(rows_behind_[i], a, p.draft_max, s->tokens_left())});
        }
        policy_.choose(seqs, int(decoding.size()), caps_, drafts != nullptr);
    }
    for (size_t i = 0; i < decoding.size(); ++i)
        if (draft_policy::catch_up_outweighs(rows_behind_[i], decoding[i]->tokens_left())) caps_[i] = 0;
    for (size_t i = 0; i < decoding.size(); ++i) decoding[i]->propose(caps_[i], int(decoding.size()), drafts);
    if (drafts && !drafts->empty()) {
        drafts->run();
        for (const draft_batch::forward_time& f : drafts->timings()) policy_.observe_draft_step(f.rows, f.seconds);
    }

    // 2. One ragged batch: every round's rows, then prefill chunks in the rows left.
    batch_.clear();
    int head_rows = 0;
    for (sequence* s : decoding) {
        s->add_round_rows(batch_);
        head_rows += s->round_rows();
    }
    int budget = std::max(kMinPrefillRows, kStepRows - batch_.n_rows());
    std::vector<std::pair<sequence*, int>> chunks;
    for (sequence* s : prefilling) {
        if (budget <= 0) break;
        const int m = s->add_prefill(batch_, budget);
        budget -= m;
        chunks.emplace_back(s, m);
    }
    const auto t_forward = clock_type::now();
    evaluator& eval = target_.eval;
    if (!batch_.empty()) eval.forward_batch(target_.cache, batch_, n_layer);
    const float* bh = eval.hidden();

    // 3. One head pass over every round's g+1 rows.
    if (head_rows > 0) {
        logits_.resize(size_t(head_rows) * V);
        if (target_.be.host_memory()) {
            hidden_.resize(size_t(head_rows) * E);
            size_t off = 0;
            for (sequence* s : decoding) {
                s->gather_hidden(bh, hidden_.data() + off * E);
                off += size_t(s->round_rows());
            }
            eval.logits(hidden_.data(), head_rows, logits_.data());
        } else {
            // Device memory: no hand-over rows there (it needs host memory), so each round's rows are
            // contiguous in the batch's hidden rows.
            size_t off = 0;
            for (sequence* s : decoding) {
                eval.logits(bh + size_t(s->round_row0()) * E, s->round_rows(), logits_.data() + off * V);
                off += size_t(s->round_rows());
            }
        }
    }
    const double forward_s = seconds_since(t_forward);
    if (chunks.empty() && batch_.n_rows() == head_rows && head_rows > 0) policy_.observe_step(head_rows, forward_s);
    for (sequence* s : decoding) s->add_verify_seconds(forward_s);

    // 4. Prefill chunks: the speculator sees the prompt's rows, and the requests whose prompt is now in.
    for (auto& [s, m] : chunks) s->prefill_done(m, bh);

    // 5. Each sequence verifies and commits its own rows.
    size_t off = 0;
    for (sequence* s : decoding) {
        s->finish_round(logits_.data() + off * V);
        off += size_t(s->round_rows());
    }
    const double step_s = seconds_since(t_step);
    for (sequence* s : decoding) s->add_decode_seconds(step_s);
}

}  // namespace specgen
