// Continuous batching (engine/scheduler.h): the engine thread, admission with prefix reuse, and the
// batched step.
#include "engine/scheduler.h"

#include <algorithm>
#include <chrono>
#include <climits>

#include "common/error.h"
#include "engine/generator.h"
#include "engine/request.h"
#include "model/kv_cache.h"

namespace specgen {

namespace {
using clock_type = std::chrono::steady_clock;
double seconds_since(clock_type::time_point t0) { return std::chrono::duration<double>(clock_type::now() - t0).count(); }
// Rows per step: prefill chunks fill what the decoding rows leave of kStepRows, and get at least
// kMinPrefillRows so a long queue of decoders never starves a new request's prefill.
constexpr int kStepRows = evaluator::kChunk;
constexpr int kMinPrefillRows = 32;
}  // namespace

scheduler::scheduler(generator& g) : g_(g) {
    const generator_params& p = g.params();
    slots_.resize(size_t(p.n_parallel));
    for (int i = 0; i < p.n_parallel; ++i) {
        slots_[i].index = i;
        slots_[i].spec = make_speculator(p, *g.model_, *g.tokenizer_, *g.cache_, *g.backend_, i);
    }
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

void scheduler::submit(generation* r) {
    std::lock_guard<std::mutex> lock(mu_);
    auto refuse = [&] {  // never queued: nothing for the engine to let go of
        r->released_ = true;
        r->reason_.store(finish_reason::cancelled);
    };
    if (stop_) {
        refuse();
        throw error("the generator is shutting down");
    }
    // Requests already queued take the free slots first; the rest of the queue waits.
    int free = 0;
    for (const slot& s : slots_) free += s.owner == nullptr;
    const int n_would_wait = int(waiting_.size()) + 1 - free;
    if (n_would_wait > g_.params().max_queued) {
        refuse();
        throw queue_full_error("all " + std::to_string(slots_.size()) + " slots are busy and " +
                               std::to_string(n_would_wait - 1) + " requests wait (max_queued): try again later");
    }
    waiting_.push_back(r);
    engine_cv_.notify_one();
}

void scheduler::cancel(generation* r, bool wait) {
    std::unique_lock<std::mutex> lock(mu_);
    if (r->released_) return;
    auto it = std::find(waiting_.begin(), waiting_.end(), r);
    if (it != waiting_.end()) {
        waiting_.erase(it);
        r->finish(finish_reason::cancelled);
        r->unread_.clear();
        r->released_ = true;
        r->reason_.store(finish_reason::cancelled);
        r->n_published_ += 1;
        readers_cv_.notify_all();
        return;
    }
    r->cancel_requested_ = true;
    r->unread_.clear();
    engine_cv_.notify_one();
    if (!wait || std::this_thread::get_id() == engine_id_) return;  // the engine ends it before its next step
    readers_cv_.wait(lock, [&] { return r->released_; });
}

void scheduler::shutdown() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
        engine_cv_.notify_all();
    }
    if (thread_.joinable()) thread_.join();
    std::lock_guard<std::mutex> lock(mu_);
    for (generation* r : waiting_) active_.push_back(r);
    waiting_.clear();
    for (generation* r : active_) {
        r->finish(finish_reason::cancelled);
        r->unread_.clear();
        release(r);
    }
    active_.clear();
    for (slot& s : slots_) s.spec.reset();  // they reference the generator's model
    readers_cv_.notify_all();
}

void scheduler::release(generation* r) {
    if (slot* s = r->slot_) {
        if (s->spec) s->spec->end();  // joins SSD's drafter thread
        // The slot keeps the committed rows for the next request's prefix (rows past n_past are stale).
        s->cached.assign(r->history_.begin(), r->history_.begin() + std::min<size_t>(r->history_.size(), size_t(r->n_past_)));
        s->cached_topk.clear();
        s->cached_seed_hidden.clear();
        s->cached_seed_rows = 0;
        if (r->topk_k_ > 0) {
            // topk_ holds the prompt's rows only (history_ has grown since): at most those, at most n_past,
            // and only up to the rows whose top-k never ran; those keep their hidden states instead.
            const int E = g_.target().hp().n_embd;
            const int n_seed = int(r->seed_hidden_.size() / size_t(E));
            const size_t rows = std::min(r->topk_.size() / size_t(r->topk_k_), size_t(r->n_past_));
            const size_t with_topk = n_seed > 0 ? std::min(rows, size_t(r->seed_row0_)) : rows;
            s->cached_topk.assign(r->topk_.begin(), r->topk_.begin() + with_topk * size_t(r->topk_k_));
            if (n_seed > 0 && size_t(r->seed_row0_) <= rows) {
                s->cached_seed_rows = int(std::min(size_t(n_seed), rows - with_topk));
                s->cached_seed_hidden.swap(r->seed_hidden_);
                s->cached_seed_hidden.resize(size_t(s->cached_seed_rows) * size_t(E));
            }
        }
        s->owner = nullptr;
        s->last_used = n_released_++;
        r->slot_ = nullptr;
    }
    active_.erase(std::remove(active_.begin(), active_.end(), r), active_.end());
    r->pub_text_ = r->stream_.text();
    r->pub_stats_ = r->stats_;
    r->released_ = true;
    r->reason_.store(r->engine_reason_ == finish_reason::none ? finish_reason::cancelled : r->engine_reason_);
    r->n_published_ += 1;
}

void scheduler::end_cancelled() {
    std::vector<generation*> ended;
    for (generation* r : active_)
        if (r->cancel_requested_) ended.push_back(r);
    for (generation* r : ended) {
        r->finish(finish_reason::cancelled);
        r->out_.clear();
        r->unread_.clear();
        release(r);
    }
    if (!ended.empty()) readers_cv_.notify_all();
}

void scheduler::pick_slot(generation* r) {
    const int n = r->prompt_rows();
    int k = slots_[0].spec ? slots_[0].spec->prompt_topk() : 0;
    const bool optional = k > 0 && slots_[0].spec->prompt_topk_optional();
    // Joining a batch (r is in active_ already): skip the head rows of the prompt's top-k
    // (docs/ALGORITHMS.md section 8).
    if (optional && active_.size() > 1) k = 0;
    slot* best = nullptr;
    int best_lcp = -1;
    for (slot& s : slots_) {
        if (s.owner) continue;
        int lcp = common_prefix(s.cached, r->history_, n);
        if (k > 0 && !optional) lcp = std::min(lcp, int(s.cached_topk.size() / size_t(k)));
        if (lcp > best_lcp || (lcp == best_lcp && s.last_used < best->last_used)) {
            best = &s;
            best_lcp = lcp;
        }
    }
    // A busy slot's committed rows may share more: copy them (prefix reuse across slots).
    if (k == 0) {
        const slot* src = nullptr;
        int src_lcp = best_lcp;
        for (const slot& s : slots_) {
            if (!s.owner || s.owner->prefilling()) continue;
            const int lcp = common_prefix(s.owner->history_, r->history_, std::min(n, int(s.owner->n_past_)));
            if (lcp > src_lcp) {
                src = &s;
                src_lcp = lcp;
            }
        }
        if (src) {
            g_.cache_->copy_prefix(src->index, best->index, src_lcp);
            best->cached.assign(r->history_.begin(), r->history_.begin() + src_lcp);
            best_lcp = src_lcp;
        }
    }
    // The cached rows are worth more than the top-k that would seed S: reuse them without it. Rows
    // whose hidden states the slot kept still seed it (admit).
    if (optional && k > 0 && best->cached_topk.size() / size_t(k) + size_t(best->cached_seed_rows) < size_t(best_lcp)) k = 0;
    best->owner = r;
    r->admit(*best, best_lcp, k);
}

void scheduler::admit_waiting() {
    for (;;) {
        if (waiting_.empty()) return;
        bool free = false;
        for (const slot& s : slots_) free = free || s.owner == nullptr;
        if (!free) return;
        generation* r = waiting_.front();
        waiting_.pop_front();
        active_.push_back(r);
        try {
            pick_slot(r);
        } catch (...) {
            r->error_ = std::current_exception();
            r->finish(finish_reason::cancelled);
            release(r);
            readers_cv_.notify_all();
        }
    }
}

void scheduler::loop() {
    engine_id_ = std::this_thread::get_id();
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
        engine_cv_.wait(lock, [&] { return stop_ || !waiting_.empty() || !active_.empty(); });
        if (stop_) return;
        end_cancelled();
        admit_waiting();
        if (active_.empty()) continue;
        const std::vector<generation*> act = active_;
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

void scheduler::publish(const std::vector<generation*>& act, std::exception_ptr err) {
    for (generation* r : act) {
        if (r->released_) continue;
        if (err) {
            r->error_ = err;
            r->finish(finish_reason::cancelled);
        }
        if (r->cancel_requested_) {
            r->finish(finish_reason::cancelled);
            r->out_.clear();
        }
        r->pub_tokens_.insert(r->pub_tokens_.end(), r->generated_.begin() + r->pub_tokens_.size(), r->generated_.end());
        if (r->logprobs_.size() > r->pub_logprobs_.size())
            r->pub_logprobs_.insert(r->pub_logprobs_.end(), r->logprobs_.begin() + r->pub_logprobs_.size(), r->logprobs_.end());
        r->pub_text_ += r->out_;
        r->unread_ += r->out_;
        r->out_.clear();
        r->pub_stats_ = r->stats_;
        r->n_published_ += 1;
        if (r->engine_reason_ != finish_reason::none) release(r);
    }
    readers_cv_.notify_all();
}

void scheduler::run_step(const std::vector<generation*>& act) {
    const auto t_step = clock_type::now();
    const hparams& hp = g_.target().hp();
    const int n_layer = hp.n_layer, E = hp.n_embd, V = hp.n_vocab;
    std::vector<generation*> decoding, prefilling;
    for (generation* r : act) {
        if (r->engine_reason_ != finish_reason::none) continue;
        if (r->prefilling()) {
            prefilling.push_back(r);
        } else if (r->n_past_ >= g_.n_ctx()) {
            r->finish(finish_reason::length);
        } else {
            decoding.push_back(r);
        }
    }

    // 1. Each decoding sequence proposes; with 2+ of them the batch policy bounds each draft
    //    (docs/ALGORITHMS.md section 7).
    caps_.assign(decoding.size(), INT_MAX);
    if (g_.params().batch_draft_policy && decoding.size() >= 2 && slots_[0].spec) {
        std::vector<draft_policy::sequence> seqs;
        for (generation* r : decoding) {
            const generation_stats& s = r->stats_;
            const double a = r->slot_->spec ? r->slot_->spec->batch_acceptance() : -1.0;
            seqs.push_back({a >= 0 ? a : draft_policy::acceptance(s.n_accepted, s.n_drafted),
                            s.n_drafted > 0 ? s.draft_seconds / double(s.n_drafted) : 0.0, g_.params().draft_max});
        }
        policy_.choose(seqs, int(decoding.size()), caps_);
    }
    for (size_t i = 0; i < decoding.size(); ++i) decoding[i]->propose(caps_[i], int(decoding.size()));

    // 2. One ragged batch: every round's rows, then prefill chunks in the rows left.
    batch_.clear();
    int head_rows = 0;
    for (generation* r : decoding) {
        r->add_round_rows(batch_);
        head_rows += r->round_rows();
    }
    int budget = std::max(kMinPrefillRows, kStepRows - batch_.n_rows());
    std::vector<std::pair<generation*, int>> chunks;
    for (generation* r : prefilling) {
        if (budget <= 0) break;
        const int m = r->add_prefill(batch_, budget);
        budget -= m;
        chunks.emplace_back(r, m);
    }
    const auto t_forward = clock_type::now();
    if (!batch_.empty()) g_.eval_->forward_batch(*g_.cache_, batch_, n_layer);
    const float* bh = g_.eval_->hidden();

    // 3. One head pass over every round's g+1 rows.
    if (head_rows > 0) {
        logits_.resize(size_t(head_rows) * V);
        if (g_.backend_->host_memory()) {
            hidden_.resize(size_t(head_rows) * E);
            size_t off = 0;
            for (generation* r : decoding) {
                r->gather_hidden(bh, hidden_.data() + off * E);
                off += size_t(r->round_rows());
            }
            g_.eval_->logits(hidden_.data(), head_rows, logits_.data());
        } else {
            // Device memory: no hand-over rows there (it needs host memory), so each round's rows are
            // contiguous in the batch's hidden rows.
            size_t off = 0;
            for (generation* r : decoding) {
                g_.eval_->logits(bh + size_t(r->row0_) * E, r->round_rows(), logits_.data() + off * V);
                off += size_t(r->round_rows());
            }
        }
    }
    const double forward_s = seconds_since(t_forward);
    if (chunks.empty() && batch_.n_rows() == head_rows && head_rows > 0) policy_.observe_step(head_rows, forward_s);
    for (generation* r : decoding) r->stats_.verify_seconds += forward_s;

    // 4. Prefill chunks: the speculator's prompt top-k, and the requests whose prompt is now in.
    for (auto& [r, m] : chunks) r->prefill_done_rows(m, bh + size_t(r->row0_) * E, prefill_logits_);

    // 5. Each sequence verifies and commits its own rows.
    size_t off = 0;
    for (generation* r : decoding) {
        r->finish_round(logits_.data() + off * V);
        off += size_t(r->round_rows());
    }
    const double step_s = seconds_since(t_step);
    for (generation* r : decoding) r->stats_.decode_seconds += step_s;
}

}  // namespace specgen
