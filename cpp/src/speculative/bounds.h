// Speed-of-light bounds and the classic speculative-decoding formulas, docs/ALGORITHMS.md section 5.
// Pure math; the engine feeds bound_accumulator with verify_row_stats (speculative/verify/verify.h) and reports the
// measured tokens per target call against expected_tokens_per_call() and pankratov_alistarh_bound().
#pragma once
#include <cstdint>

namespace specgen {

// Expected tokens per target call with i.i.d. acceptance alpha and draft length gamma:
// (1 - alpha^(gamma+1)) / (1 - alpha); alpha == 1 gives gamma + 1 (the limit). alpha in [0, 1].
double expected_tokens_per_call(double alpha, int32_t gamma);

// Its limit for gamma -> infinity: 1 / (1 - alpha); +infinity for alpha == 1.
double tokens_per_call_limit(double alpha);

// Walltime speedup over autoregressive decoding with draft/target cost ratio c (>= 0):
// (1 - alpha^(gamma+1)) / ((1 - alpha)(gamma c + 1)).
double expected_speedup(double alpha, int32_t gamma, double cost_ratio);

// Pankratov & Alistarh (EACL 2026): any speculative method whose target call verifies at most
// max_verified tokens has E[tokens per call] <= (mu + mu2) ln(max_verified) / mu^2 + O(1).
// The O(1) term is omitted (the paper gives no constant), so this is the leading term only; it is
// +infinity when mu == 0 (a deterministic target: no entropy bound, every draft can be right) and
// 0 for max_verified == 1. mu: mean entropy -sum p ln p, mu2: mean sum p (ln p)^2 over the target rows.
double pankratov_alistarh_bound(double mu, double mu2, int64_t max_verified);

// Running means over the target rows of a run: mu, mu2 (every row on the emitted path) and alpha
// (rows that had a proposal). Plain sums, so the mean does not depend on how rows were batched.
struct bound_accumulator {
    double sum_entropy = 0.0;
    double sum_entropy_sq = 0.0;
    int64_t n_rows = 0;
    double sum_alpha = 0.0;
    int64_t n_alpha = 0;

    void add_row(double entropy, double entropy_sq);
    void add_alpha(double alpha);  // a NaN alpha (bonus row) is skipped
    void merge(const bound_accumulator& other);
    void reset() { *this = bound_accumulator{}; }

    double mu() const;     // NaN when no rows
    double mu2() const;    // NaN when no rows
    double alpha() const;  // NaN when no alphas
};

}  // namespace specgen
