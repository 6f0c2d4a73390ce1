// $SPECGEN_VERIFY_TRACE=<file>: one JSON line per speculative round (gamma 0 included), appended to
// <file>, for measuring the verification rules against each other (tools/hsd_pair.py,
// docs/bench/hsd-pair-*.md). Each line holds the rule that ran, gamma, the accepted count k, the
// emitted token y with p_{k+1}(y) and q_{k+1}(y) (-1 for a bonus: no q row), p_i(x_i) / q_i(x_i) per
// draft position and, for BOTH rules on this same draft,
// P(n_accepted >= i | draft) (verifier::acceptance_reach): the exact expectation over the verifier's
// coins, so the rules compare without that sampling noise. Off (no file) costs one pointer test per
// round; on, a block reach costs gamma passes over p's support.
#pragma once
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "speculative/verify/verify.h"

namespace specgen {

class verify_trace {
public:
    // Null when $SPECGEN_VERIFY_TRACE is unset or empty; throws error when the file cannot be opened.
    static std::unique_ptr<verify_trace> from_env();
    explicit verify_trace(const std::string& path);
    ~verify_trace();
    verify_trace(const verify_trace&) = delete;
    verify_trace& operator=(const verify_trace&) = delete;

    // After a round was verified with `used` (the engine thread: one round at a time).
    void record(verifier& ver, verify_method used, const int32_t* draft, int32_t gamma, const token_dist* p,
                const token_dist* q, const verify_result& result);

private:
    std::FILE* file_ = nullptr;
    std::vector<double> reach_;
    std::string line_;
};

}  // namespace specgen
