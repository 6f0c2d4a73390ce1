// AVX2 versions of the vec_math.h row kernels: the scalar reference's operations, in the same
// order, on 8 lanes; tails through masked loads and stores so that every element goes through the
// vector code whatever the row length (same bits as the scalar kernels, tests/test_vec_math.py).
// Compiled with -mavx2 -mfma ... -ffp-contract=off (CMakeLists.txt): the multiplies and adds below
// must not be fused. Only called when the CPU allows.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "backend/vec_math.h"

namespace specgen {
namespace vec {
namespace avx2 {
namespace {

inline __m256 set1(float v) { return _mm256_set1_ps(v); }

// exp_approx on 8 lanes.
inline __m256 exp8(__m256 x) {
    const __m256 lo = set1(kExpLo), magic = set1(kRoundMagic);
    const __m256 below = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    x = _mm256_max_ps(lo, x);  // lo > x ? lo : x
    x = _mm256_min_ps(set1(kExpHi), x);
    const __m256 t = _mm256_add_ps(_mm256_mul_ps(x, set1(kLog2e)), magic);
    const __m256 n = _mm256_sub_ps(t, magic);
    __m256 r = _mm256_sub_ps(x, _mm256_mul_ps(n, set1(kLn2Hi)));
    r = _mm256_sub_ps(r, _mm256_mul_ps(n, set1(kLn2Lo)));
    __m256 p = set1(kExpP0);
    p = _mm256_add_ps(_mm256_mul_ps(p, r), set1(kExpP1));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), set1(kExpP2));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), set1(kExpP3));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), set1(kExpP4));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), set1(kExpP5));
    const __m256 y = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(p, _mm256_mul_ps(r, r)), r), set1(1.0f));
    const __m256 scale = _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_castps_si256(t), _mm256_set1_epi32(127)), 23));
    return _mm256_andnot_ps(below, _mm256_mul_ps(y, scale));
}

inline __m256 tanh8(__m256 x) {
    const __m256 sign = set1(-0.0f), one = set1(1.0f);
    const __m256 ax = _mm256_andnot_ps(sign, x);
    const __m256 s = _mm256_mul_ps(x, x);
    __m256 p = set1(kTanhP0);
    p = _mm256_add_ps(_mm256_mul_ps(p, s), set1(kTanhP1));
    p = _mm256_add_ps(_mm256_mul_ps(p, s), set1(kTanhP2));
    p = _mm256_add_ps(_mm256_mul_ps(p, s), set1(kTanhP3));
    p = _mm256_add_ps(_mm256_mul_ps(p, s), set1(kTanhP4));
    const __m256 small = _mm256_add_ps(_mm256_mul_ps(_mm256_mul_ps(p, s), x), x);
    const __m256 e = exp8(_mm256_mul_ps(set1(2.0f), ax));
    const __m256 big = _mm256_sub_ps(one, _mm256_div_ps(set1(2.0f), _mm256_add_ps(e, one)));
    const __m256 big_signed = _mm256_or_ps(big, _mm256_and_ps(x, sign));
    return _mm256_blendv_ps(big_signed, small, _mm256_cmp_ps(ax, set1(kTanhSmall), _CMP_LT_OQ));
}

// mul_sigmoid: (g * (v < 0 ? e : 1)) / (1 + e), e = e^-|v|.
inline __m256 mul_sigmoid8(__m256 g, __m256 v) {
    const __m256 one = set1(1.0f);
    const __m256 e = exp8(_mm256_or_ps(v, set1(-0.0f)));
    const __m256 sel = _mm256_blendv_ps(one, e, _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_LT_OQ));
    return _mm256_div_ps(_mm256_mul_ps(g, sel), _mm256_add_ps(one, e));
}

inline __m256 gelu8(__m256 g) {
    const __m256 v = _mm256_mul_ps(g, _mm256_add_ps(set1(kGeluA), _mm256_mul_ps(set1(kGeluB), _mm256_mul_ps(g, g))));
    return mul_sigmoid8(g, v);
}

inline __m256 silu8(__m256 g) { return mul_sigmoid8(g, g); }

// Lane mask for the first `rem` (< 8) lanes.
inline __m256i tail_mask(int64_t rem) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(int(rem)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

template <class F>
inline void map1(const float* x, int64_t n, float* y, F f) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, f(_mm256_loadu_ps(x + i)));
    if (i < n) {
        const __m256i m = tail_mask(n - i);
        _mm256_maskstore_ps(y + i, m, f(_mm256_maskload_ps(x + i, m)));
    }
}

template <class F>
inline void map_mul(const float* g, const float* u, int64_t n, float* out, F f) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_mul_ps(f(_mm256_loadu_ps(g + i)), _mm256_loadu_ps(u + i)));
    if (i < n) {
        const __m256i m = tail_mask(n - i);
        _mm256_maskstore_ps(out + i, m, _mm256_mul_ps(f(_mm256_maskload_ps(g + i, m)), _mm256_maskload_ps(u + i, m)));
    }
}

}  // namespace

void exp_row(const float* x, int64_t n, float* y) { map1(x, n, y, exp8); }
void tanh_row(const float* x, int64_t n, float* y) { map1(x, n, y, tanh8); }
void gelu_mul(const float* gate, const float* up, int64_t n, float* out) { map_mul(gate, up, n, out, gelu8); }
void silu_mul(const float* gate, const float* up, int64_t n, float* out) { map_mul(gate, up, n, out, silu8); }

float exp_sub_sum(float* x, int64_t n, float sub) {
    const __m256 vs = set1(sub);
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vs));
        _mm256_storeu_ps(x + i, e);
        acc = _mm256_add_ps(acc, e);
    }
    // ((a0+a4) + (a2+a6)) + ((a1+a5) + (a3+a7)), as the scalar kernel.
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    float s = _mm_cvtss_f32(_mm_add_ss(s4, _mm_movehdup_ps(s4)));
    if (i < n) {
        const __m256i m = tail_mask(n - i);
        const __m256 e = exp8(_mm256_sub_ps(_mm256_maskload_ps(x + i, m), vs));
        _mm256_maskstore_ps(x + i, m, e);
        alignas(32) float lanes[8];
        _mm256_store_ps(lanes, e);
        for (int64_t k = 0; k < n - i; ++k) s += lanes[k];
    }
    return s;
}

namespace {

// dot_rows: the scalar kernel's 8 partial sums of one (query, key) pair live in one ymm. A tile of
// NQ queries by 4 keys keeps 4 NQ independent add chains in flight, and each key vector loaded serves
// every query of the tile.
inline float combine8(__m256 acc) {
    // ((a0+a4) + (a1+a5)) + ((a2+a6) + (a3+a7)), as the scalar kernel.
    const __m128 b = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    const __m128 h = _mm_hadd_ps(b, b);
    return _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
}

inline float dot_tail(const float* q, const float* k, int64_t i, int64_t n, float s) {
    for (; i < n; ++i) s += q[i] * k[i];
    return s;
}

// out[i][j0 + c] for queries i < NQ and keys j0 + c, c < 4.
template <int NQ>
inline void dot_tile(const float* const* q, const float* K, int64_t stride, int j0, int64_t n, float* const* out) {
    const int64_t n8 = n / 8 * 8;
    const float* k[4];
    for (int c = 0; c < 4; ++c) k[c] = K + (j0 + c) * stride;
    __m256 acc[NQ][4];
    for (int i = 0; i < NQ; ++i)
        for (int c = 0; c < 4; ++c) acc[i][c] = _mm256_setzero_ps();
    for (int64_t d = 0; d < n8; d += 8) {
        __m256 x[NQ];
        for (int i = 0; i < NQ; ++i) x[i] = _mm256_loadu_ps(q[i] + d);
        for (int c = 0; c < 4; ++c) {
            const __m256 kc = _mm256_loadu_ps(k[c] + d);
            for (int i = 0; i < NQ; ++i) acc[i][c] = _mm256_add_ps(acc[i][c], _mm256_mul_ps(x[i], kc));
        }
    }
    for (int i = 0; i < NQ; ++i)
        for (int c = 0; c < 4; ++c) out[i][j0 + c] = dot_tail(q[i], k[c], n8, n, combine8(acc[i][c]));
}

inline float dot_one(const float* q, const float* k, int64_t n) {
    const int64_t n8 = n / 8 * 8;
    __m256 a = _mm256_setzero_ps();
    for (int64_t i = 0; i < n8; i += 8) a = _mm256_add_ps(a, _mm256_mul_ps(_mm256_loadu_ps(q + i), _mm256_loadu_ps(k + i)));
    return dot_tail(q, k, n8, n, combine8(a));
}

// weighted_sum_rows_add: NV vectors of outputs stay in registers while the rows stream past.
template <int NV>
inline void weighted_block(const float* w, const float* V, int64_t stride, int n_rows, float* o, __m256i last) {
    __m256 acc[NV];
    for (int c = 0; c + 1 < NV; ++c) acc[c] = _mm256_loadu_ps(o + 8 * c);
    acc[NV - 1] = _mm256_maskload_ps(o + 8 * (NV - 1), last);
    for (int j = 0; j < n_rows; ++j) {
        const __m256 wj = set1(w[j]);
        const float* v = V + j * stride;
        for (int c = 0; c + 1 < NV; ++c) acc[c] = _mm256_add_ps(acc[c], _mm256_mul_ps(wj, _mm256_loadu_ps(v + 8 * c)));
        acc[NV - 1] = _mm256_add_ps(acc[NV - 1], _mm256_mul_ps(wj, _mm256_maskload_ps(v + 8 * (NV - 1), last)));
    }
    for (int c = 0; c + 1 < NV; ++c) _mm256_storeu_ps(o + 8 * c, acc[c]);
    _mm256_maskstore_ps(o + 8 * (NV - 1), last, acc[NV - 1]);
}

// The grouped value sum: NO outputs by NS vectors of columns [c, c + 8 NS) in registers while the rows
// stream past, each row's vectors loaded once for all of them. NO NS = 8 keeps 8 add chains in flight.
template <int NO, int NS>
inline void weighted_tile(const float* const* w, const float* V, int64_t stride, int n_rows, int64_t c, float* const* o) {
    __m256 acc[NO][NS];
    for (int i = 0; i < NO; ++i)
        for (int s = 0; s < NS; ++s) acc[i][s] = _mm256_loadu_ps(o[i] + c + 8 * s);
    for (int j = 0; j < n_rows; ++j) {
        const float* v = V + j * stride + c;
        __m256 vs[NS];
        for (int s = 0; s < NS; ++s) vs[s] = _mm256_loadu_ps(v + 8 * s);
        for (int i = 0; i < NO; ++i) {
            const __m256 wj = set1(w[i][j]);
            for (int s = 0; s < NS; ++s) acc[i][s] = _mm256_add_ps(acc[i][s], _mm256_mul_ps(wj, vs[s]));
        }
    }
    for (int i = 0; i < NO; ++i)
        for (int s = 0; s < NS; ++s) _mm256_storeu_ps(o[i] + c + 8 * s, acc[i][s]);
}

}  // namespace

void dot_rows_multi(const float* const* q, int n_q, const float* K, int64_t stride, int n_keys, int64_t n,
                    float* const* out) {
    int j = 0;
    for (; j + 4 <= n_keys; j += 4) {
        int i = 0;
        for (; i + 2 <= n_q; i += 2) dot_tile<2>(q + i, K, stride, j, n, out + i);
        if (i < n_q) dot_tile<1>(q + i, K, stride, j, n, out + i);
    }
    for (; j < n_keys; ++j)
        for (int i = 0; i < n_q; ++i) out[i][j] = dot_one(q[i], K + j * stride, n);
}

void dot_rows(const float* q, const float* K, int64_t stride, int n_keys, int64_t n, float* out) {
    dot_rows_multi(&q, 1, K, stride, n_keys, n, &out);
}

void weighted_sum_rows_add(const float* w, const float* V, int64_t stride, int n_rows, int64_t n, float* o) {
    const __m256i all = _mm256_set1_epi32(-1);
    int64_t c = 0;
    for (; c + 64 <= n; c += 64) weighted_block<8>(w, V + c, stride, n_rows, o + c, all);
    for (; c < n; c += 8) weighted_block<1>(w, V + c, stride, n_rows, o + c, n - c >= 8 ? all : tail_mask(n - c));
}

namespace {
// Outputs [0, NO) of the group over every column: whole tiles, then the last n % (8 NS) columns through
// the one-output kernel.
template <int NO, int NS>
inline void weighted_outputs(const float* const* w, const float* V, int64_t stride, int n_rows, int64_t n, float* const* o) {
    const int64_t whole = n / (8 * NS) * (8 * NS);
    for (int64_t c = 0; c < whole; c += 8 * NS) weighted_tile<NO, NS>(w, V, stride, n_rows, c, o);
    if (whole < n)
        for (int i = 0; i < NO; ++i) weighted_sum_rows_add(w[i], V + whole, stride, n_rows, n - whole, o[i] + whole);
}
}  // namespace

void weighted_sum_rows_add_multi(const float* const* w, int n_o, const float* V, int64_t stride, int n_rows, int64_t n,
                                 float* const* o) {
    // Tiles of 4 outputs by 16 columns, the rest as 3 by 16 or 2 by 32 (6 or 8 accumulators); a single
    // output takes the one-output kernel, whose 64 columns keep 8 chains in flight.
    int i = 0;
    for (; i + 4 <= n_o; i += 4) weighted_outputs<4, 2>(w + i, V, stride, n_rows, n, o + i);
    if (n_o - i == 3) weighted_outputs<3, 2>(w + i, V, stride, n_rows, n, o + i);
    else if (n_o - i == 2) weighted_outputs<2, 4>(w + i, V, stride, n_rows, n, o + i);
    else if (n_o - i == 1) weighted_sum_rows_add(w[i], V, stride, n_rows, n, o[i]);
}

// argmax_finite: the maximum and any NaN / +inf in one pass, then the first index holding it.
int64_t argmax_finite(const float* x, int64_t n) {
    const __m256 inf = set1(INFINITY), ninf = set1(-INFINITY);
    __m256 mx = ninf, bad = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        bad = _mm256_or_ps(bad, _mm256_or_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q), _mm256_cmp_ps(v, inf, _CMP_EQ_OQ)));
        mx = _mm256_max_ps(mx, v);
    }
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, mx);
    float best = lanes[0];
    for (int k = 1; k < 8; ++k) best = lanes[k] > best ? lanes[k] : best;
    for (int64_t k = i; k < n; ++k) {
        if (x[k] != x[k] || x[k] == INFINITY) return -1;
        best = x[k] > best ? x[k] : best;
    }
    if (_mm256_movemask_ps(bad)) return -1;
    const __m256 vb = set1(best);
    for (i = 0; i + 8 <= n; i += 8) {
        const int hit = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), vb, _CMP_EQ_OQ));
        if (hit) return i + __builtin_ctz(unsigned(hit));
    }
    for (; i < n; ++i)
        if (x[i] == best) return i;
    return 0;  // unreachable: the maximum is one of the elements
}

// top_k: as the AVX-512 version, eight at a time.
void top_k(const float* x, int64_t n, int k, float* val, int32_t* idx) {
    int filled = 0;
    int64_t i = 0;
    for (; i < n && i < k; ++i) top_k_push(x[i], int32_t(i), k, filled, val, idx);
    for (; i + 8 <= n; i += 8) {
        unsigned above = unsigned(_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), set1(val[k - 1]), _CMP_GT_OQ)));
        for (; above; above &= above - 1) {
            const int64_t j = i + __builtin_ctz(above);
            top_k_push(x[j], int32_t(j), k, filled, val, idx);
        }
    }
    for (; i < n; ++i) top_k_push(x[i], int32_t(i), k, filled, val, idx);
}

}  // namespace avx2
}  // namespace vec
}  // namespace specgen
