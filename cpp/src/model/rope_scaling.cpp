#include "model/rope_scaling.h"

#include <algorithm>
#include <cmath>

namespace specgen {

namespace {

// The pair index at which a frequency completes n_rot turns over orig_ctx positions (YaRN paper,
// "find_correction_dim"), as real number.
double correction_dim(double n_rot, int head_dim, double base, int orig_ctx) {
    return head_dim * std::log(double(orig_ctx) / (n_rot * 2.0 * M_PI)) / (2.0 * std::log(base));
}

// Llama 3's divisor of one base frequency: long wavelengths (beyond orig_ctx / low_freq_factor) slowed
// by factor, short ones (below orig_ctx / high_freq_factor) kept, a smooth blend between.
double llama3_divisor(double inv_freq, const rope_scaling& s) {
    const double wavelen = 2.0 * M_PI / inv_freq;
    if (wavelen < s.orig_ctx / s.high_freq_factor) return 1.0;
    if (wavelen > s.orig_ctx / s.low_freq_factor) return s.factor;
    const double smooth = (s.orig_ctx / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
    return 1.0 / ((1.0 - smooth) / s.factor + smooth);
}

}  // namespace

std::vector<float> rope_inv_freq(float base, int head_dim, const rope_scaling& s, const float* freq_factors) {
    const int half = head_dim / 2;
    std::vector<float> out(half);
    // YaRN's ramp over the pairs: pairs below `low` keep the base frequency (extrapolation), pairs above
    // `high` are interpolated (divided by factor), a linear blend between. Bounds rounded outward.
    double low = 0, high = 0;
    if (s.type == rope_scaling_type::yarn) {
        low = std::max(0.0, std::floor(correction_dim(s.beta_fast, head_dim, base, s.orig_ctx)));
        high = std::min(double(head_dim - 1), std::ceil(correction_dim(s.beta_slow, head_dim, base, s.orig_ctx)));
    }
    for (int i = 0; i < half; ++i) {
        double f = 1.0 / std::pow(double(base), double(2 * i) / head_dim);
        if (freq_factors) f /= double(freq_factors[i]);
        switch (s.type) {
            case rope_scaling_type::none: break;
            case rope_scaling_type::linear: f /= s.factor; break;
            case rope_scaling_type::llama3:
                if (!freq_factors) f /= llama3_divisor(f, s);  // the tensor, when present, already says it
                break;
            case rope_scaling_type::yarn: {
                const double ramp = std::clamp((i - low) / std::max(0.001, high - low), 0.0, 1.0);
                const double extrapolate = (1.0 - ramp) * s.ext_factor;
                f = f / s.factor * (1.0 - extrapolate) + f * extrapolate;
                break;
            }
        }
        out[i] = float(f);
    }
    return out;
}

float rope_mscale(const rope_scaling& s) {
    if (s.type != rope_scaling_type::yarn) return 1.0f;
    const double m = s.factor <= 1.0f ? 1.0 : 0.1 * std::log(double(s.factor)) + 1.0;
    return float(m * s.attn_factor);
}

}  // namespace specgen
