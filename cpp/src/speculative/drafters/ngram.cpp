// Prompt-lookup drafter (docs/ALGORITHMS.md section 6): find the most recent earlier occurrence of the
// longest suffix of the history (n_max tokens down to n_min) and propose the tokens that followed
// it. Deterministic, so every proposal is a point mass.
#include <algorithm>

#include "speculative/drafters/drafters.h"

namespace specgen {

namespace {

class ngram_drafter final : public drafter {
public:
    ngram_drafter(int n_max, int n_min) : n_max_(n_max), n_min_(n_min) {}
    std::string name() const override { return "ngram"; }
    void begin(const std::vector<int32_t>&) override {}

    void propose(const std::vector<int32_t>& h, int max_n, const sampling_params&, float, rng&,
                 proposal& out) override {
        out.clear();
        const int len = int(h.size());
        for (int n = std::min(n_max_, len - 1); n >= n_min_ && out.tokens.empty(); --n) {
            const int32_t* suffix = h.data() + len - n;
            // Most recent match first: recent text predicts the continuation best.
            for (int start = len - n - 1; start >= 0; --start) {
                if (!std::equal(suffix, suffix + n, h.data() + start)) continue;
                const int from = start + n;
                const int count = std::min(max_n, len - from);
                out.tokens.assign(h.begin() + from, h.begin() + from + count);
                out.ngram_order = count > 0 ? n : 0;
                break;
            }
        }
        if (out.q.size() < out.tokens.size()) out.q.resize(out.tokens.size());
        for (size_t i = 0; i < out.tokens.size(); ++i) out.q[i].set_point_mass(out.tokens[i]);
    }

private:
    int n_max_, n_min_;
};

}  // namespace

std::unique_ptr<drafter> make_ngram_drafter(int n_max, int n_min) {
    return std::make_unique<ngram_drafter>(n_max, n_min);
}

}  // namespace specgen
