#include "backend/thread_pool.h"

#include <algorithm>

#include <sched.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define SPECGEN_PAUSE() _mm_pause()
#else
#define SPECGEN_PAUSE() ((void)0)
#endif

namespace specgen {

namespace {
// About 50-100 us of spinning: long enough to bridge the gap between two matmuls of one decode step,
// short enough not to burn a core when the pool is idle. Then yield the core for a while (another
// process may need it to finish the chunk we wait for) before sleeping.
constexpr int kSpinIterations = 20000;
constexpr int kYieldIterations = 200;
}  // namespace

thread_pool::thread_pool(int n_threads) : n_threads_(std::max(1, n_threads)) {
    for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

thread_pool::~thread_pool() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_.store(true);
        generation_.fetch_add(1);
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
}

void thread_pool::worker_loop(int index) {
    uint64_t seen = 0;
    for (;;) {
        int spins = 0;
        while (generation_.load(std::memory_order_acquire) == seen && spins < kSpinIterations) {
            SPECGEN_PAUSE();
            ++spins;
        }
        for (int y = 0; y < kYieldIterations && generation_.load(std::memory_order_acquire) == seen; ++y)
            sched_yield();
        if (generation_.load(std::memory_order_acquire) == seen) {
            std::unique_lock<std::mutex> lock(mutex_);
            wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
        }
        seen = generation_.load(std::memory_order_acquire);
        if (stop_.load()) return;
        (*job_)(index, n_threads_);
        pending_.fetch_sub(1, std::memory_order_acq_rel);
    }
}

void thread_pool::run_on_all(const std::function<void(int, int)>& fn) {
    if (n_threads_ == 1) {
        fn(0, 1);
        return;
    }
    job_ = &fn;
    pending_.store(n_threads_ - 1, std::memory_order_release);
    {
        // Taking the lock orders the generation bump with sleepers' predicate checks.
        std::lock_guard<std::mutex> lock(mutex_);
        generation_.fetch_add(1, std::memory_order_acq_rel);
    }
    wake_.notify_all();
    fn(0, n_threads_);
    for (int spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) {
        if (spins < kSpinIterations) SPECGEN_PAUSE();
        else sched_yield();
    }
    job_ = nullptr;
}

void thread_pool::parallel_for(int64_t n, const std::function<void(int, int64_t, int64_t)>& fn, int64_t grain) {
    if (n <= 0) return;
    if (n_threads_ == 1 || n <= grain) {
        fn(0, 0, n);
        return;
    }
    // About 8 chunks per thread balances load without making the atomic counter hot.
    const int64_t chunk = std::max<int64_t>(std::max<int64_t>(grain, 1), (n + 8 * n_threads_ - 1) / (8 * n_threads_));
    next_chunk_.store(0, std::memory_order_relaxed);
    run_on_all([&](int index, int) {
        for (;;) {
            const int64_t begin = next_chunk_.fetch_add(chunk, std::memory_order_relaxed);
            if (begin >= n) break;
            fn(index, begin, std::min(n, begin + chunk));
        }
    });
}

}  // namespace specgen
