#include "speculative/ssd/saguaro.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "common/error.h"

namespace specgen {

void saguaro_reweight(const token_dist& q, int f, float c, token_dist& out) {
    if (!(c >= 0.0f && c <= 1.0f)) throw invalid_argument_error("saguaro_reweight: c must be in [0, 1]");
    const size_t n = q.size();
    if (n == 0) throw invalid_argument_error("saguaro_reweight: empty distribution");
    out.ids.assign(q.ids.begin(), q.ids.end());
    out.probs.assign(q.probs.begin(), q.probs.end());
    if (c == 1.0f || f <= 0) return;
    // Indices of the f most probable entries (ties: lower id first).
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), size_t(0));
    const size_t top = std::min(n, size_t(f));
    auto better = [&](size_t a, size_t b) {
        return q.probs[a] != q.probs[b] ? q.probs[a] > q.probs[b] : q.ids[a] < q.ids[b];
    };
    std::partial_sort(order.begin(), order.begin() + top, order.end(), better);
    double rest = 0, head = 0;
    for (size_t i = 0; i < n; ++i) rest += q.probs[i];
    for (size_t i = 0; i < top; ++i) head += q.probs[order[i]];
    rest -= head;
    const double total = c * head + rest;
    if (!(total > 0)) return;  // c == 0 and the top f cover the support: keep q (documented in saguaro.h)
    for (size_t i = 0; i < top; ++i) out.probs[order[i]] *= c;
    for (auto& p : out.probs) p = float(p / total);
    // Drop entries that became zero (c == 0): a token_dist lists only positive probabilities.
    size_t w = 0;
    for (size_t i = 0; i < n; ++i)
        if (out.probs[i] > 0.0f) {
            out.ids[w] = out.ids[i];
            out.probs[w] = out.probs[i];
            ++w;
        }
    out.ids.resize(w);
    out.probs.resize(w);
}

std::vector<int> ssd_fanouts(ssd_schedule schedule, int f0, int K, double a, double r) {
    std::vector<int> f(size_t(std::max(0, K) + 1), f0);
    if (schedule == ssd_schedule::geometric)
        for (int k = 0; k <= K; ++k)
            f[size_t(k)] = std::max(1, int(std::lround(f0 * std::pow(a, k / (1.0 + r)))));
    return f;
}

double acceptance_estimate::value() const { return std::min(0.95, std::max(0.05, accepted_ / tried_)); }

void acceptance_estimate::update(int gamma, int n_accepted) {
    if (gamma <= 0) return;
    accepted_ = kDecay * accepted_ + n_accepted;
    tried_ = kDecay * tried_ + n_accepted + (n_accepted < gamma ? 1 : 0);
}

}  // namespace specgen
