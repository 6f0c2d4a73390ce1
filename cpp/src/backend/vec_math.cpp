// Scalar row kernels of vec_math.h (the reference the AVX2 / AVX-512 versions are tested against)
// and the dispatch on active_cpu_isa(). Compiled with -ffp-contract=off (CMakeLists.txt).
#include "backend/vec_math.h"

#include <cmath>

#include "quant/quant.h"

namespace specgen {
namespace vec {

namespace scalar {

void exp_row(const float* x, int64_t n, float* y) {
    for (int64_t i = 0; i < n; ++i) y[i] = exp_approx(x[i]);
}

void tanh_row(const float* x, int64_t n, float* y) {
    for (int64_t i = 0; i < n; ++i) y[i] = tanh_approx(x[i]);
}

void gelu_mul(const float* gate, const float* up, int64_t n, float* out) {
    for (int64_t i = 0; i < n; ++i) out[i] = gelu_approx(gate[i]) * up[i];
}

void silu_mul(const float* gate, const float* up, int64_t n, float* out) {
    for (int64_t i = 0; i < n; ++i) out[i] = silu_approx(gate[i]) * up[i];
}

float exp_sub_sum(float* x, int64_t n, float sub) {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; ++k) {
            x[i + k] = exp_approx(x[i + k] - sub);
            acc[k] += x[i + k];
        }
    float s = ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
    for (; i < n; ++i) {
        x[i] = exp_approx(x[i] - sub);
        s += x[i];
    }
    return s;
}

void dot_rows(const float* q, const float* K, int64_t stride, int n_keys, int64_t n, float* out) {
    for (int j = 0; j < n_keys; ++j) {
        const float* k = K + j * stride;
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        int64_t i = 0;
        for (; i + 8 <= n; i += 8)
            for (int l = 0; l < 8; ++l) acc[l] += q[i + l] * k[i + l];
        float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
        for (; i < n; ++i) s += q[i] * k[i];
        out[j] = s;
    }
}

void weighted_sum_rows_add(const float* w, const float* V, int64_t stride, int n_rows, int64_t n, float* o) {
    for (int j = 0; j < n_rows; ++j) {
        const float* v = V + j * stride;
        for (int64_t d = 0; d < n; ++d) o[d] += w[j] * v[d];
    }
}

void dot_rows_multi(const float* const* q, int n_q, const float* K, int64_t stride, int n_keys, int64_t n,
                    float* const* out) {
    for (int i = 0; i < n_q; ++i) dot_rows(q[i], K, stride, n_keys, n, out[i]);
}

void weighted_sum_rows_add_multi(const float* const* w, int n_o, const float* V, int64_t stride, int n_rows, int64_t n,
                                 float* const* o) {
    for (int i = 0; i < n_o; ++i) weighted_sum_rows_add(w[i], V, stride, n_rows, n, o[i]);
}

int64_t argmax_finite(const float* x, int64_t n) {
    int64_t best = 0;
    for (int64_t i = 0; i < n; ++i) {
        if (x[i] != x[i] || x[i] == INFINITY) return -1;
        if (x[i] > x[best]) best = i;
    }
    return best;
}

void top_k(const float* x, int64_t n, int k, float* val, int32_t* idx) {
    int filled = 0;
    for (int64_t i = 0; i < n; ++i) top_k_push(x[i], int32_t(i), k, filled, val, idx);
}

}  // namespace scalar

#define SPECGEN_VEC_DISPATCH(call)                      \
    switch (active_cpu_isa()) {                         \
        case cpu_isa::avx512: return avx512::call;      \
        case cpu_isa::avx2: return avx2::call;          \
        default: return scalar::call;                   \
    }

void exp_row(const float* x, int64_t n, float* y) { SPECGEN_VEC_DISPATCH(exp_row(x, n, y)) }
void tanh_row(const float* x, int64_t n, float* y) { SPECGEN_VEC_DISPATCH(tanh_row(x, n, y)) }
void gelu_mul(const float* gate, const float* up, int64_t n, float* out) {
    SPECGEN_VEC_DISPATCH(gelu_mul(gate, up, n, out))
}
void silu_mul(const float* gate, const float* up, int64_t n, float* out) {
    SPECGEN_VEC_DISPATCH(silu_mul(gate, up, n, out))
}
float exp_sub_sum(float* x, int64_t n, float sub) { SPECGEN_VEC_DISPATCH(exp_sub_sum(x, n, sub)) }
void dot_rows(const float* q, const float* K, int64_t stride, int n_keys, int64_t n, float* out) {
    SPECGEN_VEC_DISPATCH(dot_rows(q, K, stride, n_keys, n, out))
}
void weighted_sum_rows(const float* w, const float* V, int64_t stride, int n_rows, int64_t n, float* o) {
    for (int64_t d = 0; d < n; ++d) o[d] = 0.0f;  // 0 + w[0] V[0][d] is exact: the sums are the _add kernel's
    weighted_sum_rows_add(w, V, stride, n_rows, n, o);
}
void weighted_sum_rows_add(const float* w, const float* V, int64_t stride, int n_rows, int64_t n, float* o) {
    SPECGEN_VEC_DISPATCH(weighted_sum_rows_add(w, V, stride, n_rows, n, o))
}
void dot_rows_multi(const float* const* q, int n_q, const float* K, int64_t stride, int n_keys, int64_t n,
                    float* const* out) {
    if (active_cpu_isa() == cpu_isa::scalar) return scalar::dot_rows_multi(q, n_q, K, stride, n_keys, n, out);
    avx2::dot_rows_multi(q, n_q, K, stride, n_keys, n, out);
}
void weighted_sum_rows_add_multi(const float* const* w, int n_o, const float* V, int64_t stride, int n_rows, int64_t n,
                                 float* const* o) {
    if (active_cpu_isa() == cpu_isa::scalar) return scalar::weighted_sum_rows_add_multi(w, n_o, V, stride, n_rows, n, o);
    avx2::weighted_sum_rows_add_multi(w, n_o, V, stride, n_rows, n, o);
}
int64_t argmax_finite(const float* x, int64_t n) { SPECGEN_VEC_DISPATCH(argmax_finite(x, n)) }
void top_k(const float* x, int64_t n, int k, float* val, int32_t* idx) { SPECGEN_VEC_DISPATCH(top_k(x, n, k, val, idx)) }

#undef SPECGEN_VEC_DISPATCH

void softcap_row(float* x, int64_t n, float c) {
    for (int64_t i = 0; i < n; ++i) x[i] = x[i] / c;
    tanh_row(x, n, x);
    for (int64_t i = 0; i < n; ++i) x[i] = c * x[i];
}

}  // namespace vec
}  // namespace specgen
