// verifier::acceptance_reach: how far each rule accepts a given draft, in expectation over its coins
// (docs/ALGORITHMS.md sections 1 and 2).
//
// Token-wise: position i is reached and accepted with prod_{j<=i} min(1, p_j(x_j) / q_j(x_j)).
// Block: the rule keeps x_1..x_tau with tau the largest k whose coin succeeds, the coins independent
// with h_g = min(1, r_g / M_{g-1}) and h_k = D+ / max(D+, D-) for 0 < k < g (block.cpp draws the same
// coins lazily, from k = g down), so P(tau >= i) = 1 - prod_{k=i..g} (1 - h_k).
#include <algorithm>
#include <cmath>

#include "speculative/verify/verify.h"

namespace specgen {

void verifier::acceptance_reach(verify_method method, const int32_t* draft, int32_t gamma, const token_dist* p,
                                const token_dist* q, std::vector<double>& reach) {
    check_inputs(draft, gamma, p, q);
    block_ratios(draft, gamma, p, q);  // also rejects q_k(x_k) = 0, which has no ratio in either rule
    const size_t g = static_cast<size_t>(gamma);
    reach.assign(g, 0.0);
    if (g == 0) return;
    if (method == verify_method::token) {
        double pass = 1.0;
        for (size_t i = 0; i < g; ++i) {
            const double px = p[i].prob_of(draft[i]), qx = q[i].prob_of(draft[i]);
            pass *= std::min(1.0, px / qx);
            reach[i] = pass;
        }
        return;
    }
    // fail = prod_{k=i..g} (1 - h_k), built from k = g down.
    double fail = 1.0 - std::exp(std::min(0.0, log_r_[g] - log_cap_[g - 1]));
    reach[g - 1] = 1.0 - fail;
    for (size_t k = g - 1; k >= 1; --k) {
        const double rho = std::exp(log_r_[k] - log_cap_[k]);
        scatter(q[k]);
        double d_plus, d_minus;
        branch_mass(rho, p[k], q[k], d_plus, d_minus);
        gather(q[k]);
        const double h = d_plus > 0 ? d_plus / std::max(d_plus, d_minus) : 0.0;
        fail *= 1.0 - h;
        reach[k - 1] = 1.0 - fail;
    }
}

}  // namespace specgen
