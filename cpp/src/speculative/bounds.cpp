// Section 5 formulas; hand-computed values in tests/test_bounds.py.
#include "speculative/bounds.h"

#include <cmath>
#include <limits>
#include <string>

#include "common/error.h"

namespace specgen {

static void check_alpha(double alpha, const char* where) {
    if (!(alpha >= 0.0 && alpha <= 1.0))
        throw invalid_argument_error(std::string(where) + ": alpha = " + std::to_string(alpha) +
                                     " outside [0, 1]");
}

double expected_tokens_per_call(double alpha, int32_t gamma) {
    check_alpha(alpha, "expected_tokens_per_call");
    if (gamma < 0) throw invalid_argument_error("expected_tokens_per_call: gamma = " + std::to_string(gamma));
    // The geometric sum 1 + a + ... + a^g: equal to the closed form, exact at a = 1, and without the
    // cancellation of 1 - a^(g+1) over 1 - a near a = 1.
    double sum = 0.0, term = 1.0;
    for (int32_t i = 0; i <= gamma; ++i, term *= alpha) sum += term;
    return sum;
}

double tokens_per_call_limit(double alpha) {
    check_alpha(alpha, "tokens_per_call_limit");
    return alpha == 1.0 ? std::numeric_limits<double>::infinity() : 1.0 / (1.0 - alpha);
}

double expected_speedup(double alpha, int32_t gamma, double cost_ratio) {
    if (!(cost_ratio >= 0.0) || std::isinf(cost_ratio))
        throw invalid_argument_error("expected_speedup: cost_ratio = " + std::to_string(cost_ratio));
    return expected_tokens_per_call(alpha, gamma) / (gamma * cost_ratio + 1.0);
}

double pankratov_alistarh_bound(double mu, double mu2, int64_t max_verified) {
    if (!(mu >= 0.0) || !(mu2 >= 0.0))
        throw invalid_argument_error("pankratov_alistarh_bound: mu = " + std::to_string(mu) +
                                     ", mu2 = " + std::to_string(mu2) + " must be >= 0");
    if (max_verified < 1)
        throw invalid_argument_error("pankratov_alistarh_bound: max_verified = " +
                                     std::to_string(max_verified));
    const double log_p = std::log(static_cast<double>(max_verified));
    if (log_p == 0.0) return 0.0;
    if (mu == 0.0) return std::numeric_limits<double>::infinity();
    return (mu + mu2) * log_p / (mu * mu);
}

void bound_accumulator::add_row(double entropy, double entropy_sq) {
    sum_entropy += entropy;
    sum_entropy_sq += entropy_sq;
    ++n_rows;
}

void bound_accumulator::add_alpha(double a) {
    if (std::isnan(a)) return;
    sum_alpha += a;
    ++n_alpha;
}

void bound_accumulator::merge(const bound_accumulator& o) {
    sum_entropy += o.sum_entropy;
    sum_entropy_sq += o.sum_entropy_sq;
    n_rows += o.n_rows;
    sum_alpha += o.sum_alpha;
    n_alpha += o.n_alpha;
}

static double mean(double sum, int64_t n) {
    return n > 0 ? sum / static_cast<double>(n) : std::numeric_limits<double>::quiet_NaN();
}
double bound_accumulator::mu() const { return mean(sum_entropy, n_rows); }
double bound_accumulator::mu2() const { return mean(sum_entropy_sq, n_rows); }
double bound_accumulator::alpha() const { return mean(sum_alpha, n_alpha); }

}  // namespace specgen
