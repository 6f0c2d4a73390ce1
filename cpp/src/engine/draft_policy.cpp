// The batch-aware draft length policy (engine/draft_policy.h, docs/ALGORITHMS.md section 7).
#include "engine/draft_policy.h"

#include <algorithm>
#include <cmath>

namespace specgen {

namespace {
constexpr int kMaxRows = 4096;
constexpr double kSmoothing = 0.2;   // weight of a new measurement once a row count has 4 samples
// Before anything is measured: the shape of this machine's CPU forward (docs/ALGORITHMS.md section 7):
// a fixed part (weights streamed once) plus a per-row part.
constexpr double kPriorFixed = 0.72, kPriorPerRow = 0.28;
}  // namespace

void draft_policy::step_table::observe(int rows, double seconds) {
    if (rows < 1 || rows >= kMaxRows || !(seconds > 0)) return;
    if (int(t_.size()) <= rows) {
        t_.resize(rows + 1, 0.0);
        n_.resize(rows + 1, 0);
    }
    const int n = n_[rows]++;
    t_[rows] = n == 0 ? seconds : t_[rows] + std::max(kSmoothing, 1.0 / (n + 1)) * (seconds - t_[rows]);
}

double draft_policy::step_table::seconds(int rows) const {
    rows = std::max(1, rows);
    if (rows < int(t_.size()) && n_[rows] > 0) return t_[rows];
    // Nearest measured row counts below and above.
    int lo = -1, hi = -1;
    for (int r = std::min(rows, int(t_.size()) - 1); r >= 1; --r)
        if (n_[r] > 0) { lo = r; break; }
    for (int r = rows + 1; r < int(t_.size()); ++r)
        if (n_[r] > 0) { hi = r; break; }
    if (lo > 0 && hi > 0) return t_[lo] + (t_[hi] - t_[lo]) * double(rows - lo) / double(hi - lo);
    const int known = lo > 0 ? lo : hi;
    if (known < 0) return kPriorFixed + kPriorPerRow * rows;  // relative units: only ratios matter then
    // One side only: the prior's shape scaled to the measured point, never below it.
    const double scale = t_[known] / (kPriorFixed + kPriorPerRow * known);
    const double est = scale * (kPriorFixed + kPriorPerRow * rows);
    return rows > known ? std::max(est, t_[known]) : std::min(est, t_[known]);
}

double draft_policy::acceptance(int64_t n_accepted, int64_t n_drafted) {
    const double a = (double(n_accepted) + 1.0) / (double(n_drafted) + 2.0);
    return std::min(0.95, std::max(0.0, a));
}

double draft_policy::expected_tokens(double a, int g) {
    if (a <= 0) return 1.0;
    return (1.0 - std::pow(a, g + 1)) / (1.0 - a);
}

int draft_policy::amortized_catch_up(int rows_behind, double acceptance, int max_draft, int64_t tokens_left) {
    if (rows_behind <= 0) return 0;
    const double rounds_left = std::max(1.0, double(std::max<int64_t>(1, tokens_left)) /
                                                 expected_tokens(acceptance, std::max(1, max_draft)));
    return int(std::min<double>(rows_behind, std::ceil(rows_behind / rounds_left)));
}

bool draft_policy::catch_up_outweighs(int rows_behind, int64_t tokens_left) {
    // A catch-up row of the 0.5B draft cost 2.6-2.8 ms beside the 1.5B target on 2 cores, and a token
    // it then drafts saves 10-17 ms of plain decoding: a row per 4 tokens left is about break-even.
    // A 1409-token prompt with 64 tokens to write decoded 2.3x slower with the draft than without
    // (docs/bench/draft-catch-up-2026-12-06.md).
    constexpr int64_t kCatchUpRowsPerToken = 4;
    return rows_behind > 0 && int64_t(rows_behind) > kCatchUpRowsPerToken * tokens_left;
}

double draft_policy::draft_step_seconds(int rows) const {
    if (rows <= 0) return 0;
    return draft_.empty() ? size_ratio_ * target_.seconds(rows) : draft_.seconds(rows);
}

void draft_policy::choose(const std::vector<sequence>& seqs, int fixed_rows, std::vector<int>& caps,
                          bool batched_drafts) const {
    const size_t B = seqs.size();
    caps.assign(B, 0);
    double tokens = double(B);  // every sequence emits at least one token
    double draft_time = 0;
    int rows = fixed_rows;
    double best = tokens / step_seconds(rows);
    // Batched drafts: level[j] = rows of draft position j's forward (a sequence's first position also
    // carries its catch-up rows).
    std::vector<int> level;
    auto draft_rows = [&](size_t b) { return caps[b] == 0 ? 1 + std::max(0, seqs[b].catch_up_rows) : 1; };
    auto draft_delta = [&](int j, int added) {
        const int now = j < int(level.size()) ? level[j] : 0;
        return draft_step_seconds(now + added) - draft_step_seconds(now);
    };
    auto gain_of = [&](size_t b) {
        return expected_tokens(seqs[b].acceptance, caps[b] + 1) - expected_tokens(seqs[b].acceptance, caps[b]);
    };
    // Greedy: E is concave in g, the step time grows with rows, so adding the best single draft token
    // while the rate improves finds the maximum of the separable objective. With batched drafts a draft
    // position's first row also pays the draft forward's fixed part, so a move may also add one token to
    // every sequence whose draft has the same length.
    for (;;) {
        int pick = -1, pick_level = -1, pick_rows = 0;
        double pick_rate = best, pick_gain = 0, pick_draft = 0;
        for (size_t b = 0; b < B; ++b) {
            if (caps[b] >= seqs[b].max_draft) continue;
            const double gain = gain_of(b);
            const double draft = batched_drafts ? draft_delta(caps[b], draft_rows(b)) : seqs[b].draft_seconds;
            const double rate = (tokens + gain) / (step_seconds(rows + 1) + draft_time + draft);
            if (rate > pick_rate * (1.0 + 1e-9)) {
                pick = int(b);
                pick_level = -1;
                pick_rows = 1;
                pick_rate = rate;
                pick_gain = gain;
                pick_draft = draft;
            }
        }
        if (batched_drafts) {
            for (size_t c = 0; c < B; ++c) {  // c: a sequence whose length names the level
                if (caps[c] >= seqs[c].max_draft) continue;
                bool first = true;
                for (size_t b = 0; b < c && first; ++b) first = caps[b] != caps[c] || caps[b] >= seqs[b].max_draft;
                if (!first) continue;
                double gain = 0;
                int m = 0, added = 0;
                for (size_t b = 0; b < B; ++b)
                    if (caps[b] == caps[c] && caps[b] < seqs[b].max_draft) {
                        gain += gain_of(b);
                        added += draft_rows(b);
                        ++m;
                    }
                if (m < 2) continue;  // the single move above
                const double draft = draft_delta(caps[c], added);
                const double rate = (tokens + gain) / (step_seconds(rows + m) + draft_time + draft);
                if (rate > pick_rate * (1.0 + 1e-9)) {
                    pick = -1;
                    pick_level = caps[c];
                    pick_rows = m;
                    pick_rate = rate;
                    pick_gain = gain;
                    pick_draft = draft;
                }
            }
        }
        if (pick < 0 && pick_level < 0) break;
        auto grow = [&](size_t b) {
            if (batched_drafts) {
                if (int(level.size()) <= caps[b]) level.resize(size_t(caps[b]) + 1, 0);
                level[caps[b]] += draft_rows(b);
            }
            caps[b] += 1;
        };
        if (pick >= 0) {
            grow(size_t(pick));
        } else {
            for (size_t b = 0; b < B; ++b)
                if (caps[b] == pick_level && caps[b] < seqs[b].max_draft) grow(b);
        }
        tokens += pick_gain;
        draft_time += pick_draft;
        rows += pick_rows;
        best = pick_rate;
    }
}

}  // namespace specgen
