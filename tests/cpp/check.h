// The C++ tests' assertion: check(ok, what) prints what failed and counts it, so one run reports
// every failure; main() returns non-zero when `failures` > 0.
#pragma once
#include <cstdio>
#include <string>

namespace test_support {

inline int failures = 0;

inline void check(bool ok, const std::string& what) {
    if (!ok) {
        std::fprintf(stderr, "FAIL: %s\n", what.c_str());
        ++failures;
    }
}

}  // namespace test_support
