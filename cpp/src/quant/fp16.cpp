// IEEE half <-> float and bfloat16 <-> float scalar conversions, round to nearest even.
// Portable bit manipulation (no F16C), checked against numpy's float16 casts in tests/test_quant.py.
#include <cstring>

#include "quant/quant.h"

namespace specgen {

static inline uint32_t f32_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
static inline float bits_f32(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

float fp16_to_fp32(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
    const uint32_t exp = (h >> 10) & 0x1f;
    const uint32_t man = h & 0x3ff;
    if (exp == 0x1f) return bits_f32(sign | 0x7f800000u | (man << 13));  // inf / nan
    if (exp == 0) {
        // zero or subnormal: man * 2^-24, exact in float
        const float v = static_cast<float>(man) * 5.9604644775390625e-8f;
        return sign ? -v : v;
    }
    return bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t fp32_to_fp16(float f) {
    uint32_t x = f32_bits(f);
    const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
    x &= 0x7fffffffu;
    if (x > 0x7f800000u) return sign | 0x7e00 | ((x >> 13) & 0x3ff);  // nan stays quiet nan
    if (x >= 0x477ff000u) return sign | 0x7c00;                       // >= 65520 rounds to inf
    if (x >= 0x38800000u) {                                             // normal half
        const uint32_t rem = x & 0x1fff;
        uint32_t h = ((((x >> 23) - 112) << 10) | ((x & 0x7fffff) >> 13));
        if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) ++h;            // carry may bump exponent
        return sign | static_cast<uint16_t>(h);
    }
    // subnormal half: value in units of 2^-24 is m * 2^(e - 126)
    const int e = static_cast<int>(x >> 23);
    const int shift = 126 - e;  // >= 14
    if (shift > 24) return sign;
    const uint32_t m = (x & 0x7fffff) | (e ? 0x800000u : 0);
    uint32_t h = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) ++h;
    return sign | static_cast<uint16_t>(h);
}

float bf16_to_fp32(uint16_t h) { return bits_f32(static_cast<uint32_t>(h) << 16); }

uint16_t fp32_to_bf16(float f) {
    const uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40);  // quiet nan
    return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1)) >> 16);
}

}  // namespace specgen
