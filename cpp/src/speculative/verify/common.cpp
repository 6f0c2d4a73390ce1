// The verifier's shared pieces: input checks, the dense scratch row, residual mass and sampling,
// per-row statistics, and the method dispatch. The rules themselves: token.cpp, block.cpp.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "common/error.h"
#include "speculative/verify/verify.h"

namespace specgen {

verifier::verifier(int32_t n_vocab) : n_vocab_(n_vocab) {
    if (n_vocab <= 0) throw invalid_argument_error("verifier: n_vocab = " + std::to_string(n_vocab));
    dense_.assign(static_cast<size_t>(n_vocab), 0.0f);
}

verify_result verifier::verify(verify_method method, const int32_t* draft, int32_t gamma,
                               const token_dist* p, const token_dist* q, rng& gen,
                               std::vector<verify_row_stats>* stats) {
    switch (method) {
        case verify_method::token: return verify_token(draft, gamma, p, q, gen, stats);
        case verify_method::block: return verify_block(draft, gamma, p, q, gen, stats);
    }
    throw invalid_argument_error("verify: unknown method " + std::to_string(static_cast<int>(method)));
}

static void check_dist(const token_dist& d, int32_t n_vocab, const char* side, int32_t row) {
    if (d.empty() || d.ids.size() != d.probs.size())
        throw invalid_argument_error(std::string("verify: ") + side + "_" + std::to_string(row + 1) +
                                     " is empty or has ids/probs of different lengths");
    // Checked up front so that no later step throws with the scratch row half written.
    for (int32_t id : d.ids)
        if (id < 0 || id >= n_vocab)
            throw invalid_argument_error(std::string("verify: ") + side + "_" + std::to_string(row + 1) +
                                         " has token id " + std::to_string(id) + " outside [0, " +
                                         std::to_string(n_vocab) + ")");
}

void verifier::check_inputs(const int32_t* draft, int32_t gamma, const token_dist* p,
                            const token_dist* q) const {
    if (gamma < 0) throw invalid_argument_error("verify: gamma = " + std::to_string(gamma));
    for (int32_t i = 0; i <= gamma; ++i) check_dist(p[i], n_vocab_, "p", i);
    for (int32_t i = 0; i < gamma; ++i) {
        check_dist(q[i], n_vocab_, "q", i);
        if (draft[i] < 0 || draft[i] >= n_vocab_)
            throw invalid_argument_error("verify: draft token x_" + std::to_string(i + 1) + " = " +
                                         std::to_string(draft[i]) + " outside [0, " +
                                         std::to_string(n_vocab_) + ")");
    }
}

// Ids were range-checked by check_inputs.
void verifier::scatter(const token_dist& q) {
    for (size_t j = 0; j < q.size(); ++j) dense_[static_cast<size_t>(q.ids[j])] = q.probs[j];
}

void verifier::gather(const token_dist& q) {
    for (int32_t id : q.ids) dense_[static_cast<size_t>(id)] = 0.0f;
}

void verifier::branch_mass(double rho, const token_dist& p, const token_dist& q, double& d_plus,
                           double& d_minus) const {
    // Over p's support both parts; q's mass outside p's support only adds to D-.
    double q_total = 0.0, q_on_p = 0.0;
    for (float v : q.probs) q_total += v;
    d_plus = d_minus = 0.0;
    for (size_t j = 0; j < p.size(); ++j) {
        const double b = dense_[static_cast<size_t>(p.ids[j])];
        const double diff = rho * p.probs[j] - b;
        q_on_p += b;
        if (diff > 0) d_plus += diff; else d_minus -= diff;
    }
    d_minus += std::max(0.0, q_total - q_on_p);
}

int32_t verifier::sample_residual(double rho, const token_dist& p, double d_plus, rng& gen) const {
    const double u = gen.uniform() * d_plus;
    double cum = 0.0;
    int32_t last = -1;
    for (size_t j = 0; j < p.size(); ++j) {
        const double diff = rho * p.probs[j] - dense_[static_cast<size_t>(p.ids[j])];
        if (diff <= 0) continue;
        cum += diff;
        last = p.ids[j];
        if (u < cum) return last;
    }
    return last;  // u within rounding of d_plus
}

int32_t verifier::correction(double rho, const token_dist& p, const token_dist& q, rng& gen) {
    scatter(q);
    double d_plus, d_minus;
    branch_mass(rho, p, q, d_plus, d_minus);
    const int32_t y = d_plus > 0 ? sample_residual(rho, p, d_plus, gen) : sample_token(p, gen);
    gather(q);
    return y;
}

void dist_entropy(const token_dist& p, double& entropy, double& entropy_sq) {
    entropy = entropy_sq = 0.0;
    for (float v : p.probs) {
        if (v <= 0.0f) continue;
        const double lp = std::log(static_cast<double>(v));
        entropy -= v * lp;
        entropy_sq += v * lp * lp;
    }
}

void verifier::record_stats(const token_dist* p, const token_dist* q, int32_t gamma,
                            int32_t n_accepted, std::vector<verify_row_stats>& stats) {
    stats.clear();
    for (int32_t i = 0; i <= n_accepted; ++i) {
        verify_row_stats s;
        dist_entropy(p[i], s.entropy, s.entropy_sq);
        s.alpha = std::numeric_limits<double>::quiet_NaN();
        if (i < gamma) {
            scatter(q[i]);
            double overlap = 0.0;
            for (size_t j = 0; j < p[i].size(); ++j)
                overlap += std::min(p[i].probs[j], dense_[static_cast<size_t>(p[i].ids[j])]);
            gather(q[i]);
            s.alpha = std::min(1.0, overlap);  // float probabilities can sum a hair above 1
        }
        stats.push_back(s);
    }
}

}  // namespace specgen
