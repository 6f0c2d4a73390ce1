// Saguaro sampling and the fan-out schedule of SSD (docs/ALGORITHMS.md sections 4.5 and 4.6).
#pragma once
#include <vector>

#include "engine/params.h"
#include "sampling/sampling.h"

namespace specgen {

// Saguaro sampling (section 4.5): out(t) proportional to c * q(t) for the f most probable tokens of q
// (ties: lower id first), q(t) otherwise. c in [0, 1]. When that leaves no mass (c == 0 and the top f
// cover q's support) the reweighting is skipped and out = q, so out is always a distribution that
// can be sampled. The result lists the same ids as q (zero-probability entries dropped).
void saguaro_reweight(const token_dist& q, int f, float c, token_dist& out);

// Fan-out per outcome k = 0..K. uniform: F_k = f0. geometric (the paper's schedule for a power-law
// miss model 1 - p_hit(F) = F^-r): F_k = max(1, round(f0 * a^(k / (1 + r)))).
std::vector<int> ssd_fanouts(ssd_schedule schedule, int f0, int K, double a, double r);

// The per-token acceptance a that orders SSD's work (P(outcome k) = a^k (1 - a), a^K for k = K):
// the maximum-likelihood estimate over recent rounds, accepted / (accepted + rejections), with
// exponentially decayed sums (prior 0.5). It orders work, never changes output.
class acceptance_estimate {
public:
    double value() const;
    // A round that verified gamma > 0 tokens: k successes, then one failure unless all were accepted.
    void update(int gamma, int n_accepted);

private:
    static constexpr double kDecay = 0.9;  // per round
    double accepted_ = 1, tried_ = 2;
};

}  // namespace specgen
