// verify_simulate(): Monte Carlo of whole rounds on a toy model given as a tree of distributions over
// every prefix (layout in verify_testing.h), and the lossy block variant. Used by tests/test_verify.py
// to show that the emitted tokens follow the target's joint; 10^6 rounds of vocab 4, gamma 4 take well
// under a second.
#include <algorithm>
#include <cmath>
#include <string>

#include "common/error.h"
#include "verify_testing.h"

namespace specgen::testing {

verify_result testing_verifier::verify_block_uncapped(const int32_t* draft, int32_t gamma, const token_dist* p,
                                                      const token_dist* q, rng& gen) {
    check_inputs(draft, gamma, p, q);
    block_ratios(draft, gamma, p, q);
    verify_result res;
    if (gamma == 0) {
        res.next_token = sample_token(p[0], gen);
        return res;
    }
    const size_t g = static_cast<size_t>(gamma);
    if (gen.uniform() < std::exp(std::min(0.0, log_r_[g]))) {  // the lossy test: r_g, not r_g / M_{g-1}
        res.n_accepted = gamma;
        res.next_token = sample_token(p[g], gen);
        return res;
    }
    return block_scan(gamma, p, q, gen);
}

void check_method(const std::string& method) {
    if (method != "token" && method != "block" && method != "block_uncapped")
        throw invalid_argument_error("verify method '" + method + "': expected token, block or block_uncapped");
}

verify_result testing_verifier::verify_named(const std::string& method, const int32_t* draft, int32_t gamma,
                                             const token_dist* p, const token_dist* q, rng& gen) {
    if (method == "block_uncapped") return verify_block_uncapped(draft, gamma, p, q, gen);
    check_method(method);
    return verify(method == "token" ? verify_method::token : verify_method::block, draft, gamma, p, q, gen);
}

static token_dist dense_row_to_dist(const float* row, int32_t n_vocab) {
    token_dist d;
    for (int32_t t = 0; t < n_vocab; ++t) {
        if (row[t] < 0.0f)
            throw invalid_argument_error("verify_simulate: negative probability " + std::to_string(row[t]));
        if (row[t] > 0.0f) {
            d.ids.push_back(t);
            d.probs.push_back(row[t]);
        }
    }
    if (d.empty()) throw invalid_argument_error("verify_simulate: a distribution row is all zero");
    return d;
}

verify_simulation verify_simulate(const std::string& method, int32_t n_vocab, int32_t gamma, const float* p_tree,
                                  const float* q_tree, int64_t n_draws, uint64_t seed) {
    check_method(method);
    if (n_vocab < 2 || gamma < 0 || n_draws < 0)
        throw invalid_argument_error("verify_simulate: need n_vocab >= 2, gamma >= 0, n_draws >= 0");
    const int64_t V = n_vocab;
    std::vector<int64_t> off(static_cast<size_t>(gamma) + 3, 0);  // off[l] = node index of first prefix of length l
    int64_t width = 1;
    for (size_t l = 1; l < off.size(); ++l) {
        off[l] = off[l - 1] + width;
        width *= V;
        if (off[l] > (int64_t{1} << 26)) throw invalid_argument_error("verify_simulate: tree too large");
    }
    const size_t g = static_cast<size_t>(gamma);
    std::vector<token_dist> p_nodes, q_nodes;
    for (int64_t i = 0; i < off[g + 1]; ++i) p_nodes.push_back(dense_row_to_dist(p_tree + i * V, n_vocab));
    for (int64_t i = 0; i < off[g]; ++i) q_nodes.push_back(dense_row_to_dist(q_tree + i * V, n_vocab));

    verify_simulation out;
    out.emitted.assign(static_cast<size_t>(off[g + 2] - 1), 0);
    out.completed.assign(static_cast<size_t>(off[g + 2] - off[g + 1]), 0);

    testing_verifier ver(n_vocab);
    rng gen(seed);
    std::vector<int32_t> draft(g);
    std::vector<token_dist> p(g + 1), q(g);
    for (int64_t draw = 0; draw < n_draws; ++draw) {
        // Draft x_1..x_g from q; collect p_1..p_{g+1} along the draft path.
        int64_t node = 0;  // index of x_<i within its level
        for (size_t i = 0; i < g; ++i) {
            q[i] = q_nodes[static_cast<size_t>(off[i] + node)];
            p[i] = p_nodes[static_cast<size_t>(off[i] + node)];
            draft[i] = sample_token(q[i], gen);
            node = node * V + draft[i];
        }
        p[g] = p_nodes[static_cast<size_t>(off[g] + node)];
        const verify_result r = ver.verify_named(method, draft.data(), gamma, p.data(), q.data(), gen);
        out.sum_accepted += r.n_accepted;

        // Emitted x_1..x_k, y; then complete autoregressively from the target to gamma + 1 tokens.
        int64_t seq = 0;
        for (int32_t i = 0; i < r.n_accepted; ++i) seq = seq * V + draft[static_cast<size_t>(i)];
        seq = seq * V + r.next_token;
        size_t len = static_cast<size_t>(r.n_accepted) + 1;
        out.emitted[static_cast<size_t>(off[len] + seq - 1)] += 1;
        for (; len < g + 1; ++len)
            seq = seq * V + sample_token(p_nodes[static_cast<size_t>(off[len] + seq)], gen);
        out.completed[static_cast<size_t>(seq)] += 1;
    }
    return out;
}

}  // namespace specgen::testing
