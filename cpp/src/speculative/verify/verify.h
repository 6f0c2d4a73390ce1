// Lossless verification of a speculative draft: token-wise (docs/ALGORITHMS.md section 1) and block /
// hierarchical (HSD, section 2). Statistical proof: tests/test_verify.py.
//
// One round, with g = gamma:
//   draft  x_1..x_g           [g] token ids the drafter sampled, x_i ~ q_i
//   q      q_1..q_g           [g] token_dist, q_i = q(. | x_<i): the exact distribution x_i was sampled
//                             from (after the drafter's processors). A deterministic drafter (n-gram,
//                             greedy) passes a point mass. Tokens outside q_i.ids have q_i = 0
//                             (NanoSpec's q_S): they stay reachable through the residual.
//   p      p_1..p_{g+1}       [g+1] token_dist, p_i = p(. | x_<i) after the target's processors;
//                             temperature 0 gives point masses on the argmax.
// Result: n_accepted = k, the accepted draft tokens x_1..x_k, and next_token y:
//   k <  g: the correction, a sample of the residual at position k+1;
//   k == g: the bonus, y ~ p_{g+1}.
// The round emits x_1..x_k, y (k + 1 tokens). With block verification y may equal x_{k+1}
// (the residual of the capped joint can put mass there); with token-wise it never does.
//
// Greedy and point-mass proposals need no special case: with p_i = delta(argmax) the rules reduce to
// "accept while x_i == argmax p_i, then argmax of the next row", and with q_i = delta(x_i) to "accept
// with probability p_i(x_i), else sample p_i without x_i". The rng is drawn from the same way in all
// cases, so a seed fixes the whole round.
//
// Errors (invalid_argument_error): a draft id or distribution id outside [0, n_vocab), an empty
// distribution, or q_i(x_i) == 0 (x_i cannot have been sampled from q_i: the ratio is undefined).
#pragma once
#include <cstdint>
#include <vector>

#include "sampling/rng.h"
#include "sampling/sampling.h"

namespace specgen {

enum class verify_method {
    token,  // section 1: accept x_i with prob min(1, p_i(x_i)/q_i(x_i)), residual (p_i - q_i)+
    block,  // section 2: the capped joint rule (HSD / Sun et al. block verification)
};

struct verify_result {
    int32_t n_accepted = 0;   // k: the draft prefix x_1..x_k is kept
    int32_t next_token = -1;  // correction (k < gamma) or bonus (k == gamma)
};

// Statistics of one target row p_i on the emitted path (rows 1..k+1 of a round: exactly the rows whose
// context was kept; each emitted token is distributed as a draw from one of them). Feed them to
// bound_accumulator (speculative/bounds.h).
struct verify_row_stats {
    double entropy;     // -sum_x p(x) ln p(x)
    double entropy_sq;  // sum_x p(x) (ln p(x))^2
    double alpha;       // sum_x min(p_i(x), q_i(x)) = 1 - TV(p_i, q_i); NaN for the bonus row g+1
};

// Holds scratch buffers sized n_vocab, reused by every call: one verifier per engine/thread.
class verifier {
public:
    explicit verifier(int32_t n_vocab);
    int32_t n_vocab() const { return n_vocab_; }

    // draft: [gamma], p: [gamma + 1], q: [gamma]. When stats is not null it is cleared and filled with
    // one entry per emitted token (n_accepted + 1 rows). gamma == 0 samples y ~ p_1.
    verify_result verify(verify_method method, const int32_t* draft, int32_t gamma, const token_dist* p,
                         const token_dist* q, rng& gen, std::vector<verify_row_stats>* stats = nullptr);

    verify_result verify_token(const int32_t* draft, int32_t gamma, const token_dist* p,
                               const token_dist* q, rng& gen,
                               std::vector<verify_row_stats>* stats = nullptr);

    verify_result verify_block(const int32_t* draft, int32_t gamma, const token_dist* p,
                               const token_dist* q, rng& gen, std::vector<verify_row_stats>* stats = nullptr);

    // The round's acceptance in expectation over the verifier's coins with the draft held fixed:
    // reach[i] = P(n_accepted >= i + 1 | x_1..x_g) for i = 0..gamma-1, so the sum is E[n_accepted | draft]
    // (reach.cpp; the exact figures a measurement compares the two rules by, without sampling noise).
    void acceptance_reach(verify_method method, const int32_t* draft, int32_t gamma, const token_dist* p,
                          const token_dist* q, std::vector<double>& reach);

protected:  // the pieces of the rules (tests/native builds section 2's lossy variant from them)
    // Block: ln r_k and ln M_k for k = 0..gamma into log_r_, log_cap_ (checks q_k(x_k) > 0).
    void block_ratios(const int32_t* draft, int32_t gamma, const token_dist* p, const token_dist* q);
    // Block, after the full draft was rejected: the backward scan k = g-1 .. 0 (needs block_ratios).
    verify_result block_scan(int32_t gamma, const token_dist* p, const token_dist* q, rng& gen);
    // Scatters q into dense_ (checking ids); gather() undoes it in O(|q|).
    void scatter(const token_dist& q);
    void gather(const token_dist& q);
    void check_inputs(const int32_t* draft, int32_t gamma, const token_dist* p, const token_dist* q) const;
    // For a = rho * p and b = q (q scattered): D+ = sum (a-b)+ and D- = sum (b-a)+ over the union.
    void branch_mass(double rho, const token_dist& p, const token_dist& q, double& d_plus,
                     double& d_minus) const;
    // Samples y ~ (rho * p - q)+ / d_plus (q scattered, d_plus > 0).
    int32_t sample_residual(double rho, const token_dist& p, double d_plus, rng& gen) const;
    // y ~ norm((rho p - q)+), falling back to p when the residual has no mass (p == q up to rounding:
    // unreachable in exact arithmetic, see speculative/verify/common.cpp).
    int32_t correction(double rho, const token_dist& p, const token_dist& q, rng& gen);
    void record_stats(const token_dist* p, const token_dist* q, int32_t gamma, int32_t n_accepted,
                      std::vector<verify_row_stats>& stats);

    int32_t n_vocab_;
    std::vector<float> dense_;      // [n_vocab] q of the current row, 0 elsewhere
    std::vector<double> log_r_;     // [gamma + 1] ln r_k (block)
    std::vector<double> log_cap_;   // [gamma + 1] ln M_k (block)
};

// One row's entropy statistics (entropy, entropy_sq of verify_row_stats).
void dist_entropy(const token_dist& p, double& entropy, double& entropy_sq);

}  // namespace specgen
