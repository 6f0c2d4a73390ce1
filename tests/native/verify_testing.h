// Test-only verification code, built into the test extension specgen._testing (tests/native), never
// into the library: the LOSSY block rule of the official HSD code (so tests/test_verify.py can show
// that its statistical test rejects it) and a Monte Carlo driver of whole rounds.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "speculative/verify/verify.h"

namespace specgen::testing {

// The verifier plus docs/ALGORITHMS.md section 2's lossy variant: the full draft is tested against
// the uncapped ratio min(1, r_g) instead of min(1, r_g / M_{g-1}); the rest is the capped rule.
class testing_verifier : public verifier {
public:
    using verifier::verifier;
    verify_result verify_block_uncapped(const int32_t* draft, int32_t gamma, const token_dist* p,
                                        const token_dist* q, rng& gen);
    // method: "token", "block" or "block_uncapped".
    verify_result verify_named(const std::string& method, const int32_t* draft, int32_t gamma,
                               const token_dist* p, const token_dist* q, rng& gen);
};

// Throws invalid_argument_error unless method is "token", "block" or "block_uncapped".
void check_method(const std::string& method);

// Monte Carlo of verification on a toy "model" given as a complete tree of distributions over every
// prefix. Prefix (t_1..t_l) has node index off(l) + sum_j t_j V^(l-j), off(l) = (V^l - 1)/(V - 1)
// (the root, the empty prefix, is node 0).
//   p_tree: [off(gamma + 1), V] target probabilities for prefixes of length 0..gamma
//   q_tree: [off(gamma), V] proposal probabilities for prefixes of length 0..gamma-1 (zeros are
//           outside q's support; a one-hot row is a point-mass proposal)
// Each draw samples a draft from q with sample_token, verifies it with `method`, then completes the
// emitted tokens to gamma + 1 tokens by sampling the target autoregressively (so the completed
// sequence must follow the target's joint exactly when the verifier is lossless).
struct verify_simulation {
    std::vector<int64_t> emitted;    // [off(gamma + 2) - 1] counts of emitted sequences, indexed by
                                     // node index - 1 (lengths 1..gamma+1)
    std::vector<int64_t> completed;  // [V^(gamma + 1)] counts of completed sequences (base-V index)
    int64_t sum_accepted = 0;        // total n_accepted over the draws
};
verify_simulation verify_simulate(const std::string& method, int32_t n_vocab, int32_t gamma, const float* p_tree,
                                  const float* q_tree, int64_t n_draws, uint64_t seed);

}  // namespace specgen::testing
