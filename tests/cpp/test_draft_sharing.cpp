// A draft model (draft_kind::model) is loaded once per generator, whatever its n_parallel: every slot's
// speculator drafts over the same read-only weights, its rows in its own sequence of the draft cache the
// slots share (speculator_factory, speculative/speculator.h; speculative/draft_batch.h). The reference model drafts for itself here: one generator with 4 slots
// loads one draft GGUF, and 4 requests drafting at once in a batch each give plain decoding's greedy
// output. Model: argv[1] or $SPECGEN_TEST_MODEL (a Gemma 3 270M GGUF).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "check.h"
#include "engine/generator.h"
#include "speculative/drafters/neural.h"

using namespace specgen;
using test_support::check;

namespace {

generator_params base(const std::string& path, int n_parallel) {
    generator_params gp;
    gp.model_path = path;
    gp.n_ctx = 128;
    gp.n_threads = 2;
    gp.n_parallel = n_parallel;
    return gp;
}

generate_params greedy(int n) {
    generate_params p;
    p.max_tokens = n;
    p.sampling.temperature = 0;
    return p;
}

std::vector<int32_t> run(generator& g, const std::vector<int32_t>& prompt, int n) {
    auto r = g.start(prompt, greedy(n));
    while (!r->done()) r->step();
    return r->tokens();
}

}  // namespace

int main(int argc, char** argv) {
    const char* path = argc > 1 ? argv[1] : std::getenv("SPECGEN_TEST_MODEL");
    if (!path || !*path) {
        std::fprintf(stderr, "test_draft_sharing: no model (argv[1] or SPECGEN_TEST_MODEL)\n");
        return 1;
    }
    const int n = 6;
    const std::vector<std::string> texts = {"The capital of France is", "def fibonacci(n):", "Once upon a time",
                                            "The printing press"};
    std::vector<std::vector<int32_t>> prompts, want;
    {
        generator plain(base(path, 1));
        for (const auto& t : texts) prompts.push_back(plain.tok().encode(t, true, false));
        for (const auto& p : prompts) want.push_back(run(plain, p, n));
    }
    check(draft_model_loads() == 0, "plain decoding loads no draft model");

    for (const bool nanospec : {false, true}) {
        generator_params gp = base(path, 4);
        gp.set_draft(draft_kind::model, path);
        gp.nanospec = nanospec ? toggle::on : toggle::off;
        gp.batch_draft_policy = false;  // every slot drafts in every step (a full model draft never pays in a batch)
        gp.draft_max = 4;
        const int64_t before = draft_model_loads();
        generator g(gp);
        const std::string what = nanospec ? "draft model + nanospec" : "draft model";
        check(draft_model_loads() - before == 1, what + ": 4 slots load the draft GGUF once, loaded " +
                                                     std::to_string(draft_model_loads() - before));
        // All four at once: every slot's drafter runs over the shared weights in the same steps.
        std::vector<std::unique_ptr<request>> running;
        for (const auto& p : prompts) running.push_back(g.start(p, greedy(n)));
        for (size_t i = 0; i < running.size(); ++i) {
            while (!running[i]->done()) running[i]->step();
            check(running[i]->tokens() == want[i], what + ": prompt " + std::to_string(i) + " differs from plain decoding");
            check(running[i]->stats().n_drafted > 0, what + ": prompt " + std::to_string(i) + " drafted nothing");
        }
    }
    {
        // draft_kind auto with a draft model: every slot's auto speculator drafts over the factory's weights.
        setenv("SPECGEN_CALIBRATION", "off", 1);
        generator_params gp = base(path, 3);
        gp.set_draft(draft_kind::automatic, path);
        const int64_t before = draft_model_loads();
        generator g(gp);
        check(draft_model_loads() - before == 1, "auto + draft model: 3 slots load the draft GGUF once, loaded " +
                                                     std::to_string(draft_model_loads() - before));
        for (size_t i = 0; i < prompts.size(); ++i) {
            auto r = g.start(prompts[i], greedy(n));
            while (!r->done()) r->step();
            check(r->tokens() == want[i], "auto + draft model: prompt " + std::to_string(i) + " differs from plain decoding");
        }
    }
    if (test_support::failures == 0) std::printf("test_draft_sharing: ok\n");
    return test_support::failures == 0 ? 0 : 1;
}
