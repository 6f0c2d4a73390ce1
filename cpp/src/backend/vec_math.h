// Element-wise math of the CPU backend: exp, tanh, GELU (tanh form) and SiLU without libm.
//
// The inline functions below are the scalar reference: branch-free float arithmetic, no fused
// multiply-adds, no library calls. vec_math_avx2.cpp and vec_math_avx512.cpp hold the same
// arithmetic on 8 / 16 lanes, and the row kernels at the end of this file dispatch on
// active_cpu_isa(). Every version performs the same IEEE operations in the same order (the
// vec_math*.cpp files are compiled with -ffp-contract=off, see CMakeLists.txt), so a kernel gives
// the same bits on every ISA and for every split of a row into chunks (batch and thread-count
// invariance); tests/test_vec_math.py checks both, and the accuracy against float64. The scalar
// kernels are also the path of CPUs without AVX2: selects are bit masks, not branches, so GCC
// vectorizes their loops for SSE2 (4 lanes).
//
// Use the row kernels from other code: a translation unit that includes this header with FMA
// enabled may contract the reference's a * b + c and get different bits.
#pragma once
#include <cstdint>
#include <cstring>

namespace specgen {
namespace vec {

// Clamp range of exp_approx. Above kExpHi the result would overflow (kExpHi * log2(e) < 127.5, so
// 2^n stays a normal float); below kExpLo = ln(FLT_MIN) the result is subnormal and 0 is returned.
constexpr float kExpHi = 88.3762626647949f;
constexpr float kExpLo = -87.3365447504f;
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kRoundMagic = 12582912.0f;  // 1.5 * 2^23: t = y + magic rounds y to an integer
constexpr float kLn2Hi = 0.693359375f;      // ln 2 = kLn2Hi + kLn2Lo; kLn2Hi has 9 bits: n * kLn2Hi is exact
constexpr float kLn2Lo = -2.12194440e-4f;
// Minimax polynomial of (e^r - 1 - r) / r^2 on |r| <= ln(2) / 2 (Cephes expf).
constexpr float kExpP0 = 1.9875691500e-4f, kExpP1 = 1.3981999507e-3f, kExpP2 = 8.3334519073e-3f,
                kExpP3 = 4.1665795894e-2f, kExpP4 = 1.6666665459e-1f, kExpP5 = 5.0000001201e-1f;
// tanh(x) = x + x^3 P(x^2) for |x| < kTanhSmall (Cephes tanhf); 1 - 2 / (e^{2|x|} + 1) above.
constexpr float kTanhSmall = 0.625f;
constexpr float kTanhP0 = -5.70498872745e-3f, kTanhP1 = 2.06390887954e-2f, kTanhP2 = -5.37397155531e-2f,
                kTanhP3 = 1.33314422036e-1f, kTanhP4 = -3.33332819422e-1f;
// GELU, tanh form: 0.5 g (1 + tanh(u)) with u = sqrt(2/pi) (g + 0.044715 g^3). Since
// 0.5 (1 + tanh(u)) = sigmoid(2u), it is computed as g sigmoid(v), v = g (kGeluA + kGeluB g^2):
// one exp and no cancellation in 1 + tanh(u) for negative g.
constexpr float kGeluA = 1.5957691216057308f;               // 2 sqrt(2/pi)
constexpr float kGeluB = 1.5957691216057308f * 0.044715f;   // 2 sqrt(2/pi) 0.044715

static inline uint32_t float_bits(float x) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    return u;
}
static inline float bits_float(uint32_t u) {
    float x;
    std::memcpy(&x, &u, 4);
    return x;
}
// c ? a : b through bit masks: GCC does not if-convert `c ? a : x * y` (the multiply might trap),
// and a branch in the loop stops vectorization.
static inline float select(bool c, float a, float b) {
    const uint32_t m = 0u - uint32_t(c);
    return bits_float((float_bits(a) & m) | (float_bits(b) & ~m));
}

// e^x to 1 ulp for x in [kExpLo, kExpHi]; 0 below (also for -inf), e^kExpHi (~2.4e38, finite)
// above (also for +inf); NaN stays NaN.
static inline float exp_approx(float x) {
    const bool below = x < kExpLo;
    x = select(kExpLo > x, kExpLo, x);  // as maxps/minps(const, x): NaN passes through
    x = select(kExpHi < x, kExpHi, x);
    // x = n ln2 + r, n = round(x log2 e), |r| <= ln2/2 (Cody-Waite: n ln2 subtracted in two parts).
    const float t = x * kLog2e + kRoundMagic;
    const float n = t - kRoundMagic;
    float r = x - n * kLn2Hi;
    r = r - n * kLn2Lo;
    float p = kExpP0;
    p = p * r + kExpP1;
    p = p * r + kExpP2;
    p = p * r + kExpP3;
    p = p * r + kExpP4;
    p = p * r + kExpP5;
    const float y = (p * (r * r) + r) + 1.0f;
    // 2^n: the low bits of t hold n (t = 1.5 * 2^23 + n); adding the bias and shifting into the
    // exponent field drops the rest.
    const float scale = bits_float((float_bits(t) + 127u) << 23);
    return select(below, 0.0f, y * scale);
}

// tanh(x) to about 1.5 ulp; odd, exactly +-1 for |x| > 9.011.
static inline float tanh_approx(float x) {
    const float ax = bits_float(float_bits(x) & 0x7fffffffu);
    const float s = x * x;
    float p = kTanhP0;
    p = p * s + kTanhP1;
    p = p * s + kTanhP2;
    p = p * s + kTanhP3;
    p = p * s + kTanhP4;
    const float small = (p * s) * x + x;
    const float big = 1.0f - 2.0f / (exp_approx(2.0f * ax) + 1.0f);
    const float big_signed = bits_float(float_bits(big) | (float_bits(x) & 0x80000000u));
    return select(ax < kTanhSmall, small, big_signed);
}

// g sigmoid(v) = g / (1 + e^-v), as (g e^v) / (1 + e^v) for v < 0: the exp argument is -|v| <= 0,
// so a very negative v gives 0 (times g), not g / e^kExpHi.
static inline float mul_sigmoid(float g, float v) {
    const float e = exp_approx(bits_float(float_bits(v) | 0x80000000u));  // e^-|v|
    return (g * select(v < 0.0f, e, 1.0f)) / (1.0f + e);
}

// gelu_tanh(g) = 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))), see kGeluA.
static inline float gelu_approx(float g) { return mul_sigmoid(g, g * (kGeluA + kGeluB * (g * g))); }

// silu(g) = g / (1 + e^-g)
static inline float silu_approx(float g) { return mul_sigmoid(g, g); }

// ---- Row kernels (vec_math.cpp), dispatched on active_cpu_isa(); same bits on every ISA --------
// In place allowed (y == x, out == gate) for all of them.
void exp_row(const float* x, int64_t n, float* y);                               // y = exp_approx(x)
void tanh_row(const float* x, int64_t n, float* y);                              // y = tanh_approx(x)
void gelu_mul(const float* gate, const float* up, int64_t n, float* out);         // gelu_approx(g) * u
void silu_mul(const float* gate, const float* up, int64_t n, float* out);         // silu_approx(g) * u
// x[i] = exp_approx(x[i] - sub) for i < n; returns their sum in a fixed order: 8 partial sums
// acc[i % 8] over whole groups of 8, combined as ((acc0+acc4) + (acc2+acc6)) + ((acc1+acc5) +
// (acc3+acc7)), then the remaining n % 8 terms one by one.
float exp_sub_sum(float* x, int64_t n, float sub);
// x[i] = c * tanh_approx(x[i] / c) for i < n, c > 0: logit soft-capping. The one implementation for
// every logits path (full head, NanoSpec's head over S), so capped logits of one id agree bit for bit.
void softcap_row(float* x, int64_t n, float c);

// Attention's two inner loops (backend/cpu_backend.cpp). The order of every sum is fixed by n alone:
// dot_rows: out[j] = dot(q, K + j * stride) for j < n_keys, each dot with 8 partial sums acc[i % 8]
//   over whole groups of 8, combined as ((acc0+acc4) + (acc1+acc5)) + ((acc2+acc6) + (acc3+acc7)),
//   then the remaining n % 8 products one by one.
// weighted_sum_rows: o[d] = (..((0 + w[0] V[0][d]) + w[1] V[1][d]) + ..) for d < n, rows `stride`
//   floats apart: each output a sum over the rows in row order.
// weighted_sum_rows_add: the same sums continued from o's values, o[d] = (..(o[d] + w[0] V[0][d]) + ..):
//   rows taken in consecutive blocks give weighted_sum_rows' bits.
void dot_rows(const float* q, const float* K, int64_t stride, int n_keys, int64_t n, float* out);
void weighted_sum_rows(const float* w, const float* V, int64_t stride, int n_rows, int64_t n, float* o);
void weighted_sum_rows_add(const float* w, const float* V, int64_t stride, int n_rows, int64_t n, float* o);
// The same two for a group of queries that read the same cache rows (the query heads of one kv head,
// the query rows of one work item), which then pass through registers and L1 once for all of them:
// dot_rows_multi: out[i][j] = dot(q[i], K + j * stride) for i < n_q, each dot in dot_rows' order;
// weighted_sum_rows_add_multi: o[i] continued over the rows with weights w[i], as weighted_sum_rows_add.
// Each output has the bits the one-query kernel gives it.
void dot_rows_multi(const float* const* q, int n_q, const float* K, int64_t stride, int n_keys, int64_t n,
                    float* const* out);
void weighted_sum_rows_add_multi(const float* const* w, int n_o, const float* V, int64_t stride, int n_rows, int64_t n,
                                 float* const* o);

// Index of the first maximum of x[0..n), n > 0, when every x[i] is finite or -inf; -1 when some x[i]
// is NaN or +inf (the caller names it). Greedy decoding's argmax over the whole vocabulary.
int64_t argmax_finite(const float* x, int64_t n);

// The k largest of x[0..n), 1 <= k <= n, best first: values in val[0..k), indices in idx[0..k).
// Every element is offered in index order to top_k_push (strict >): among equal values the lower
// index comes first. NaN never beats a kept value, so one is kept only among the first k elements.
// NanoSpec's top-k over the whole vocabulary per verified row.
void top_k(const float* x, int64_t n, int k, float* val, int32_t* idx);

// Offers (x, i) to the best `filled` of k kept values (sorted best first); the one step every
// version of top_k shares, so they keep the same elements in the same order.
static inline void top_k_push(float x, int32_t i, int k, int& filled, float* val, int32_t* idx) {
    if (filled == k && !(x > val[k - 1])) return;
    int j = filled < k ? filled++ : k - 1;
    while (j > 0 && x > val[j - 1]) {
        val[j] = val[j - 1];
        idx[j] = idx[j - 1];
        --j;
    }
    val[j] = x;
    idx[j] = i;
}

// The per-ISA versions behind the dispatch (same contracts); tests call them through set_cpu_isa.
#define SPECGEN_VEC_MATH_KERNELS(ns)                                              \
    namespace ns {                                                                \
    void exp_row(const float* x, int64_t n, float* y);                            \
    void tanh_row(const float* x, int64_t n, float* y);                           \
    void gelu_mul(const float* gate, const float* up, int64_t n, float* out);     \
    void silu_mul(const float* gate, const float* up, int64_t n, float* out);     \
    float exp_sub_sum(float* x, int64_t n, float sub);                            \
    void dot_rows(const float* q, const float* K, int64_t stride, int n_keys, int64_t n, float* out); \
    void weighted_sum_rows_add(const float* w, const float* V, int64_t stride, int n_rows, int64_t n, float* o); \
    int64_t argmax_finite(const float* x, int64_t n);                             \
    void top_k(const float* x, int64_t n, int k, float* val, int32_t* idx);       \
    }
SPECGEN_VEC_MATH_KERNELS(scalar)
SPECGEN_VEC_MATH_KERNELS(avx2)
SPECGEN_VEC_MATH_KERNELS(avx512)
#undef SPECGEN_VEC_MATH_KERNELS
// The grouped attention kernels have a scalar reference (the one-query kernels in a loop) and AVX2 tiles;
// AVX-512 machines run the AVX2 tiles (same bits).
#define SPECGEN_VEC_MULTI_KERNELS(ns)                                                                           \
    namespace ns {                                                                                              \
    void dot_rows_multi(const float* const* q, int n_q, const float* K, int64_t stride, int n_keys, int64_t n,  \
                        float* const* out);                                                                     \
    void weighted_sum_rows_add_multi(const float* const* w, int n_o, const float* V, int64_t stride, int n_rows, \
                                     int64_t n, float* const* o);                                              \
    }
SPECGEN_VEC_MULTI_KERNELS(scalar)
SPECGEN_VEC_MULTI_KERNELS(avx2)
#undef SPECGEN_VEC_MULTI_KERNELS

}  // namespace vec
}  // namespace specgen
