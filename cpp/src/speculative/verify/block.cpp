// Block verification = HSD with a single draft, docs/ALGORITHMS.md section 2 (arXiv 2601.05724; Sun et
// al. 2024, "Block verification accelerates speculative decoding").
//
// Running joints P_k = prod_{i<=k} p_i(x_i), Q_k = prod_{i<=k} q_i(x_i), ratio r_k = P_k / Q_k,
// cap M_k = max(1, r_1..r_k). Accept all g with probability min(1, r_g / M_{g-1}) and emit the bonus
// y ~ p_{g+1}. Otherwise scan k = g-1 .. 0 with branch vectors a = (P_k/M_k) p_{k+1}, b = Q_k q_{k+1};
// stop with probability h_k = D+ / max(D+, D-) (h_0 = 1) and emit x_1..x_k, y ~ (a - b)+ / D+.
//
// Numerics: h_k and the residual are invariant to scaling a and b by 1/Q_k, so we use
// a = rho_k p_{k+1}, b = q_{k+1} with rho_k = r_k / M_k in [0, 1], and keep ln r_k, ln M_k (no
// underflow of P_k for long drafts). rho_k = min(1, rho_{k-1} p_k(x_k)/q_k(x_k)): Sun et al.'s p_k.
// Coins are drawn lazily from k = g-1 down; drawing all up front and taking the largest stopping k
// has the same distribution.
// Edge cases: q_k(x_k) = 0 is rejected by check (no ratio); p_k(x_k) = 0 gives ln r = -inf, rho = 0
// for every later k; D+ = 0 with k > 0 never stops (h_k = 0; D+ = D- = 0 needs rho_k = 1 and
// p_{k+1} = q_{k+1}, which the scan reaches with probability 0); at k = 0 with D+ = 0 (p_1 == q_1
// up to rounding) we sample p_1, as token-wise does.
#include <algorithm>
#include <cmath>
#include <string>

#include "common/error.h"
#include "speculative/verify/verify.h"

namespace specgen {

void verifier::block_ratios(const int32_t* draft, int32_t gamma, const token_dist* p, const token_dist* q) {
    const size_t g = static_cast<size_t>(gamma);
    log_r_.resize(g + 1);
    log_cap_.resize(g + 1);
    log_r_[0] = log_cap_[0] = 0.0;
    for (size_t k = 1; k <= g; ++k) {
        const double px = p[k - 1].prob_of(draft[k - 1]);
        const double qx = q[k - 1].prob_of(draft[k - 1]);
        if (!(qx > 0.0))
            throw invalid_argument_error("verify: q_" + std::to_string(k) + "(x_" + std::to_string(k) +
                                         " = " + std::to_string(draft[k - 1]) +
                                         ") = 0: the draft token was not sampled from q");
        log_r_[k] = log_r_[k - 1] + std::log(px) - std::log(qx);  // px = 0: -inf, stays -inf
        log_cap_[k] = std::max(log_cap_[k - 1], log_r_[k]);
    }
}

verify_result verifier::block_scan(int32_t gamma, const token_dist* p, const token_dist* q, rng& gen) {
    verify_result res;
    for (size_t k = static_cast<size_t>(gamma); k-- > 0;) {
        const double rho = std::exp(log_r_[k] - log_cap_[k]);  // rho_0 = 1
        scatter(q[k]);
        double d_plus, d_minus;
        branch_mass(rho, p[k], q[k], d_plus, d_minus);
        const bool stop = k == 0 || (d_plus > 0 && gen.uniform() * std::max(d_plus, d_minus) < d_plus);
        if (stop) {
            res.n_accepted = static_cast<int32_t>(k);
            res.next_token = d_plus > 0 ? sample_residual(rho, p[k], d_plus, gen) : sample_token(p[k], gen);
        }
        gather(q[k]);
        if (stop) break;
    }
    return res;
}

verify_result verifier::verify_block(const int32_t* draft, int32_t gamma, const token_dist* p,
                                     const token_dist* q, rng& gen, std::vector<verify_row_stats>* stats) {
    check_inputs(draft, gamma, p, q);
    block_ratios(draft, gamma, p, q);
    verify_result res;
    if (gamma == 0) {
        res.next_token = sample_token(p[0], gen);
        if (stats) record_stats(p, q, gamma, 0, *stats);
        return res;
    }
    // Full draft: min(1, r_g / M_{g-1}).
    const size_t g = static_cast<size_t>(gamma);
    if (gen.uniform() < std::exp(std::min(0.0, log_r_[g] - log_cap_[g - 1]))) {
        res.n_accepted = gamma;
        res.next_token = sample_token(p[g], gen);
    } else {
        res = block_scan(gamma, p, q, gen);
    }
    if (stats) record_stats(p, q, gamma, res.n_accepted, *stats);
    return res;
}

}  // namespace specgen
