// xoshiro256** seeded by splitmix64; see rng.h. Reference values: tests/test_sampling.py pins the
// first outputs for seed 0 so that a change to the stream is never silent.
#include "sampling/rng.h"

namespace specgen {

static uint64_t splitmix64(uint64_t& x) {
    uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void rng::reseed(uint64_t seed) {
    seed_ = seed;
    uint64_t x = seed;
    for (auto& s : s_) s = splitmix64(x);  // never all zero: splitmix64 is a bijection of a counter
}

uint64_t rng::next_u64() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
}

}  // namespace specgen
