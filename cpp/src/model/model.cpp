#include "model/model.h"

#include <cmath>
#include <cstring>

#include "backend/vec_math.h"
#include "common/error.h"
#include "gguf/gguf_reader.h"
#include "quant/quant.h"

namespace specgen {

namespace {

constexpr int kVocabPadMultiple = 64;

[[noreturn]] void bad(const gguf_file& f, const std::string& what) {
    throw model_load_error("GGUF " + f.path() + ": " + what);
}

std::string shape_str(const gguf_tensor& t) {
    std::string s = "[";
    for (int d = 0; d < t.n_dims; ++d) s += (d ? ", " : "") + std::to_string(t.ne[d]);
    return s + "]";
}

// Index of the first block of a weight holding a NaN or Inf, or -1. Integer quants cannot be
// non-finite, so for block formats only the float scale fields are read (f16 d / dmin at their place
// in ggml's block layouts); float tensors are checked element by element. One strided pass over the
// mapping at load, O(file): far cheaper than generating from a poisoned matrix (llama.cpp does not
// check, and silently samples from NaN logits).
int64_t first_nonfinite_block(ggml_type type, const uint8_t* data, int64_t n_blocks, size_t block_bytes) {
    auto f16_bad = [](const uint8_t* p) { uint16_t h; std::memcpy(&h, p, 2); return (h & 0x7C00) == 0x7C00; };
    auto f32_bad = [](const uint8_t* p) { uint32_t u; std::memcpy(&u, p, 4); return (u & 0x7F800000u) == 0x7F800000u; };
    int f16_at[2] = {-1, -1};  // byte offsets of f16 scale fields in a block
    switch (type) {
        case ggml_type::F32:
            for (int64_t b = 0; b < n_blocks; ++b) if (f32_bad(data + 4 * b)) return b;
            return -1;
        case ggml_type::F16:
            for (int64_t b = 0; b < n_blocks; ++b) if (f16_bad(data + 2 * b)) return b;
            return -1;
        case ggml_type::BF16:
            for (int64_t b = 0; b < n_blocks; ++b) {
                uint16_t h; std::memcpy(&h, data + 2 * b, 2);
                if ((h & 0x7F80) == 0x7F80) return b;
            }
            return -1;
        case ggml_type::Q8_K:
            for (int64_t b = 0; b < n_blocks; ++b) if (f32_bad(data + b * block_bytes)) return b;
            return -1;
        case ggml_type::Q4_0: case ggml_type::Q5_0: case ggml_type::Q8_0: f16_at[0] = 0; break;
        case ggml_type::Q4_1: case ggml_type::Q5_1: case ggml_type::Q8_1:
        case ggml_type::Q4_K: case ggml_type::Q5_K: f16_at[0] = 0; f16_at[1] = 2; break;
        case ggml_type::Q2_K: f16_at[0] = 80; f16_at[1] = 82; break;
        case ggml_type::Q3_K: f16_at[0] = 108; break;
        case ggml_type::Q6_K: f16_at[0] = 208; break;
        case ggml_type::I32: case ggml_type::I64: return -1;  // indices: no float to check
    }
    for (int64_t b = 0; b < n_blocks; ++b) {
        const uint8_t* blk = data + b * block_bytes;
        if (f16_bad(blk + f16_at[0]) || (f16_at[1] >= 0 && f16_bad(blk + f16_at[1]))) return b;
    }
    return -1;
}

}  // namespace

weight_view bind_matrix(const gguf_file& f, const std::string& name, int64_t n_cols, int64_t n_rows) {
    const gguf_tensor& t = f.tensor(name);
    if (t.n_dims != 2 || t.ne[0] != n_cols || t.ne[1] != n_rows)
        bad(f, "tensor " + name + " has shape " + shape_str(t) + ", expected [" + std::to_string(n_cols) + ", " +
                   std::to_string(n_rows) + "]");
    if (!ggml_traits(t.type).supported)
        bad(f, "tensor " + name + " has type " + ggml_type_name(t.type) + ", which specgen cannot compute with");
    const ggml_type_traits& tr = ggml_traits(t.type);
    const int64_t blocks_per_row = n_cols / tr.block_size;
    const int64_t b = first_nonfinite_block(t.type, t.data, n_rows * blocks_per_row, tr.type_size);
    if (b >= 0)
        bad(f, "tensor " + name + " (" + tr.name + ") contains NaN or Inf in row " + std::to_string(b / blocks_per_row) +
                   ", block " + std::to_string(b % blocks_per_row) + (tr.block_size > 1 ? " (its scale)" : ""));
    // The check read every page; first use reads them again (most matrices only to copy them into a
    // backend's layout), so the load's peak memory stays near one copy of the weights, not two.
    f.release_pages(t.data, size_t(n_rows * blocks_per_row) * tr.type_size);
    return weight_view{t.type, n_rows, n_cols, t.data};
}

std::vector<float> bind_vector(const gguf_file& f, const std::string& name, int64_t n) {
    const gguf_tensor& t = f.tensor(name);
    if (t.n_elements() != n) bad(f, "tensor " + name + " has shape " + shape_str(t) + ", expected [" + std::to_string(n) + "]");
    if (!ggml_traits(t.type).supported) bad(f, "tensor " + name + " has unsupported type " + ggml_type_name(t.type));
    std::vector<float> v(n);
    dequantize_row(t.type, t.data, v.data(), n);
    for (int64_t i = 0; i < n; ++i)
        if (!std::isfinite(v[i])) bad(f, "tensor " + name + " contains NaN or Inf at index " + std::to_string(i));
    return v;
}

model::model(std::shared_ptr<const gguf_file> file) : file_(std::move(file)), hp_(read_hparams(*file_)) {
    const gguf_file& f = *file_;
    const gguf_tensor& embd = f.tensor("token_embd.weight");
    if (embd.n_dims != 2 || embd.ne[0] != hp_.n_embd)
        bad(f, "tensor token_embd.weight has shape " + shape_str(embd) + ", expected [" + std::to_string(hp_.n_embd) + ", n_vocab]");
    if (embd.ne[1] > (1 << 24)) bad(f, "vocabulary of " + std::to_string(embd.ne[1]) + " tokens is too large");
    const int n_rows = int(embd.ne[1]);
    token_embd_ = bind_matrix(f, "token_embd.weight", hp_.n_embd, n_rows);
    hp_.tied_output = f.find_tensor("output.weight") == nullptr;
    output_ = hp_.tied_output ? token_embd_ : bind_matrix(f, "output.weight", hp_.n_embd, n_rows);
    // Embedding rows past the tokenizer's tokens are padding when the row count is a round multiple
    // (checkpoints round their matrices up to 64 / 128 rows): as llama.cpp, the vocabulary is then the
    // tokenizer's, so padded ids are never embedded nor sampled. Any other difference is a broken file.
    hp_.n_vocab = n_rows;
    if (const gguf_value* toks = f.find("tokenizer.ggml.tokens"); toks && toks->array_count > 0 &&
                                                                  toks->array_count != uint64_t(n_rows)) {
        if (toks->array_count > uint64_t(n_rows) || n_rows % kVocabPadMultiple != 0)
            bad(f, "tokenizer has " + std::to_string(toks->array_count) + " tokens but token_embd.weight has " +
                       std::to_string(n_rows) + " rows (padding rows are accepted only up to a multiple of " +
                       std::to_string(kVocabPadMultiple) + ")");
        restrict_vocab(int(toks->array_count));
    }
    output_norm_ = bind_vector(f, "output_norm.weight", hp_.n_embd);

    const int64_t E = hp_.n_embd, Q = int64_t(hp_.n_head) * hp_.head_dim, KV = int64_t(hp_.n_head_kv) * hp_.head_dim;
    layers_.resize(hp_.n_layer);
    for (int il = 0; il < hp_.n_layer; ++il) {
        const std::string p = "blk." + std::to_string(il) + ".";
        layer_weights& L = layers_[il];
        L.attn_norm = bind_vector(f, p + "attn_norm.weight", E);
        L.ffn_norm = bind_vector(f, p + "ffn_norm.weight", E);
        L.wq = bind_matrix(f, p + "attn_q.weight", E, Q);
        L.wk = bind_matrix(f, p + "attn_k.weight", E, KV);
        L.wv = bind_matrix(f, p + "attn_v.weight", E, KV);
        L.wo = bind_matrix(f, p + "attn_output.weight", Q, E);
        L.w_gate = bind_matrix(f, p + "ffn_gate.weight", E, hp_.n_ff);
        L.w_up = bind_matrix(f, p + "ffn_up.weight", E, hp_.n_ff);
        L.w_down = bind_matrix(f, p + "ffn_down.weight", hp_.n_ff, E);
        if (hp_.qk_norm) {
            L.q_norm = bind_vector(f, p + "attn_q_norm.weight", hp_.head_dim);
            L.k_norm = bind_vector(f, p + "attn_k_norm.weight", hp_.head_dim);
        }
        if (hp_.post_norms) {
            L.post_attn_norm = bind_vector(f, p + "post_attention_norm.weight", E);
            L.post_ffn_norm = bind_vector(f, p + "post_ffw_norm.weight", E);
        }
        if (hp_.qkv_bias) {
            L.q_bias = bind_vector(f, p + "attn_q.bias", Q);
            L.k_bias = bind_vector(f, p + "attn_k.bias", KV);
            L.v_bias = bind_vector(f, p + "attn_v.bias", KV);
        }
    }

    // Llama 3.x rope scaling: llama.cpp's converter stores per-pair frequency divisors.
    std::vector<float> freq_factors;
    if (f.find_tensor("rope_freqs.weight")) {
        freq_factors = bind_vector(f, "rope_freqs.weight", hp_.head_dim / 2);
        for (size_t i = 0; i < freq_factors.size(); ++i)
            if (!(freq_factors[i] > 0)) bad(f, "tensor rope_freqs.weight has a non-positive factor at index " + std::to_string(i));
    }
    // Every matrix gets a slot for a backend's own layout (filled on first use; output_ shares
    // token_embd_'s when tied). Once filled, the mapped source leaves the resident memory: only
    // embedding rows and NanoSpec's row selection read it again, a few pages each.
    auto attach = [this](weight_view& w) {
        repacks_.push_back(std::make_unique<weight_repack>());
        w.repack = repacks_.back().get();
        w.repack->release_source = [file = file_](const void* p, size_t n) { file->release_pages(p, n); };
    };
    attach(token_embd_);
    if (hp_.tied_output) output_.repack = token_embd_.repack;
    else attach(output_);
    for (layer_weights& L : layers_)
        for (weight_view* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) attach(*w);

    rope_inv_freq_ = rope_inv_freq(hp_.rope_base, hp_.head_dim, hp_.rope_scale, freq_factors.empty() ? nullptr : freq_factors.data());
    rope_inv_freq_local_ = rope_inv_freq(hp_.rope_base_local, hp_.head_dim, rope_scaling{}, nullptr);
    rope_mscale_ = rope_mscale(hp_.rope_scale);
}

void model::set_missing_token_row(int32_t id) {
    if (id < -1 || id >= token_embd_.n_rows)
        throw invalid_argument_error("missing-token row " + std::to_string(id) + " outside the embedding");
    missing_token_row_ = id;
}

void model::restrict_vocab(int n) {
    if (n <= 0 || n > hp_.n_vocab)
        throw invalid_argument_error("restrict_vocab(" + std::to_string(n) + ") outside [1, " + std::to_string(hp_.n_vocab) + "]");
    hp_.n_vocab = n;
    token_embd_.n_rows = n;  // rows are contiguous: the first n rows are a valid matrix
    output_.n_rows = n;
}

size_t model::bytes_per_token() const {
    size_t b = output_.row_bytes() * output_.n_rows;
    for (const auto& L : layers_)
        for (const weight_view* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down})
            b += w->row_bytes() * w->n_rows;
    return b;
}

evaluator::evaluator(const model& m, backend& be)
    : m_(m), be_(be), x_(be), xn_(be), q_(be), k_(be), v_(be), attn_(be), proj_(be), gate_(be), up_(be),
      out_norm_(be), logits_(be), features_(be) {
    be_.prepare(m_.output());
    for (int il = 0; il < m_.hp().n_layer; ++il) {
        const layer_weights& L = m_.layer(il);
        for (const weight_view* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) be_.prepare(*w);
    }
}

void evaluator::ensure_capacity(int n) {
    if (n <= capacity_) return;
    const hparams& hp = m_.hp();
    const size_t E = hp.n_embd, Q = size_t(hp.n_head) * hp.head_dim, KV = size_t(hp.n_head_kv) * hp.head_dim;
    x_.reserve(n * E);
    xn_.reserve(n * E);
    out_norm_.reserve(n * E);
    q_.reserve(n * Q);
    attn_.reserve(n * Q);
    k_.reserve(n * KV);
    v_.reserve(n * KV);
    proj_.reserve(n * E);
    gate_.reserve(size_t(n) * hp.n_ff);
    up_.reserve(size_t(n) * hp.n_ff);
    pos_.resize(n);
    capacity_ = n;
}

void evaluator::forward(kv_cache& cache, const int32_t* tokens, int n, int pos0, int n_layers, int seq) {
    if (n <= 0) throw invalid_argument_error("forward needs at least one token");
    single_.clear();
    single_.add(seq, tokens, n, pos0);
    forward_batch(cache, single_, n_layers);
}

void evaluator::forward_batch(kv_cache& cache, const batch& b, int n_layers) {
    const hparams& hp = m_.hp();
    if (b.empty()) throw invalid_argument_error("forward needs at least one token");
    seen_.assign(cache.n_seq(), false);
    for (const batch::entry& e : b.entries()) {
        if (e.n <= 0) throw invalid_argument_error("forward needs at least one token per sequence");
        if (e.seq < 0 || e.seq >= cache.n_seq())
            throw invalid_argument_error("sequence " + std::to_string(e.seq) + " outside the cache's " +
                                         std::to_string(cache.n_seq()) + " sequences");
        if (seen_[e.seq]) throw invalid_argument_error("sequence " + std::to_string(e.seq) + " appears twice in one batch");
        seen_[e.seq] = true;
        if (e.pos0 < 0 || int64_t(e.pos0) + e.n > cache.n_ctx())
            throw context_overflow_error("positions " + std::to_string(e.pos0) + ".." + std::to_string(e.pos0 + e.n - 1) +
                                         " exceed the context of " + std::to_string(cache.n_ctx()) + " tokens");
    }
    if (n_layers < 0 || n_layers > hp.n_layer) throw invalid_argument_error("n_layers out of range");
    cache.allocate(be_);
    const int n = b.n_rows();
    const int32_t* tokens = b.tokens();
    ensure_capacity(n);
    const int E = hp.n_embd, D = hp.head_dim;
    const int64_t Q = int64_t(hp.n_head) * D, KV = int64_t(hp.n_head_kv) * D;
    for (const batch::entry& e : b.entries())
        for (int t = 0; t < e.n; ++t) pos_[e.row0 + t] = e.pos0 + t;

    // Model constants (norm weights, biases) are host vectors; be_.constant() gives the backend's copy.
    auto constant = [&](const std::vector<float>& host) { return be_.constant(host.data(), int64_t(host.size())); };
    float* x = x_.data();
    if (m_.missing_token_row() >= 0) {
        ids_.assign(tokens, tokens + n);
        for (int32_t& id : ids_)
            if (id >= m_.token_embd().n_rows) id = m_.missing_token_row();
        tokens = ids_.data();
    }
    be_.get_rows(m_.token_embd(), tokens, n, x);
    if (hp.embd_scale != 1.0f) be_.scale(x, hp.embd_scale, int64_t(n) * E, x);

    if (!capture_.empty()) features_.reserve(size_t(n) * capture_.size() * E);
    for (int il = 0; il < n_layers; ++il) {
        const layer_weights& L = m_.layer(il);
        const bool swa = hp.layer_is_swa[il];
        capture_input(il, x, n);
        be_.rms_norm(x, constant(L.attn_norm), n, E, hp.norm_eps, xn_.data());
        {
            const weight_view qkv[3] = {L.wq, L.wk, L.wv};
            float* const outs[3] = {q_.data(), k_.data(), v_.data()};
            be_.matmul_shared_input(qkv, outs, 3, xn_.data(), n);
        }
        if (hp.qkv_bias) {
            const float *qb = constant(L.q_bias), *kb = constant(L.k_bias), *vb = constant(L.v_bias);
            for (int t = 0; t < n; ++t) {
                be_.add(q_.data() + t * Q, qb, Q, q_.data() + t * Q);
                be_.add(k_.data() + t * KV, kb, KV, k_.data() + t * KV);
                be_.add(v_.data() + t * KV, vb, KV, v_.data() + t * KV);
            }
        }
        if (hp.qk_norm) {
            be_.rms_norm(q_.data(), constant(L.q_norm), n * hp.n_head, D, hp.norm_eps, q_.data());
            be_.rms_norm(k_.data(), constant(L.k_norm), n * hp.n_head_kv, D, hp.norm_eps, k_.data());
        }
        be_.rope(q_.data(), n, hp.n_head, D, pos_.data(), m_.rope(swa), hp.rope);
        be_.rope(k_.data(), n, hp.n_head_kv, D, pos_.data(), m_.rope(swa), hp.rope);

        attention_params ap;
        ap.n_head = hp.n_head;
        ap.n_head_kv = hp.n_head_kv;
        ap.head_dim = D;
        ap.scale = hp.attn_scale;
        ap.sliding_window = swa ? hp.sliding_window : 0;
        attention_.run(be_, cache, b, il, ap, q_.data(), k_.data(), v_.data(), pos_.data(), attn_.data());
        be_.matmul(L.wo, attn_.data(), n, proj_.data());
        if (hp.post_norms) be_.rms_norm(proj_.data(), constant(L.post_attn_norm), n, E, hp.norm_eps, proj_.data());
        be_.add(x, proj_.data(), int64_t(n) * E, x);

        be_.rms_norm(x, constant(L.ffn_norm), n, E, hp.norm_eps, xn_.data());
        {
            const weight_view gate_up[2] = {L.w_gate, L.w_up};
            float* const outs[2] = {gate_.data(), up_.data()};
            be_.matmul_shared_input(gate_up, outs, 2, xn_.data(), n);
        }
        if (hp.gelu) be_.gelu_mul(gate_.data(), up_.data(), int64_t(n) * hp.n_ff, gate_.data());
        else be_.silu_mul(gate_.data(), up_.data(), int64_t(n) * hp.n_ff, gate_.data());
        be_.matmul(L.w_down, gate_.data(), n, proj_.data());
        if (hp.post_norms) be_.rms_norm(proj_.data(), constant(L.post_ffn_norm), n, E, hp.norm_eps, proj_.data());
        be_.add(x, proj_.data(), int64_t(n) * E, x);
    }
    be_.rms_norm(x, constant(m_.output_norm()), n, E, hp.norm_eps, out_norm_.data());
}

void evaluator::capture_layers(const std::vector<int>& layers) {
    for (int il : layers)
        if (il < 0 || il >= m_.hp().n_layer)
            throw invalid_argument_error("captured layer " + std::to_string(il) + " outside the model's layers [0, " +
                                         std::to_string(m_.hp().n_layer) + ")");
    capture_ = layers;
}

void evaluator::capture_input(int il, const float* x, int n) {
    const size_t E = size_t(m_.hp().n_embd), width = capture_.size() * E;
    for (size_t k = 0; k < capture_.size(); ++k) {
        if (capture_[k] != il) continue;
        // Row t of x goes to columns [k E, (k+1) E) of row t: one copy per row ([n, K E] is row-major).
        for (int t = 0; t < n; ++t)
            be_.copy(features_.data() + size_t(t) * width + k * E, x + size_t(t) * E, E * sizeof(float));
    }
}

void evaluator::softcap(float* logits, int64_t count) const {
    const float c = m_.hp().final_softcap;
    if (c > 0) vec::softcap_row(logits, count, c);
}

float* evaluator::logits_target(float* out, size_t count) {
    if (be_.host_memory()) return out;
    logits_.reserve(count);
    return logits_.data();
}

// Sampling and verification run on the host: the logits rows come back here, then the final
// softcap (cheap next to the head) is applied on the host for every backend alike.
void evaluator::finish_logits(float* out, size_t count) {
    if (!be_.host_memory()) be_.download(out, logits_.data(), count * sizeof(float));
    softcap(out, int64_t(count));
}

void evaluator::logits(const float* hidden, int n, float* out) {
    const size_t count = size_t(n) * m_.hp().n_vocab;
    be_.matmul(m_.output(), hidden, n, logits_target(out, count));
    finish_logits(out, count);
}

}  // namespace specgen
