// Candidate-scale searches for the K-quant quantizers: for each of a spread of inverse scales
// around the range-based one, round, then refit by least squares and keep the lowest squared error.
// Checked by the round-trip RMSE bounds in tests/test_quant.py.
#include "quant/kquant_search.h"

#include <algorithm>
#include <cmath>

namespace specgen {
namespace quant {

void fit_affine(const float* x, int n, int nmax, float* scale, float* offset) {
    float lo = x[0], hi = x[0];
    for (int i = 1; i < n; ++i) lo = std::min(lo, x[i]), hi = std::max(hi, x[i]);
    lo = std::min(lo, 0.0f);
    if (hi <= lo) {
        *scale = 0;
        *offset = lo;
        return;
    }
    float best_s = (hi - lo) / nmax, best_o = lo, best_err = INFINITY;
    int q[256];
    for (int k = -10; k <= 10; ++k) {
        const float iscale = (nmax + 0.1f * k) / (hi - lo);
        float sq = 0, sqq = 0, sx = 0, sqx = 0;
        for (int i = 0; i < n; ++i) {
            q[i] = std::clamp(nearest_int(iscale * (x[i] - lo)), 0, nmax);
            sq += q[i], sqq += float(q[i]) * q[i], sx += x[i], sqx += q[i] * x[i];
        }
        const float det = n * sqq - sq * sq;
        if (det <= 0) continue;
        float s = (n * sqx - sq * sx) / det;
        float o = (sqq * sx - sq * sqx) / det;
        if (o > 0) o = 0, s = sqx / sqq;
        if (s <= 0) continue;
        float err = 0;
        for (int i = 0; i < n; ++i) {
            const float e = s * q[i] + o - x[i];
            err += e * e;
        }
        if (err < best_err) best_err = err, best_s = s, best_o = o;
    }
    *scale = best_s;
    *offset = best_o;
}

float fit_symmetric(const float* x, int n, int nneg) {
    float ext = 0;
    for (int i = 0; i < n; ++i)
        if (std::fabs(x[i]) > std::fabs(ext)) ext = x[i];
    if (ext == 0) return 0;
    float best_s = ext / -nneg, best_err = INFINITY;
    for (int k = -9; k <= 9; ++k) {
        const float iscale = -(nneg + 0.1f * k) / ext;
        float sqq = 0, sqx = 0;
        int q[256];
        for (int i = 0; i < n; ++i) {
            q[i] = std::clamp(nearest_int(iscale * x[i]), -nneg, nneg - 1);
            sqq += float(q[i]) * q[i], sqx += q[i] * x[i];
        }
        if (sqq <= 0) continue;
        const float s = sqx / sqq;
        float err = 0;
        for (int i = 0; i < n; ++i) {
            const float e = s * q[i] - x[i];
            err += e * e;
        }
        if (err < best_err) best_err = err, best_s = s;
    }
    return best_s;
}

}  // namespace quant
}  // namespace specgen

#include "quant/kernels.h"
#include "quant/quant.h"

namespace specgen {
namespace quant {

void quantize_k_superblock(const float* x, int nmax, uint16_t* d, uint16_t* dmin, uint8_t scales[12],
                           uint8_t q[256]) {
    float sc_f[8], m_f[8], max_sc = 0, max_m = 0;
    for (int s = 0; s < 8; ++s) {
        float off;
        fit_affine(x + 32 * s, 32, nmax, &sc_f[s], &off);
        m_f[s] = -off;
        max_sc = std::max(max_sc, sc_f[s]);
        max_m = std::max(max_m, m_f[s]);
    }
    *d = fp32_to_fp16(max_sc / 63);
    *dmin = fp32_to_fp16(max_m / 63);
    const float df = fp16_to_fp32(*d), dminf = fp16_to_fp32(*dmin);
    uint8_t sc[8], m[8];
    for (int s = 0; s < 8; ++s) {
        sc[s] = static_cast<uint8_t>(df > 0 ? std::clamp(nearest_int(sc_f[s] / df), 0, 63) : 0);
        m[s] = static_cast<uint8_t>(dminf > 0 ? std::clamp(nearest_int(m_f[s] / dminf), 0, 63) : 0);
    }
    pack_k_scales(sc, m, scales);
    for (int s = 0; s < 8; ++s) {
        const float ds = df * sc[s], dm = dminf * m[s];
        for (int l = 0; l < 32; ++l) {
            const int v = ds > 0 ? nearest_int((x[32 * s + l] + dm) / ds) : 0;
            q[32 * s + l] = static_cast<uint8_t>(std::clamp(v, 0, nmax));
        }
    }
}

}  // namespace quant
}  // namespace specgen
