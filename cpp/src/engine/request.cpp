// A request's reader side (engine/request.h).
#include "engine/request.h"

#include <chrono>

#include "engine/scheduler.h"
#include "engine/sequence.h"

namespace specgen {

const char* finish_reason_name(finish_reason r) {
    switch (r) {
        case finish_reason::stop: return "stop";
        case finish_reason::length: return "length";
        case finish_reason::eos: return "eos";
        case finish_reason::cancelled: return "cancelled";
        default: return "";
    }
}

request::request(std::shared_ptr<scheduler> sched, const sequence& s)
    : sched_(std::move(sched)), seed_(s.seed()), stats_(s.stats()) {}

request::~request() {
    bool released;
    {
        std::lock_guard<std::mutex> lock(sched_->mu());
        released = released_;
    }
    if (!released) cancel();
}

// ---- readers ------------------------------------------------------------------------------------

bool request::done() const {
    std::lock_guard<std::mutex> lock(sched_->mu());
    return released_ && unread_.empty() && !error_;
}

std::string request::step() {
    bool ready = false;
    return next(-1.0, &ready);
}

std::string request::next(double timeout_s, bool* ready) {
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

void request::cancel(bool wait) { sched_->cancel(this, wait); }

std::vector<int32_t> request::tokens() const {
    std::lock_guard<std::mutex> lock(sched_->mu());
    return tokens_;
}

std::string request::text() const {
    std::lock_guard<std::mutex> lock(sched_->mu());
    return text_;
}

generation_stats request::stats() const {
    std::lock_guard<std::mutex> lock(sched_->mu());
    return stats_;
}

std::vector<token_logprob> request::logprobs(size_t start) const {
    std::lock_guard<std::mutex> lock(sched_->mu());
    if (start >= logprobs_.size()) return {};
    return std::vector<token_logprob>(logprobs_.begin() + start, logprobs_.end());
}

// ---- the scheduler ------------------------------------------------------------------------------

void request::publish(sequence& s) {
    const std::vector<int32_t>& generated = s.generated();
    tokens_.insert(tokens_.end(), generated.begin() + tokens_.size(), generated.end());
    const std::vector<token_logprob>& lp = s.logprobs();
    if (lp.size() > logprobs_.size()) logprobs_.insert(logprobs_.end(), lp.begin() + logprobs_.size(), lp.end());
    text_ += s.new_text();
    unread_ += s.new_text();
    s.drop_text();
    stats_ = s.stats();
    n_published_ += 1;
}

void request::release(const sequence& s) {
    text_ = s.text();
    stats_ = s.stats();
    released_ = true;
    reason_.store(s.reason() == finish_reason::none ? finish_reason::cancelled : s.reason());
    n_published_ += 1;
}

void request::refuse() {
    released_ = true;
    reason_.store(finish_reason::cancelled);
}

void request::release_unqueued() {
    unread_.clear();
    released_ = true;
    reason_.store(finish_reason::cancelled);
    n_published_ += 1;
}

}  // namespace specgen
