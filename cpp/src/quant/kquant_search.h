// Scale searches shared by the K-quant quantizers (q4_k.cpp, q5_k.cpp, q6_k.cpp).
#pragma once
#include <cstdint>

namespace specgen {
namespace quant {

// Affine fit x ~= scale*q + offset, q in [0, nmax], offset <= 0 (K-quants store -offset as a
// non-negative min). Tries a spread of candidate scales, refits (scale, offset) by least squares
// for each rounding, and returns the pair with the smallest squared error.
void fit_affine(const float* x, int n, int nmax, float* scale, float* offset);

// Symmetric fit x ~= scale*q, q in [-nneg, nneg-1]; same candidate search. Returns scale (may be
// negative: the extreme value maps to -nneg, which uses the asymmetric range fully).
float fit_symmetric(const float* x, int n, int nneg);

inline int nearest_int(float v) { return static_cast<int>(v >= 0 ? v + 0.5f : v - 0.5f); }

}  // namespace quant
}  // namespace specgen

namespace specgen {
namespace quant {
// One 256-element Q4_K/Q5_K super-block: fits each 32-element sub-block, packs the 8 scales and
// 8 mins to 6 bits against fp16 d/dmin, and requantizes x with the stored values into q (0..nmax).
void quantize_k_superblock(const float* x, int nmax, uint16_t* d, uint16_t* dmin, uint8_t scales[12],
                           uint8_t q[256]);
}  // namespace quant
}  // namespace specgen
