// Hyper-parameters of a decoder-only transformer, read from GGUF metadata ({arch}.* keys).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/rope_scaling.h"

namespace specgen {

class gguf_file;

enum class model_arch { llama, qwen2, qwen3, gemma3 };
const char* model_arch_name(model_arch a);

struct hparams {
    model_arch arch = model_arch::llama;
    int n_vocab = 0;
    int n_ctx_train = 0;
    int n_embd = 0;
    int n_layer = 0;
    int n_ff = 0;
    int n_head = 0;
    int n_head_kv = 0;
    int head_dim = 0;         // key/value length per head
    float norm_eps = 1e-5f;
    float rope_base = 10000.0f;
    float rope_base_local = 10000.0f;  // sliding-window layers (Gemma 3)
    rope_style rope = rope_style::normal;
    rope_scaling rope_scale;           // full-attention layers (Gemma 3's sliding layers never scale)
    int sliding_window = 0;            // 0: none
    std::vector<bool> layer_is_swa;    // per layer: uses the sliding window and the local rope base
    float attn_scale = 1.0f;           // multiplies q.k
    float final_softcap = 0.0f;        // logit soft-capping (0: none)
    float embd_scale = 1.0f;           // Gemma multiplies embeddings by sqrt(n_embd)
    bool gelu = false;                 // GeGLU (Gemma) instead of SwiGLU
    bool qk_norm = false;              // per-head RMSNorm of q and k (Gemma 3, Qwen3)
    bool post_norms = false;           // RMSNorm after attention and after the FFN (Gemma 2/3)
    bool qkv_bias = false;             // Qwen2
    bool tied_output = false;          // LM head shares token_embd
};

// Reads and validates the hyper-parameters. Unknown architectures and inconsistent values throw
// model_load_error naming the file and key.
hparams read_hparams(const gguf_file& f);

}  // namespace specgen
