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
constexpr uint64_t kThreadsMask = 0xffff;  // generation_'s low bits: the region's thread count
}  // namespace

thread_pool::thread_pool(int n_threads) : n_threads_(std::max(1, n_threads)), active_(n_threads_) {
    for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

thread_pool::~thread_pool() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_.store(true);
        generation_.fetch_add(uint64_t(1) << 16);
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
}

void thread_pool::worker_loop(int index) {
    uint64_t seen = 0;
    for (;;) {
        // Outside the active count a thread sleeps at once: its core is lent, not ours to spin on.
        auto waiting = [&] {
            return generation_.load(std::memory_order_acquire) == seen && index < active_.load(std::memory_order_relaxed);
        };
        for (int spins = 0; spins < kSpinIterations && waiting(); ++spins) SPECGEN_PAUSE();
        for (int y = 0; y < kYieldIterations && waiting(); ++y) sched_yield();
        if (generation_.load(std::memory_order_acquire) == seen) {
            std::unique_lock<std::mutex> lock(mutex_);
            wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
        }
        seen = generation_.load(std::memory_order_acquire);
        if (stop_.load()) return;
        const int region_threads = int(seen & kThreadsMask);
        if (index >= region_threads) continue;  // sits this region out
        (*job_)(index, region_threads);
        pending_.fetch_sub(1, std::memory_order_acq_rel);
    }
}

void thread_pool::set_active_threads(int n) { active_.store(std::min(std::max(1, n), n_threads_)); }

void thread_pool::run_on_all(const std::function<void(int, int)>& fn) {
    const int active = active_.load();
    if (active == 1) {
        fn(0, 1);
        return;
    }
    job_ = &fn;
    pending_.store(active - 1, std::memory_order_release);
    {
        // Taking the lock orders the generation bump with sleepers' predicate checks.
        std::lock_guard<std::mutex> lock(mutex_);
        const uint64_t g = generation_.load(std::memory_order_relaxed);
        generation_.store(((g >> 16) + 1) << 16 | uint64_t(active), std::memory_order_release);
    }
    wake_.notify_all();
    fn(0, active);
    for (int spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) {
        if (spins < kSpinIterations) SPECGEN_PAUSE();
        else sched_yield();
    }
    job_ = nullptr;
}

void thread_pool::parallel_for(int64_t n, const std::function<void(int, int64_t, int64_t)>& fn, int64_t grain) {
    if (n <= 0) return;
    const int active = active_.load();  // run_on_all may see another count: the chunks suit any
    if (active == 1 || n <= grain) {
        fn(0, 0, n);
        return;
    }
    // About 8 chunks per thread balances load without making the atomic counter hot.
    const int64_t chunk = std::max<int64_t>(std::max<int64_t>(grain, 1), (n + 8 * active - 1) / (8 * active));
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
