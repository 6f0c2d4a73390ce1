// Portable seeded random number generator: xoshiro256** (Blackman & Vigna 2018) whose state is
// filled from the seed by splitmix64. Only fixed-width integer arithmetic is used, so one seed gives
// the same stream on every platform, compiler and standard library (std::mt19937 would, but the
// std:: distributions would not).
#pragma once
#include <cstdint>

namespace specgen {

class rng {
public:
    explicit rng(uint64_t seed = 0) { reseed(seed); }

    // Restarts the stream: rng(s) and a reseed(s) produce the same numbers afterwards.
    void reseed(uint64_t seed);

    // Next 64 random bits.
    uint64_t next_u64();

    // Uniform double in [0, 1): the top 53 bits of next_u64() scaled by 2^-53.
    double uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

    uint64_t seed() const { return seed_; }

private:
    uint64_t s_[4];
    uint64_t seed_ = 0;
};

}  // namespace specgen
