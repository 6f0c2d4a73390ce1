// Sanitizer smoke driver (tools/sanitize.sh): loads a model through the engine and generates a few
// tokens plainly, with the n-gram and self drafters, and on two threads at once (two generators),
// so ASan/UBSan/TSan see the loader, tokenizer, thread pool, forward pass, sampler and verifier.
// The CLI (cpp/tools/main.cpp) does not generate yet; switch sanitize.sh to it when it does.
//   sanitize_smoke MODEL.gguf [n_threads]
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"
#include "engine/generator.h"

using namespace specgen;

static std::string run(const std::string& path, int n_threads, const std::string& draft, const char* prompt) {
    generator_params gp;
    gp.model_path = path;
    gp.n_ctx = 64;
    gp.n_threads = n_threads;
    gp.draft = draft;
    gp.draft_max = 4;
    generator g(gp);
    generate_params p;
    p.max_tokens = 6;
    p.sampling.temperature = 0.0f;
    auto gen = g.start(g.tok().encode(prompt, true, false), p);
    while (!gen->done()) gen->step();
    // Out-of-range and hostile inputs on the live objects must throw, not corrupt memory.
    try { (void)g.tok().decode({-1}); } catch (const invalid_argument_error&) {}
    try { (void)g.logits({g.n_vocab()}); } catch (const invalid_argument_error&) {}
    return gen->text();
}

int main(int argc, char** argv) {
    if (argc < 2) { std::fprintf(stderr, "usage: %s MODEL.gguf [n_threads]\n", argv[0]); return 2; }
    const std::string path = argv[1];
    const int n_threads = argc > 2 ? std::atoi(argv[2]) : 2;
    try {
        const std::string plain = run(path, n_threads, "", "The capital of France is");
        std::printf("plain: %s\n", plain.c_str());
        for (const char* d : {"ngram", "self"}) {
            const std::string s = run(path, n_threads, d, "The capital of France is");
            std::printf("%s: %s\n", d, s.c_str());
            if (s != plain) { std::fprintf(stderr, "greedy output with draft=%s differs\n", d); return 1; }
        }
        std::string a, b;
        std::thread t1([&] { a = run(path, n_threads, "", "Once upon a time"); });
        std::thread t2([&] { b = run(path, n_threads, "", "Once upon a time"); });
        t1.join();
        t2.join();
        std::printf("threads: %s | %s\n", a.c_str(), b.c_str());
        if (a != b) { std::fprintf(stderr, "two threads disagree\n"); return 1; }
    } catch (const error& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
    return 0;
}
