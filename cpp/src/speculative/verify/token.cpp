// Token-wise verification, docs/ALGORITHMS.md section 1 (Leviathan et al. 2023; Chen et al. 2023).
//
// For i = 1..g accept x_i with probability min(1, p_i(x_i) / q_i(x_i)); at the first rejection emit
// y ~ norm((p_i - q_i)+); after g acceptances emit the bonus y ~ p_{g+1}.
// Edge cases, all by the same formula:
//   - q point mass on x_i: the test accepts with p_i(x_i), the residual is p_i without x_i.
//   - greedy target (p_i point mass on a_i): x_i == a_i gives ratio >= 1 (accept), else 0 (reject)
//     and the residual is the point mass on a_i.
//   - q_i(y) = 0 for y outside the proposal's support (NanoSpec): (p_i - q_i)+ = p_i(y) there.
//   - an empty residual after a rejection is impossible in exact arithmetic (a rejection needs
//     p_i(x_i) < q_i(x_i), so mass p_i > q_i exists elsewhere); if rounding produces it we sample p_i.
#include <string>

#include "common/error.h"
#include "speculative/verify/verify.h"

namespace specgen {

verify_result verifier::verify_token(const int32_t* draft, int32_t gamma, const token_dist* p,
                                     const token_dist* q, rng& gen,
                                     std::vector<verify_row_stats>* stats) {
    check_inputs(draft, gamma, p, q);
    verify_result res;
    res.n_accepted = gamma;
    for (int32_t i = 0; i < gamma; ++i) {
        const double px = p[i].prob_of(draft[i]);
        const double qx = q[i].prob_of(draft[i]);
        if (!(qx > 0.0))
            throw invalid_argument_error("verify: q_" + std::to_string(i + 1) + "(x_" +
                                         std::to_string(i + 1) + " = " + std::to_string(draft[i]) +
                                         ") = 0: the draft token was not sampled from q");
        // u < p/q, written without the division; u in [0,1) so p >= q always accepts.
        if (gen.uniform() * qx < px) continue;
        res.n_accepted = i;
        res.next_token = correction(1.0, p[i], q[i], gen);
        break;
    }
    if (res.n_accepted == gamma) res.next_token = sample_token(p[gamma], gen);
    if (stats) record_stats(p, q, gamma, res.n_accepted, *stats);
    return res;
}

}  // namespace specgen
