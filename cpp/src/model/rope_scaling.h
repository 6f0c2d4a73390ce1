// RoPE frequencies of a model: the base frequencies theta^(-2i/d) of each rotated pair, changed by
// the file's rope scaling (linear, YaRN) and by Llama 3's per-pair divisors (rope_freqs.weight), and
// the factor YaRN multiplies cos/sin by. Computed once at load on the host, so every backend rotates
// with the same float inverse frequencies.
#pragma once
#include <vector>

namespace specgen {

enum class rope_scaling_type { none, linear, yarn, llama3 };

// As llama.cpp's GGUF keys {arch}.rope.scaling.* name them.
struct rope_scaling {
    rope_scaling_type type = rope_scaling_type::none;
    float factor = 1.0f;         // rope.scaling.factor: context extension (positions divided by it)
    int orig_ctx = 0;            // rope.scaling.original_context_length (YaRN's correction range)
    float attn_factor = 1.0f;    // rope.scaling.yarn_attn_factor (or attn_factor): times YaRN's mscale
    float ext_factor = 1.0f;     // rope.scaling.yarn_ext_factor: weight of extrapolation in the ramp
    float beta_fast = 32.0f;     // rope.scaling.yarn_beta_fast
    float beta_slow = 1.0f;      // rope.scaling.yarn_beta_slow
    // llama3 given as metadata (rope.scaling.type "llama3") rather than as llama.cpp's rope_freqs tensor:
    // the divisors are computed from factor, original_context_length and these two.
    float low_freq_factor = 1.0f;   // rope.scaling.low_freq_factor
    float high_freq_factor = 4.0f;  // rope.scaling.high_freq_factor
};

// inv_freq[i] for i < head_dim / 2. freq_factors: null, or [head_dim / 2] divisors (rope_freqs.weight:
// llama.cpp's convention, the effective frequency is base frequency / factor).
std::vector<float> rope_inv_freq(float base, int head_dim, const rope_scaling& s, const float* freq_factors);

// The factor cos and sin are multiplied by: YaRN's 0.1 ln(factor) + 1 times attn_factor; 1 otherwise.
float rope_mscale(const rope_scaling& s);

}  // namespace specgen
