// The batched engine under a thread sanitizer (tools/tsan_batch.sh): 4 threads submit requests to one
// generator with 4 slots (plain and n-gram speculation), one thread cancels streams mid-way, and
// every greedy output equals the same prompt decoded alone. Model: argv[1] or $SPECGEN_TEST_MODEL
// (a Gemma 3 270M GGUF); without one the test is skipped.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "engine/generator.h"

using namespace specgen;

namespace {
int failures = 0;
std::vector<int32_t> run(generator& g, const std::vector<int32_t>& prompt, int n) {
    generate_params p;
    p.max_tokens = n;
    p.sampling.temperature = 0;
    auto r = g.start(prompt, p);
    while (!r->done()) r->step();
    return r->tokens();
}
}  // namespace

int main(int argc, char** argv) {
    const char* path = argc > 1 ? argv[1] : std::getenv("SPECGEN_TEST_MODEL");
    if (!path || !*path) {
        std::printf("test_batch_threads: no model (argv[1] or SPECGEN_TEST_MODEL): skipped\n");
        return 0;
    }
    const int n = argc > 2 ? std::atoi(argv[2]) : 6;
    for (const char* draft : {"", "ngram"}) {
        generator_params gp;
        gp.model_path = path;
        gp.n_ctx = 128;
        gp.n_threads = 2;
        gp.n_parallel = 4;
        if (*draft) gp.set_draft(draft_kind::ngram);
        generator g(gp);
        const std::vector<std::string> texts = {"The capital of France is", "def fibonacci(n):", "Once upon a time",
                                                "The printing press"};
        std::vector<std::vector<int32_t>> prompts, want;
        for (const auto& t : texts) prompts.push_back(g.tok().encode(t, true, false));
        for (const auto& p : prompts) want.push_back(run(g, p, n));
        std::vector<int> bad(4, 0);
        std::vector<std::thread> threads;
        for (int i = 0; i < 4; ++i)
            threads.emplace_back([&, i] {
                for (int j = 0; j < 3; ++j) {
                    const int k = (i + j) % 4;
                    if (run(g, prompts[k], n) != want[k]) bad[i] += 1;
                }
            });
        threads.emplace_back([&] {  // streams cancelled mid-way from another thread
            for (int j = 0; j < 3; ++j) {
                generate_params p;
                p.max_tokens = 50;
                auto s = g.start(prompts[j], p);
                s->step();
                s->cancel();
                if (s->reason() != finish_reason::cancelled && s->reason() != finish_reason::length) bad[0] += 100;
            }
        });
        for (auto& t : threads) t.join();
        for (int i = 0; i < 4; ++i)
            if (bad[i]) {
                std::fprintf(stderr, "FAIL: draft '%s' thread %d: %d outputs differ from serial\n", draft, i, bad[i]);
                ++failures;
            }
        if (g.n_free_slots() != 4) {
            std::fprintf(stderr, "FAIL: %d slots free after the run, want 4\n", g.n_free_slots());
            ++failures;
        }
    }
    if (!failures) std::printf("test_batch_threads: ok\n");
    return failures ? 1 : 0;
}
