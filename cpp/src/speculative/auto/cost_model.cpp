// docs/ALGORITHMS.md section 8.1: round times of each method from the measured per-row costs.
#include "speculative/auto/cost_model.h"

#include <algorithm>

namespace specgen {

const char* auto_method_name(auto_method m) {
    switch (m) {
        case auto_method::none: return "none";
        case auto_method::ngram: return "ngram";
        case auto_method::self_nanospec: return "self+nanospec";
        case auto_method::draft_model: return "draft model";
        case auto_method::draft_head: return "draft head";
    }
    return "?";
}

namespace {
double extrapolate(const std::vector<double>& t, int rows) {
    if (t.empty()) return 0;
    rows = std::max(rows, 1);
    const int n = int(t.size());
    if (rows <= n) return t[size_t(rows - 1)];
    const double slope = n >= 2 ? std::max(0.0, t[size_t(n - 1)] - t[size_t(n - 2)]) : t[0];
    return t[size_t(n - 1)] + slope * (rows - n);
}
}  // namespace

double cost_model::verify_seconds(int rows) const { return extrapolate(verify, rows); }
double cost_model::head_seconds(int rows) const { return extrapolate(head_full, rows); }
double cost_model::draft_forward_seconds(int rows) const { return extrapolate(draft_forward, rows); }

double cost_model::round_seconds(auto_method m, int g, int n_ids, int chained) const {
    if (g <= 0 || m == auto_method::none) return verify_seconds(1);
    switch (m) {
        case auto_method::ngram:  // lookup costs microseconds; the target verifies g + 1 rows
            return verify_seconds(g + 1);
        case auto_method::self_nanospec:
            // g + 1 body rows (the last one for the hand-over), g heads over S; the verification
            // then runs only the full head over the g + 1 handed-over rows (section 4.7).
            return self_round_seconds(g + 1, g, n_ids);
        case auto_method::draft_model: {
            // g draft rows (the first one also forwards the token the last verdict emitted, which a
            // steady run forwards in the same call) and g heads; the target verifies g + 1 rows. With c
            // chained n-gram tokens the model drafts g - c: its first forward takes c + 1 rows, and a
            // match that fills the round runs no draft forward.
            const int c = std::clamp(chained, 0, g);
            const double drafting = c == g ? 0
                                           : draft_forward_seconds(c + 1) + (g - c - 1) * draft_forward_seconds(1) +
                                                 (g - c) * draft_head_seconds(n_ids);
            return drafting + verify_seconds(g + 1);
        }
        case auto_method::draft_head:
            // g head outputs (the seed row's, then one per drafted row), g head rows (g - 1 drafted ones,
            // and about one context row per emitted token written after the verdict); the target
            // verifies g + 1 rows.
            return g * (eagle3_row + eagle3_output_seconds(n_ids)) + verify_seconds(g + 1);
        default: return verify_seconds(1);
    }
}

double cost_model::stopped_round_seconds(int g, int n_ids) const {
    // g + 1 body rows and heads over S (the last one found the stop), all handed over: the target runs
    // the full head over g + 1 rows. With g = 0 that is a plain round whose body row the drafter ran.
    g = std::max(g, 0);
    return self_round_seconds(g + 1, g + 1, n_ids);
}

double cost_model::self_round_seconds(int rows, int subset_heads, int n_ids) const {
    return rows * body_row + subset_heads * subset_head_seconds(n_ids) + head_seconds(rows);
}

}  // namespace specgen
