#include "model/hparams.h"

#include <cmath>

#include "common/error.h"
#include "gguf/gguf_reader.h"

namespace specgen {

const char* model_arch_name(model_arch a) {
    switch (a) {
        case model_arch::llama: return "llama";
        case model_arch::qwen2: return "qwen2";
        case model_arch::qwen3: return "qwen3";
        case model_arch::gemma3: return "gemma3";
    }
    return "?";
}

namespace {
void check(const gguf_file& f, bool ok, const std::string& what) {
    if (!ok) throw model_load_error("GGUF " + f.path() + ": " + what);
}
int positive_int(const gguf_file& f, const std::string& key, int64_t max_value) {
    int64_t v = f.get_int(key);
    check(f, v > 0 && v <= max_value, "metadata '" + key + "' = " + std::to_string(v) + " out of range [1, " +
                                          std::to_string(max_value) + "]");
    return int(v);
}
float finite_float(const gguf_file& f, const std::string& key, double def, double min_value) {
    const double v = f.get_float(key, def);
    check(f, std::isfinite(v) && v >= min_value, "metadata '" + key + "' = " + std::to_string(v) + " is invalid (must be >= " +
                                                      std::to_string(min_value) + ")");
    return float(v);
}

// {arch}.rope.scaling.* as llama.cpp's converter writes them. Llama 3's scaling is usually not here
// but in the rope_freqs.weight tensor (model.cpp); files that give it as metadata (type "llama3")
// are read too.
void read_rope_scaling(const gguf_file& f, const std::string& p, hparams& hp) {
    rope_scaling& s = hp.rope_scale;
    const std::string type = f.get_string(p + "rope.scaling.type", "none");
    if (type == "none") s.type = rope_scaling_type::none;
    else if (type == "linear") s.type = rope_scaling_type::linear;
    else if (type == "yarn") s.type = rope_scaling_type::yarn;
    else if (type == "llama3") s.type = rope_scaling_type::llama3;
    else
        throw not_implemented_error("GGUF " + f.path() + ": rope scaling '" + type +
                                    "' is not supported (supported: none, linear, yarn, llama3)");
    // Older files give the linear factor as rope.scale_linear.
    const double linear = f.get_float(p + "rope.scale_linear", 1.0);
    if (s.type == rope_scaling_type::none && f.has(p + "rope.scale_linear") && linear != 1.0) s.type = rope_scaling_type::linear;
    if (s.type == rope_scaling_type::none) return;
    s.factor = finite_float(f, p + "rope.scaling.factor", linear, 0.0);
    check(f, s.factor > 0, "metadata '" + p + "rope.scaling.factor' must be positive");
    if (s.type == rope_scaling_type::linear) return;
    s.orig_ctx = int(f.get_int(p + "rope.scaling.original_context_length", hp.n_ctx_train));
    check(f, s.orig_ctx > 0, "metadata '" + p + "rope.scaling.original_context_length' must be positive");
    if (s.type == rope_scaling_type::llama3) {
        s.low_freq_factor = finite_float(f, p + "rope.scaling.low_freq_factor", 1.0, 0.0);
        s.high_freq_factor = finite_float(f, p + "rope.scaling.high_freq_factor", 4.0, 0.0);
        check(f, s.low_freq_factor > 0 && s.high_freq_factor > s.low_freq_factor,
              "llama3 rope scaling needs 0 < low_freq_factor < high_freq_factor");
        return;
    }
    // yarn_attn_factor is llama.cpp's newer spelling of attn_factor; either multiplies YaRN's mscale.
    s.attn_factor = finite_float(f, p + "rope.scaling.yarn_attn_factor",
                                 f.get_float(p + "rope.scaling.attn_factor", 1.0), 0.0);
    s.ext_factor = finite_float(f, p + "rope.scaling.yarn_ext_factor", 1.0, 0.0);
    s.beta_fast = finite_float(f, p + "rope.scaling.yarn_beta_fast", 32.0, 0.0);
    s.beta_slow = finite_float(f, p + "rope.scaling.yarn_beta_slow", 1.0, 0.0);
    check(f, s.beta_fast > 0 && s.beta_slow > 0, "YaRN beta_fast / beta_slow must be positive");
}

}  // namespace

hparams read_hparams(const gguf_file& f) {
    hparams hp;
    const std::string arch = f.get_string("general.architecture");
    if (arch == "llama") hp.arch = model_arch::llama;
    else if (arch == "qwen2") hp.arch = model_arch::qwen2;
    else if (arch == "qwen3") hp.arch = model_arch::qwen3;
    else if (arch == "gemma3") hp.arch = model_arch::gemma3;
    else
        throw model_load_error("GGUF " + f.path() + ": unsupported architecture '" + arch +
                               "' (supported: llama, qwen2, qwen3, gemma3)");
    const std::string p = arch + ".";
    hp.n_embd = positive_int(f, p + "embedding_length", 1 << 16);
    hp.n_layer = positive_int(f, p + "block_count", 1024);
    hp.n_ff = positive_int(f, p + "feed_forward_length", 1 << 18);
    hp.n_head = positive_int(f, p + "attention.head_count", 1024);
    hp.n_head_kv = f.has(p + "attention.head_count_kv") ? positive_int(f, p + "attention.head_count_kv", 1024) : hp.n_head;
    hp.head_dim = f.has(p + "attention.key_length") ? positive_int(f, p + "attention.key_length", 4096) : hp.n_embd / hp.n_head;
    if (f.has(p + "attention.value_length"))
        check(f, f.get_int(p + "attention.value_length") == hp.head_dim, "value_length != key_length is not supported");
    check(f, hp.n_head % hp.n_head_kv == 0, "head_count is not a multiple of head_count_kv");
    check(f, hp.head_dim % 2 == 0, "odd head dimension");
    hp.n_ctx_train = int(f.get_int(p + "context_length", 4096));
    check(f, hp.n_ctx_train > 0, "context_length must be positive");
    hp.norm_eps = float(f.get_float(p + "attention.layer_norm_rms_epsilon", 1e-5));
    check(f, std::isfinite(hp.norm_eps) && hp.norm_eps >= 0, "invalid layer_norm_rms_epsilon");
    hp.rope_base = float(f.get_float(p + "rope.freq_base", 10000.0));
    check(f, std::isfinite(hp.rope_base) && hp.rope_base > 1.0f, "invalid rope.freq_base");
    hp.layer_is_swa.assign(hp.n_layer, false);

    switch (hp.arch) {
        case model_arch::llama:
            hp.rope = rope_style::normal;
            break;
        case model_arch::qwen2:
            hp.rope = rope_style::neox;
            hp.qkv_bias = true;
            break;
        case model_arch::qwen3:
            // Qwen3: RMSNorm of each q and k head before RoPE, no qkv bias; head_dim is key_length
            // (128 for every size, independent of n_embd / n_head).
            hp.rope = rope_style::neox;
            hp.qk_norm = true;
            break;
        case model_arch::gemma3: {
            hp.rope = rope_style::neox;
            hp.gelu = true;
            hp.qk_norm = true;
            hp.post_norms = true;
            hp.embd_scale = std::sqrt(float(hp.n_embd));
            // Gemma 3 fixes these in its architecture rather than in the file: local layers use
            // rope base 10000, and every sixth layer is global (full attention).
            // specgen's converter writes both explicitly (rope.freq_base_swa, sliding_window_pattern).
            hp.rope_base_local = float(f.get_float(p + "rope.freq_base_swa", 10000.0));
            check(f, std::isfinite(hp.rope_base_local) && hp.rope_base_local > 1.0f, "invalid rope.freq_base_swa");
            hp.sliding_window = int(f.get_int(p + "attention.sliding_window", 0));
            check(f, hp.sliding_window >= 0, "negative sliding_window");
            if (f.has(p + "attention.sliding_window_pattern")) {
                std::vector<int64_t> pattern = f.get_int_array(p + "attention.sliding_window_pattern");
                check(f, int(pattern.size()) == hp.n_layer, "sliding_window_pattern has " + std::to_string(pattern.size()) +
                                                                " entries for " + std::to_string(hp.n_layer) + " layers");
                for (int il = 0; il < hp.n_layer; ++il) hp.layer_is_swa[il] = hp.sliding_window > 0 && pattern[il] != 0;
            } else {
                for (int il = 0; il < hp.n_layer; ++il) hp.layer_is_swa[il] = hp.sliding_window > 0 && (il + 1) % 6 != 0;
            }
            hp.final_softcap = float(f.get_float(p + "final_logit_softcapping", 0.0));
            check(f, std::isfinite(hp.final_softcap) && hp.final_softcap >= 0,
                  "invalid final_logit_softcapping " + std::to_string(hp.final_softcap) + " (must be finite and >= 0)");
            break;
        }
    }
    // Gemma 3 scales queries by query_pre_attn_scalar^-0.5: llama.cpp's files do not store it (it
    // equals head_dim for every released size except 27B); specgen's converter writes attention.scale.
    hp.attn_scale = float(f.get_float(p + "attention.scale", 1.0 / std::sqrt(double(hp.head_dim))));
    if (hp.arch == model_arch::gemma3 && f.has(p + "attention.query_pre_attn_scalar")) {
        const double s = f.get_float(p + "attention.query_pre_attn_scalar");
        // 0, negative or NaN would make every attention score Inf/NaN.
        check(f, std::isfinite(s) && s > 0, "invalid attention.query_pre_attn_scalar " + std::to_string(s) + " (must be > 0)");
        hp.attn_scale = 1.0f / std::sqrt(float(s));
    }
    check(f, std::isfinite(hp.attn_scale) && hp.attn_scale > 0, "invalid attention.scale");
    if (f.has(p + "rope.dimension_count")) {
        const int64_t n_rot = f.get_int(p + "rope.dimension_count");
        if (n_rot != hp.head_dim)
            throw not_implemented_error("GGUF " + f.path() + ": partial rotary embedding (rope.dimension_count " +
                                        std::to_string(n_rot) + " of head_dim " + std::to_string(hp.head_dim) +
                                        ") is not supported");
    }
    read_rope_scaling(f, p, hp);
    return hp;
}

}  // namespace specgen
