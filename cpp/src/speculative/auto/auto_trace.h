// $SPECGEN_AUTO_TRACE=<file>: one JSON line per round of draft="auto", appended to <file>, for seeing
// why the policy chose what it chose (docs/bench/auto-timing-2026-12-05.md). Each line holds, at the
// choice: every candidate's prediction (its g, E[tokens], timing-corrected seconds, score) and the one
// chosen; after the verdict: what the round drafted and accepted, its measured seconds and what the
// cost model predicted for the round as drafted (the timing correction's input). Off (no file) costs
// one pointer test per round; on, every candidate is predicted once more per round.
#pragma once
#include <array>
#include <cstdio>
#include <memory>
#include <string>

#include "speculative/auto/policy.h"

namespace specgen {

class auto_trace {
public:
    // Null when $SPECGEN_AUTO_TRACE is unset or empty; throws error when the file cannot be opened.
    static std::unique_ptr<auto_trace> from_env();
    explicit auto_trace(const std::string& path);
    ~auto_trace();
    auto_trace(const auto_trace&) = delete;
    auto_trace& operator=(const auto_trace&) = delete;

    // At the choice: the policy's prediction for each method it may choose (n-gram lookup without a
    // proposal is predicted as a plain round, as it runs).
    void choice(const auto_policy& policy, const auto_round& round, const auto_choice& chosen, bool allow_neural);
    // After the verdict: the round drafted `drafted` of its g, `accepted` of them held, in `seconds`;
    // the cost model predicted `predicted_seconds` for it as drafted (0: untimed).
    void outcome(int drafted, int accepted, int chained, double seconds, double predicted_seconds);

private:
    std::FILE* file_ = nullptr;
    std::string line_;  // the choice's half of the pending line
};

}  // namespace specgen
