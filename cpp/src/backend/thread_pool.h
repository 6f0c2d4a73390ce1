// A fixed pool of worker threads for data-parallel loops.
//
// Decode runs ~130 parallel regions per token, so the hand-off must cost microseconds: workers spin
// on an atomic generation counter for a short while after each job, then yield, then sleep on a
// condition variable. parallel_for hands out small chunks from an atomic counter, so a thread the OS
// has descheduled (a shared 2-core machine) delays only the chunk it holds, not a fixed share of
// the work. Which thread computes an output never changes how it is accumulated (batch invariance
// lives in the kernels).
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace specgen {

class thread_pool {
public:
    // n_threads >= 1 counts the calling thread: a pool of 1 runs everything inline.
    explicit thread_pool(int n_threads);
    ~thread_pool();
    thread_pool(const thread_pool&) = delete;
    thread_pool& operator=(const thread_pool&) = delete;

    int n_threads() const { return n_threads_; }
    // How many of the threads the next parallel regions use, in [1, n_threads()] (initially all).
    // The others sleep: SSD's drafter gets the target's cores only while the target waits for it
    // (speculative/ssd/ssd.h). Any thread may call it at any time; a region in flight keeps its count.
    void set_active_threads(int n);

    // Calls fn(thread_index, begin, end) on disjoint chunks covering [0, n); returns when all are done.
    // Chunks are at least `grain` long (except the last). Not reentrant: one call at a time per pool.
    void parallel_for(int64_t n, const std::function<void(int, int64_t, int64_t)>& fn, int64_t grain = 1);
    // Calls fn(thread_index, n_threads) once on every thread.
    void run_on_all(const std::function<void(int, int)>& fn);

private:
    void worker_loop(int index);

    int n_threads_;
    std::atomic<int> active_;
    std::vector<std::thread> workers_;
    const std::function<void(int, int)>* job_ = nullptr;
    // (region counter << 16) | the region's thread count: a worker reads both in one load, so one
    // that sat out a region cannot mistake the next region's count for its own.
    std::atomic<uint64_t> generation_{0};
    std::atomic<int> pending_{0};
    std::atomic<int64_t> next_chunk_{0};
    std::atomic<bool> stop_{false};
    std::mutex mutex_;
    std::condition_variable wake_;
};

}  // namespace specgen
