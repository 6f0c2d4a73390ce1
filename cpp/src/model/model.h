// A decoder-only transformer loaded from GGUF (families llama, qwen2, qwen3, gemma3) and the evaluator
// that runs the forward pass on a backend (the KV cache: kv_cache.h; ragged batches: batch.h).
//
// The model is immutable after load and may be shared by several evaluators (the target and a
// self-drafter on another thread); each evaluator owns its scratch buffers.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/batch.h"
#include "model/batch_attention.h"
#include "model/hparams.h"
#include "model/kv_cache.h"

namespace specgen {

class gguf_file;

struct layer_weights {
    std::vector<float> attn_norm, post_attn_norm, ffn_norm, post_ffn_norm, q_norm, k_norm;
    std::vector<float> q_bias, k_bias, v_bias;
    weight_view wq, wk, wv, wo, w_gate, w_up, w_down;
};

// Binds tensor `name` of f, checking its shape, type and that it is finite (model_load_error naming the
// tensor otherwise): a matrix with n_cols inputs (ne[0]) and n_rows outputs (ne[1]); a vector (norm
// weight or bias) of n elements, dequantized to float. Shared by the loaders of model and draft heads.
weight_view bind_matrix(const gguf_file& f, const std::string& name, int64_t n_cols, int64_t n_rows);
std::vector<float> bind_vector(const gguf_file& f, const std::string& name, int64_t n);

class model {
public:
    // Reads hyper-parameters and binds every tensor, checking names, types and shapes. Throws
    // model_load_error naming the tensor on any mismatch.
    explicit model(std::shared_ptr<const gguf_file> file);

    const hparams& hp() const { return hp_; }
    const gguf_file& file() const { return *file_; }
    const layer_weights& layer(int il) const { return layers_[il]; }
    const weight_view& token_embd() const { return token_embd_; }
    const weight_view& output() const { return output_; }  // the LM head (token_embd when tied)
    const std::vector<float>& output_norm() const { return output_norm_; }
    // RoPE frequencies of a layer kind (sliding-window layers: the local base, never scaled).
    rope_freqs rope(bool swa) const { return {swa ? rope_inv_freq_local_.data() : rope_inv_freq_.data(), swa ? 1.0f : rope_mscale_}; }
    // Keeps only ids [0, n) of the embedding and the head (n <= n_vocab): a draft model whose vocabulary
    // extends past its target's never proposes the target's missing ids (model/vocab_compat.h).
    // Call before any evaluator uses the model.
    void restrict_vocab(int n);
    // Ids the embedding has no row for are embedded as row `id` instead (-1: they are an error). A draft
    // model whose vocabulary is a few tokens short of its target's still reads every target token: its
    // guess is worse there, which costs acceptance, never correctness. Call before any evaluator runs.
    void set_missing_token_row(int32_t id);
    int32_t missing_token_row() const { return missing_token_row_; }
    // Bytes of weights read by one decode step (layers + head), for bandwidth reporting.
    size_t bytes_per_token() const;

private:
    std::shared_ptr<const gguf_file> file_;
    hparams hp_;
    std::vector<layer_weights> layers_;
    std::vector<std::unique_ptr<weight_repack>> repacks_;  // one per matrix (weight_view::repack)
    weight_view token_embd_, output_;
    std::vector<float> output_norm_;
    std::vector<float> rope_inv_freq_, rope_inv_freq_local_;
    float rope_mscale_ = 1.0f;
    int32_t missing_token_row_ = -1;
};

// Runs the forward pass of a model on a backend. Not thread-safe: one evaluator per thread.
class evaluator {
public:
    // Most rows a caller passes to one forward() when it catches up on a long context (the prefill,
    // a drafter's cache): bounds the activations' scratch memory.
    static constexpr int kChunk = 128;

    evaluator(const model& m, backend& be);

    // Embeds `tokens` at positions pos0 .. pos0+n-1, runs layers [0, n_layers), writing their keys
    // and values into `cache` rows pos0.., and leaves the output-normed hidden states in hidden():
    // [n, n_embd]. Positions past pos0+n in the cache are ignored (that is how rollback works: the
    // caller's sequence length is the truth, stale rows are overwritten later). `tokens` is host memory.
    // The one-sequence case of forward_batch: sequence `seq` of `cache`.
    void forward(kv_cache& cache, const int32_t* tokens, int n, int pos0, int n_layers, int seq = 0);
    // One pass over every row of a ragged batch (batch.h): each matmul runs over all rows at once,
    // attention per sequence over that sequence's slot of `cache` only, each entry's keys and values
    // written to its sequence's rows pos0... hidden() then holds the output-normed rows in the batch's
    // order: [b.n_rows(), n_embd]. A sequence's rows are bit-identical to forward() of that sequence
    // alone, whatever else is in the batch. Throws invalid_argument_error for an empty batch, an
    // empty entry, a sequence outside the cache or appearing twice; context_overflow_error for
    // positions past n_ctx.
    void forward_batch(kv_cache& cache, const batch& b, int n_layers);
    // Backend memory (readable on the host only when be().host_memory()); pass it, or rows of it,
    // to logits().
    const float* hidden() const { return out_norm_.data(); }

    // Layer inputs to keep (an EAGLE-3 head's target layers, docs/DESIGN.md section 4.1): every forward
    // then also leaves, for each row, the residual stream entering each listed layer (layer 0: the
    // embedding), concatenated in the list's order, in features(): [n_rows, layers.size() * n_embd],
    // backend memory. Empty (the default): nothing is kept. Throws invalid_argument_error for a layer
    // outside [0, n_layer).
    void capture_layers(const std::vector<int>& layers);
    const std::vector<int>& captured_layers() const { return capture_; }
    const float* features() const { return capture_.empty() ? nullptr : features_.data(); }

    // logits[t, :] = head(hidden row t) over the full vocabulary.  hidden: backend memory [n, n_embd]
    // (from hidden()); out: host memory [n, n_vocab].
    void logits(const float* hidden, int n, float* out);

    const model& m() const { return m_; }
    backend& be() { return be_; }

private:
    void ensure_capacity(int n);
    void capture_input(int il, const float* x, int n);
    void softcap(float* logits, int64_t count) const;
    // Where the head writes `count` logits: `out` itself for host-memory backends, else a scratch
    // buffer in backend memory that finish_logits() downloads into `out`.
    float* logits_target(float* out, size_t count);
    void finish_logits(float* out, size_t count);

    const model& m_;
    backend& be_;
    int capacity_ = 0;
    // Scratch in backend memory.
    backend_buffer<float> x_, xn_, q_, k_, v_, attn_, proj_, gate_, up_, out_norm_, logits_;
    std::vector<int32_t> pos_;  // host: index arrays stay on the host
    batch single_;              // forward()'s one-entry batch
    std::vector<bool> seen_;    // forward_batch: sequences already in the batch
    batch_attention attention_;
    std::vector<int32_t> ids_;  // host: tokens with missing rows replaced (model::set_missing_token_row)
    std::vector<int> capture_;  // layers whose inputs features() keeps
    backend_buffer<float> features_;
};

}  // namespace specgen
