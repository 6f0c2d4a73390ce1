// logprob_recorder (engine/logprobs.h) on hand-made rows: sampled requests report ln p of the
// processed distribution (a token the processors cut is -inf), greedy ones the log-softmax of the
// penalised logits at temperature 1; the top-n list is sorted by probability, ties by ascending id.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "engine/logprobs.h"

#include "check.h"

using namespace specgen;

namespace {
using test_support::check;
using test_support::failures;
bool near(double a, double b) { return std::fabs(a - b) < 1e-5; }
}  // namespace

int main() {
    const std::vector<float> row = {1.0f, 3.0f, 2.0f, 3.0f, -1.0f};
    const int n = int(row.size());
    const std::vector<int32_t> history = {1};
    logits_processor proc;
    logprob_recorder rec;

    // Greedy: log-softmax of the logits with the repeat penalty (token 1 seen: 3 / 2 = 1.5).
    {
        sampling_params sp;
        sp.temperature = 0;
        sp.repeat_penalty = 2.0f;
        token_dist point;
        proc.process(row.data(), nullptr, n, sp, history.data(), history.size(), point);
        check(point.size() == 1 && point.ids[0] == 3, "greedy point mass on the argmax after the penalty");
        const std::vector<double> pen = {1.0, 1.5, 2.0, 3.0, -1.0};
        double z = 0;
        for (double x : pen) z += std::exp(x);
        token_logprob lp = rec.record(row.data(), n, point, sp, history.data(), history.size(), 3, 3);
        check(lp.token == 3 && near(lp.logprob, 3.0 - std::log(z)), "greedy logprob is the log-softmax");
        check(lp.top_ids == std::vector<int32_t>({3, 2, 1}), "greedy top ids in probability order");
        check(near(lp.top_logprobs[1], 2.0 - std::log(z)), "greedy top logprob");
    }
    // Sampled: ln p of the processed distribution; top_k cuts tokens to -inf; ties by ascending id.
    {
        sampling_params sp;
        sp.temperature = 1.0f;
        sp.top_k = 3;
        sp.top_p = 1.0f;
        sp.min_p = 0.0f;
        token_dist p;
        proc.process(row.data(), nullptr, n, sp, history.data(), 0, p);
        token_logprob lp = rec.record(row.data(), n, p, sp, history.data(), 0, 1, 5);
        const double z = 2 * std::exp(3.0) + std::exp(2.0);
        check(near(lp.logprob, 3.0 - std::log(z)), "sampled logprob is ln p");
        check(lp.top_ids == std::vector<int32_t>({1, 3, 2}), "only the kept tokens, ties by ascending id");
        token_logprob cut = rec.record(row.data(), n, p, sp, history.data(), 0, 4, 0);
        check(std::isinf(cut.logprob) && cut.logprob < 0 && cut.top_ids.empty(), "a cut token is -inf; n_top 0 lists none");
    }
    if (failures) return 1;
    std::printf("test_logprobs: ok\n");
    return 0;
}
