// An EAGLE-3 draft head as llama.cpp stores it in GGUF (architecture "eagle3"), and its forward
// (docs/DESIGN.md section 4.1).
//
// The head is one decoder layer over the target's features. For the row at position P its input is
// the pair (t_{P+1}, g_P): the embedding of the token after P and a hidden vector g_P, which is
//   - fc([f_a | f_b | f_c]) for rows the target has forwarded, f_l being the residual stream entering
//     target layer l at P (the layers of eagle3.target_layers; evaluator::capture_layers), or
//   - the head's own pre-norm output at P - 1 for rows it drafts past the target.
// Its logits at P predict t_{P+2}, over a reduced draft vocabulary whose row r is target id d2t[r].
//
//   e  = attn_norm(embd(t))            g' = attn_norm_2(g)          [n, H] each
//   a  = attention(wq|wk|wv . [e | g'])                             q/k/v read 2H columns, RoPE at P
//   r  = wo . a + (norm_before_residual ? g' : g)
//   h  = r + ffn_down(silu(ffn_gate . ffn_norm(r)) * ffn_up . ffn_norm(r))      pre-norm output
//   logits = output . output_norm(h)                                 [n, n_draft_vocab]
//
// GGUF layout (llama.cpp's converter, from LlamaForCausalLMEagle3 / Eagle3Speculator checkpoints):
// keys eagle3.target_layers (3 ids), eagle3.target_hidden_size, eagle3.norm_before_residual and
// eagle3.norm_before_fc (optional, default false) plus the llama keys under "eagle3."; tensors fc,
// enc.output_norm (with norm_before_fc: an RMSNorm of the concatenated features before fc),
// blk.0.{attn_norm, attn_norm_2, attn_q, attn_k, attn_v, attn_output, ffn_norm, ffn_gate, ffn_up,
// ffn_down}, output_norm, and optionally token_embd (else the target's), output (else the target's
// head over the full vocabulary) and d2t (I64 absolute target ids; absent: the identity).
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
class model;

struct eagle3_head {
    std::shared_ptr<const gguf_file> file;
    hparams hp;                      // the decoder layer's geometry (n_layer 1); its KV cache is made from it
    std::vector<int> target_layers;  // the target layers whose inputs feed fc, in fc's column order
    int target_hidden = 0;           // H_t: fc reads 3 * H_t columns
    bool norm_before_residual = false;
    bool norm_before_fc = false;
    weight_view token_embd;          // the head's own or the target's
    weight_view fc;                  // [3 H_t -> H]
    std::vector<float> fc_norm;      // enc.output_norm [3 H_t] (norm_before_fc only)
    std::vector<float> attn_norm, hidden_norm, ffn_norm, output_norm;
    weight_view wq, wk, wv, wo, w_gate, w_up, w_down;
    weight_view output;              // [H -> n_draft_vocab]: the head's own or the target's
    std::vector<int32_t> d2t;        // draft row -> target id, distinct, in [0, target n_vocab)
    std::vector<float> rope_inv_freq;
    std::vector<std::unique_ptr<weight_repack>> repacks;

    int n_draft_vocab() const { return int(d2t.size()); }
};

// Loads the head at `path` for `target`. Throws model_load_error for a file that is not an eagle3
// GGUF or a broken tensor, and invalid_argument_error naming the mismatch when the head does not fit
// the target: target_hidden_size != the target's n_embd, a target layer outside [0, n_layer), d2t ids
// outside the target's vocabulary, a draft vocabulary larger than the target's, or (without its own
// token_embd) a hidden size other than the target's.
std::shared_ptr<const eagle3_head> load_eagle3_head(const std::string& path, const model& target);

// Runs a head on a backend over its own KV cache (one sequence). Not thread-safe: one per drafter.
class eagle3_evaluator {
public:
    static constexpr int kChunk = 128;  // most rows per forward()

    eagle3_evaluator(const eagle3_head& head, backend& be);
    backend& be() { return be_; }

    // g = fc(features) (after enc.output_norm with norm_before_fc).  features: backend memory
    // [n, 3 H_t] as evaluator::features() leaves them; g: host memory [n, H].
    void fuse(const float* features, int n, float* g);
    // The decoder layer over rows (tokens[i], g[i]) at positions pos0 + i (n <= kChunk), writing their
    // keys and values into `cache` rows pos0..; leaves the pre-norm outputs in prenorm() [n, H] (host
    // memory) and keeps the output-normed rows for logits().  tokens, g: host memory.
    void forward(kv_cache& cache, const int32_t* tokens, const float* g, int n, int pos0);
    const float* prenorm() const { return prenorm_host_.data(); }
    // The head's logits of row i of the last forward() [n_draft_vocab] into out (host memory).
    void logits(int i, float* out) { logits(i, h_.output, out); }
    // The same over the rows `output` holds (NanoSpec's W_S, draft_vocab::head(): rows gathered from the
    // head's output matrix) [output.n_rows] into out (host memory).
    void logits(int i, const weight_view& output, float* out);

    const eagle3_head& head() const { return h_; }

private:
    void ensure_capacity(int n);

    const eagle3_head& h_;
    backend& be_;
    int capacity_ = 0;
    backend_buffer<float> feat_, g_, e_, gn_, cat_, q_, k_, v_, attn_, proj_, xn_, gate_, up_, x_, out_, logits_;
    std::vector<float> prenorm_host_;
    std::vector<int32_t> pos_;
    batch single_;
    batch_attention attention_;
};

}  // namespace specgen
