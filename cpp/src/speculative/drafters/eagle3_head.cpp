// The EAGLE-3 head: loader and forward (speculative/drafters/eagle3_head.h).
#include "speculative/drafters/eagle3_head.h"

#include <cmath>
#include <cstring>
#include <unordered_set>

#include "common/error.h"
#include "gguf/gguf_reader.h"
#include "model/model.h"
#include "model/rope_scaling.h"

namespace specgen {

namespace {

constexpr const char* kArch = "eagle3";

[[noreturn]] void mismatch(const std::string& path, const std::string& what) {
    throw invalid_argument_error("EAGLE-3 head " + path + ": " + what);
}

int64_t required_int(const gguf_file& f, const std::string& key) {
    const gguf_value* v = f.find(key);
    if (!v) mismatch(f.path(), "missing key " + key);
    return f.get_int(key);
}

// d2t as llama.cpp's converter writes it: absolute target ids (the checkpoint's offsets plus the row).
std::vector<int32_t> read_d2t(const gguf_file& f, int64_t n_rows) {
    const gguf_tensor& t = f.tensor("d2t");
    if (t.n_dims != 1 || t.ne[0] != n_rows)
        mismatch(f.path(), "tensor d2t has " + std::to_string(t.n_elements()) + " entries, expected one per row of "
                           "output.weight (" + std::to_string(n_rows) + ")");
    if (t.type != ggml_type::I64 && t.type != ggml_type::I32)
        mismatch(f.path(), std::string("tensor d2t has type ") + ggml_type_name(t.type) + ", expected I64 (or I32)");
    std::vector<int32_t> ids(static_cast<size_t>(n_rows));
    for (int64_t r = 0; r < n_rows; ++r) {
        int64_t id;
        if (t.type == ggml_type::I64) std::memcpy(&id, t.data + 8 * r, 8);
        else { int32_t v; std::memcpy(&v, t.data + 4 * r, 4); id = v; }
        if (id < INT32_MIN || id > INT32_MAX) id = -1;
        ids[size_t(r)] = int32_t(id);
    }
    return ids;
}

}  // namespace

std::shared_ptr<const eagle3_head> load_eagle3_head(const std::string& path, const model& target) {
    auto loaded = std::make_shared<eagle3_head>();
    eagle3_head& h = *loaded;
    try {
        h.file = std::make_shared<gguf_file>(path);
    } catch (const model_load_error& e) {  // name the knob: the message alone reads like the target's
        throw model_load_error(std::string("draft_head: ") + e.what());
    }
    const gguf_file& f = *h.file;
    const std::string arch = f.get_string("general.architecture", "");
    if (arch != kArch)
        mismatch(path, "general.architecture is '" + arch + "', expected 'eagle3' (a head converted by llama.cpp's "
                       "convert_hf_to_gguf.py from an EAGLE-3 checkpoint)");
    const std::string p = std::string(kArch) + ".";
    const hparams& tp = target.hp();

    // The target side: which layers, how wide.
    const gguf_value* layers = f.find(p + "target_layers");
    if (!layers) mismatch(path, "missing key " + p + "target_layers");
    for (int64_t l : f.get_int_array(p + "target_layers")) {
        if (l < 0 || l >= tp.n_layer)
            mismatch(path, p + "target_layers holds layer " + std::to_string(l) + ", outside the target's layers [0, " +
                               std::to_string(tp.n_layer) + ")");
        h.target_layers.push_back(int(l));
    }
    if (h.target_layers.size() != 3)
        mismatch(path, p + "target_layers has " + std::to_string(h.target_layers.size()) + " entries, expected 3");
    h.target_hidden = int(required_int(f, p + "target_hidden_size"));
    if (h.target_hidden != tp.n_embd)
        mismatch(path, p + "target_hidden_size is " + std::to_string(h.target_hidden) + " but the target's hidden size is " +
                           std::to_string(tp.n_embd));
    h.norm_before_residual = f.get_bool(p + "norm_before_residual", false);
    h.norm_before_fc = f.get_bool(p + "norm_before_fc", false);

    // The decoder layer's geometry.
    hparams& hp = h.hp;
    hp.arch = model_arch::llama;
    hp.n_layer = int(required_int(f, p + "block_count"));
    if (hp.n_layer != 1) mismatch(path, p + "block_count is " + std::to_string(hp.n_layer) + ", an EAGLE-3 head has 1");
    hp.n_embd = int(required_int(f, p + "embedding_length"));
    hp.n_ff = int(required_int(f, p + "feed_forward_length"));
    hp.n_head = int(required_int(f, p + "attention.head_count"));
    hp.n_head_kv = int(f.get_int(p + "attention.head_count_kv", hp.n_head));
    if (hp.n_embd <= 0 || hp.n_ff <= 0 || hp.n_head <= 0 || hp.n_head_kv <= 0 || hp.n_head % hp.n_head_kv != 0)
        mismatch(path, "inconsistent geometry (embedding_length, feed_forward_length, head_count, head_count_kv)");
    hp.head_dim = int(f.get_int(p + "attention.key_length", hp.n_embd / hp.n_head));
    if (hp.head_dim <= 0 || hp.head_dim % 2 != 0) mismatch(path, "head size " + std::to_string(hp.head_dim) + " is not even");
    if (f.get_int(p + "rope.dimension_count", hp.head_dim) != hp.head_dim)
        throw not_implemented_error("EAGLE-3 head " + path + ": partial rotary embedding");
    if (f.get_string(p + "rope.scaling.type", "none") != "none")
        throw not_implemented_error("EAGLE-3 head " + path + ": rope scaling '" + f.get_string(p + "rope.scaling.type") + "'");
    hp.norm_eps = float(f.get_float(p + "attention.layer_norm_rms_epsilon", 1e-5));
    hp.rope_base = float(f.get_float(p + "rope.freq_base", 10000.0));
    hp.attn_scale = float(1.0 / std::sqrt(double(hp.head_dim)));
    hp.rope = rope_style::normal;  // llama.cpp's LLAMA_ROPE_TYPE_NORM for eagle3 (q/k permuted by the converter)
    hp.layer_is_swa.assign(1, false);
    const int64_t E = hp.n_embd, Q = int64_t(hp.n_head) * hp.head_dim, KV = int64_t(hp.n_head_kv) * hp.head_dim;

    // Embedding and head: the head's own, else the target's.
    if (const gguf_tensor* te = f.find_tensor("token_embd.weight")) {
        if (te->n_dims != 2 || te->ne[1] < tp.n_vocab)
            mismatch(path, "token_embd.weight has " + std::to_string(te->ne[1]) + " rows, fewer than the target's " +
                               std::to_string(tp.n_vocab) + " tokens");
        h.token_embd = bind_matrix(f, "token_embd.weight", E, te->ne[1]);
        h.token_embd.n_rows = tp.n_vocab;  // the target's ids only (padding rows are never read)
    } else {
        if (tp.n_embd != E)
            mismatch(path, "no token_embd.weight of its own and a hidden size (" + std::to_string(E) +
                               ") other than the target's (" + std::to_string(tp.n_embd) + ")");
        h.token_embd = target.token_embd();
    }
    int64_t n_draft = tp.n_vocab;
    if (const gguf_tensor* out = f.find_tensor("output.weight")) {
        if (out->n_dims != 2) mismatch(path, "output.weight is not a matrix");
        n_draft = out->ne[1];
        if (n_draft > tp.n_vocab)
            mismatch(path, "its draft vocabulary (" + std::to_string(n_draft) + " rows of output.weight) is larger than "
                           "the target's vocabulary (" + std::to_string(tp.n_vocab) + ")");
        h.output = bind_matrix(f, "output.weight", E, n_draft);
    } else {
        if (tp.n_embd != E)
            mismatch(path, "no output.weight of its own and a hidden size other than the target's");
        h.output = target.output();
    }
    if (f.find_tensor("d2t")) {
        h.d2t = read_d2t(f, n_draft);
    } else {
        if (n_draft != tp.n_vocab)
            mismatch(path, "no d2t tensor, but its draft vocabulary (" + std::to_string(n_draft) +
                               ") differs from the target's (" + std::to_string(tp.n_vocab) + ")");
        h.d2t.resize(size_t(n_draft));
        for (int64_t r = 0; r < n_draft; ++r) h.d2t[size_t(r)] = int32_t(r);
    }
    std::unordered_set<int32_t> seen;
    for (size_t r = 0; r < h.d2t.size(); ++r) {
        const int32_t id = h.d2t[r];
        if (id < 0 || id >= tp.n_vocab)
            mismatch(path, "d2t maps draft id " + std::to_string(r) + " outside the target's vocabulary [0, " +
                               std::to_string(tp.n_vocab) + ")");
        if (!seen.insert(id).second) mismatch(path, "d2t maps two draft ids to target id " + std::to_string(id));
    }

    const int64_t F = int64_t(h.target_layers.size()) * h.target_hidden;
    h.fc = bind_matrix(f, "fc.weight", F, E);
    if (h.norm_before_fc) h.fc_norm = bind_vector(f, "enc.output_norm.weight", F);
    h.attn_norm = bind_vector(f, "blk.0.attn_norm.weight", E);
    h.hidden_norm = bind_vector(f, "blk.0.attn_norm_2.weight", E);
    h.ffn_norm = bind_vector(f, "blk.0.ffn_norm.weight", E);
    h.output_norm = bind_vector(f, "output_norm.weight", E);
    h.wq = bind_matrix(f, "blk.0.attn_q.weight", 2 * E, Q);
    h.wk = bind_matrix(f, "blk.0.attn_k.weight", 2 * E, KV);
    h.wv = bind_matrix(f, "blk.0.attn_v.weight", 2 * E, KV);
    h.wo = bind_matrix(f, "blk.0.attn_output.weight", Q, E);
    h.w_gate = bind_matrix(f, "blk.0.ffn_gate.weight", E, hp.n_ff);
    h.w_up = bind_matrix(f, "blk.0.ffn_up.weight", E, hp.n_ff);
    h.w_down = bind_matrix(f, "blk.0.ffn_down.weight", hp.n_ff, E);
    std::vector<float> factors;
    for (const char* name : {"rope_freqs.weight", "blk.0.rope_freqs.weight"})
        if (f.find_tensor(name)) factors = bind_vector(f, name, hp.head_dim / 2);
    h.rope_inv_freq = rope_inv_freq(hp.rope_base, hp.head_dim, rope_scaling{}, factors.empty() ? nullptr : factors.data());

    // The head's own matrices get a slot for a backend's layout (the target's have theirs).
    for (weight_view* w : {&h.fc, &h.wq, &h.wk, &h.wv, &h.wo, &h.w_gate, &h.w_up, &h.w_down}) {
        h.repacks.push_back(std::make_unique<weight_repack>());
        w->repack = h.repacks.back().get();
    }
    if (f.find_tensor("output.weight")) {
        h.repacks.push_back(std::make_unique<weight_repack>());
        h.output.repack = h.repacks.back().get();
    }
    if (f.find_tensor("token_embd.weight")) {
        h.repacks.push_back(std::make_unique<weight_repack>());
        h.token_embd.repack = h.repacks.back().get();
    }
    return loaded;
}

eagle3_evaluator::eagle3_evaluator(const eagle3_head& head, backend& be)
    : h_(head), be_(be), feat_(be), g_(be), e_(be), gn_(be), cat_(be), q_(be), k_(be), v_(be), attn_(be), proj_(be),
      xn_(be), gate_(be), up_(be), x_(be), out_(be), logits_(be) {
    for (const weight_view* w : {&h_.fc, &h_.wq, &h_.wk, &h_.wv, &h_.wo, &h_.w_gate, &h_.w_up, &h_.w_down, &h_.output})
        be_.prepare(*w);
}

void eagle3_evaluator::ensure_capacity(int n) {
    if (n <= capacity_) return;
    const hparams& hp = h_.hp;
    const size_t E = hp.n_embd, Q = size_t(hp.n_head) * hp.head_dim, KV = size_t(hp.n_head_kv) * hp.head_dim;
    const size_t F = h_.target_layers.size() * size_t(h_.target_hidden);
    feat_.reserve(n * F);
    for (backend_buffer<float>* b : {&g_, &e_, &gn_, &proj_, &xn_, &x_, &out_}) b->reserve(n * E);
    cat_.reserve(n * 2 * E);
    q_.reserve(n * Q);
    attn_.reserve(n * Q);
    k_.reserve(n * KV);
    v_.reserve(n * KV);
    gate_.reserve(size_t(n) * hp.n_ff);
    up_.reserve(size_t(n) * hp.n_ff);
    prenorm_host_.resize(n * E);
    pos_.resize(n);
    capacity_ = n;
}

void eagle3_evaluator::fuse(const float* features, int n, float* g) {
    const int E = h_.hp.n_embd;
    const int64_t F = int64_t(h_.target_layers.size()) * h_.target_hidden;
    for (int off = 0; off < n; off += kChunk) {
        const int m = std::min(kChunk, n - off);
        ensure_capacity(m);
        const float* in = features + size_t(off) * F;
        if (h_.norm_before_fc) {
            be_.rms_norm(in, be_.constant(h_.fc_norm.data(), F), m, int(F), h_.hp.norm_eps, feat_.data());
            in = feat_.data();
        }
        be_.matmul(h_.fc, in, m, g_.data());
        be_.download(g + size_t(off) * E, g_.data(), size_t(m) * E * sizeof(float));
    }
}

void eagle3_evaluator::forward(kv_cache& cache, const int32_t* tokens, const float* g, int n, int pos0) {
    const hparams& hp = h_.hp;
    if (n <= 0 || n > kChunk) throw invalid_argument_error("eagle3 forward of " + std::to_string(n) + " rows");
    if (pos0 < 0 || pos0 + n > cache.n_ctx())
        throw context_overflow_error("eagle3 positions " + std::to_string(pos0) + ".." + std::to_string(pos0 + n - 1) +
                                     " exceed the context of " + std::to_string(cache.n_ctx()) + " tokens");
    cache.allocate(be_);
    ensure_capacity(n);
    const int E = hp.n_embd, D = hp.head_dim;
    auto constant = [&](const std::vector<float>& host) { return be_.constant(host.data(), int64_t(host.size())); };
    for (int t = 0; t < n; ++t) pos_[t] = pos0 + t;
    single_.clear();
    single_.add(0, tokens, n, pos0);

    // Inputs: e' = attn_norm(embd(t)), g' = attn_norm_2(g); the attention reads [e' | g'].
    be_.upload(g_.data(), g, size_t(n) * E * sizeof(float));
    be_.get_rows(h_.token_embd, tokens, n, e_.data());
    be_.rms_norm(e_.data(), constant(h_.attn_norm), n, E, hp.norm_eps, e_.data());
    be_.rms_norm(g_.data(), constant(h_.hidden_norm), n, E, hp.norm_eps, gn_.data());
    for (int t = 0; t < n; ++t) {
        be_.copy(cat_.data() + size_t(t) * 2 * E, e_.data() + size_t(t) * E, E * sizeof(float));
        be_.copy(cat_.data() + size_t(t) * 2 * E + E, gn_.data() + size_t(t) * E, E * sizeof(float));
    }
    {
        const weight_view qkv[3] = {h_.wq, h_.wk, h_.wv};
        float* const outs[3] = {q_.data(), k_.data(), v_.data()};
        be_.matmul_shared_input(qkv, outs, 3, cat_.data(), n);
    }
    const rope_freqs freqs{h_.rope_inv_freq.data(), 1.0f};
    be_.rope(q_.data(), n, hp.n_head, D, pos_.data(), freqs, hp.rope);
    be_.rope(k_.data(), n, hp.n_head_kv, D, pos_.data(), freqs, hp.rope);
    attention_params ap;
    ap.n_head = hp.n_head;
    ap.n_head_kv = hp.n_head_kv;
    ap.head_dim = D;
    ap.scale = hp.attn_scale;
    attention_.run(be_, cache, single_, 0, ap, q_.data(), k_.data(), v_.data(), pos_.data(), attn_.data());
    be_.matmul(h_.wo, attn_.data(), n, proj_.data());
    // The residual is the raw g (llama.cpp's default) or g' (norm_before_residual).
    be_.add(proj_.data(), h_.norm_before_residual ? gn_.data() : g_.data(), int64_t(n) * E, x_.data());

    be_.rms_norm(x_.data(), constant(h_.ffn_norm), n, E, hp.norm_eps, xn_.data());
    {
        const weight_view gate_up[2] = {h_.w_gate, h_.w_up};
        float* const outs[2] = {gate_.data(), up_.data()};
        be_.matmul_shared_input(gate_up, outs, 2, xn_.data(), n);
    }
    be_.silu_mul(gate_.data(), up_.data(), int64_t(n) * hp.n_ff, gate_.data());
    be_.matmul(h_.w_down, gate_.data(), n, proj_.data());
    be_.add(x_.data(), proj_.data(), int64_t(n) * E, x_.data());
    be_.download(prenorm_host_.data(), x_.data(), size_t(n) * E * sizeof(float));
    be_.rms_norm(x_.data(), constant(h_.output_norm), n, E, hp.norm_eps, out_.data());
}

void eagle3_evaluator::logits(int i, const weight_view& output, float* out) {
    const size_t V = size_t(output.n_rows);
    const float* row = out_.data() + size_t(i) * h_.hp.n_embd;
    if (be_.host_memory()) {
        be_.matmul(output, row, 1, out);
        return;
    }
    logits_.reserve(V);
    be_.matmul(output, row, 1, logits_.data());
    be_.download(out, logits_.data(), V * sizeof(float));
}

}  // namespace specgen
