// The compute interface the model forward is written against. The CPU backend implements it in
// cpu_backend.cpp; the CUDA backend (cuda/) implements the same operations on device memory.
//
// Activations are float32 row-major: x[t, i] at x + t * n + i. Every operation computes each row
// (token) independently with a fixed accumulation order, so a row's result never depends on how
// many rows were computed with it (batch invariance).
//
// Memory: float arrays the operations read and write (activations, scratch, the KV cache) are
// *backend memory*, allocated through alloc(): host memory for the CPU backend, device memory for
// CUDA. Index arrays (token ids, selected rows, positions) are always host memory. Weights
// (weight_view::data) and model constants (norm weights, biases) are host memory that stays alive
// and unchanged as long as the backend: a device backend copies each once, on first use, and
// finds the copy again by its host pointer.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <utility>

#include "quant/ggml_type.h"

namespace specgen {

// A backend's re-layout of one matrix (the CPU backend's rows16, quant/rows16.h), made once on first
// use and shared by every backend and thread on the model; owned by the model, alive with it.
struct weight_repack {
    std::once_flag once;  // a backend's fill on first use runs under it (std::call_once)
    int64_t n_rows = 0;  // rows packed (the view's at its first use); 0: not packed
    std::unique_ptr<uint8_t, decltype(&std::free)> data{nullptr, &std::free};
    // Called with the source matrix's bytes once the copy is filled (may be empty): a model whose
    // weights are a mapped file drops their resident pages, so the copy does not double the memory.
    std::function<void(const void*, size_t)> release_source;

    // data = a new 64-byte-aligned buffer of at least `bytes` (contents undefined).
    void allocate(size_t bytes) {
        data.reset(static_cast<uint8_t*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64)));
        if (!data) throw std::bad_alloc();
    }
    // For an owner that fills the slot itself and keeps n_rows current, before any backend sees the
    // slot: completes `once`, so no backend's first use packs over it.
    void mark_filled() { std::call_once(once, [] {}); }
};

// A weight matrix [n_rows, n_cols] in its stored (quantized) format, rows contiguous. `repack`, when
// set, is where a backend may keep its own layout of the same matrix.
struct weight_view {
    ggml_type type = ggml_type::F32;
    int64_t n_rows = 0;
    int64_t n_cols = 0;
    const void* data = nullptr;
    weight_repack* repack = nullptr;
    // 0: data is immutable while the backend lives (mapped GGUF tensors), so a backend may keep a copy
    // keyed by data. Otherwise the rows at data change in place (NanoSpec's gathered head) and version
    // changes with them, unique across all such weights: a copy made at another version is stale.
    uint64_t version = 0;
    size_t row_bytes() const { return ggml_row_size(type, n_cols); }
};

// A fresh weight_view::version (never 0, never handed out twice; thread-safe).
uint64_t next_weight_version();

enum class rope_style { normal, neox };  // normal: adjacent pairs (llama GGUF); neox: halves

// The frequencies of one RoPE (model/rope_scaling.h): pair i of a head at position p is rotated by
// angle float(p) * inv_freq[i], and cos/sin are multiplied by mscale (YaRN; 1 otherwise).
// inv_freq: host memory [head_dim / 2], a model constant (alive and unchanged as long as the backend).
struct rope_freqs {
    const float* inv_freq = nullptr;
    float mscale = 1.0f;
};

struct attention_params {
    int n_head = 0, n_head_kv = 0, head_dim = 0;
    float scale = 1.0f;
    int sliding_window = 0;  // 0: full causal attention; else key j visible to query i iff i - j < window
    float softcap = 0.0f;    // 0: none
};

// One sequence's part of backend::attention_batch: its query rows [row0, row0 + n_rows) of q, pos
// and out, over its own cache rows [0, n_kv) of n_head_kv * head_dim elements stored as F32, F16 or
// Q8_0 (backend memory): kv head hk's elements of row p start at k + hk * head_bytes_k + p * row_bytes_k
// (model/kv_cache.h: head-major in host memory, whole rows in device memory).
struct attention_seq {
    const void* k = nullptr;
    const void* v = nullptr;
    ggml_type type_k = ggml_type::F32, type_v = ggml_type::F32;
    size_t row_bytes_k = 0, row_bytes_v = 0;    // from one position to the next, within a kv head
    size_t head_bytes_k = 0, head_bytes_v = 0;  // from one kv head to the next
    int row0 = 0, n_rows = 0, n_kv = 0;
};

struct backend {
    virtual ~backend() = default;
    virtual const char* name() const = 0;
    virtual int n_threads() const = 0;
    // Threads the next calls use, in [1, n_threads()] (thread_pool::set_active_threads); a no-op
    // where the backend does not run on host threads.
    virtual void set_active_threads(int) {}

    // y[t, r] = sum_c W[r, c] x[t, c]   x: [n_tokens, W.n_cols], y: [n_tokens, W.n_rows]
    virtual void matmul(const weight_view& W, const float* x, int n_tokens, float* y) = 0;
    // Makes the backend's own layout of W now rather than at its first matmul (an evaluator calls it
    // for every matrix when it is made, so no request pays for it).
    virtual void prepare(const weight_view&) {}
    // ys[i] = matmul(Ws[i], x) for i < n_mats: several matrices over the same input (q/k/v, gate/up).
    // The default calls matmul per matrix; the CPU backend quantizes x once per activation format and
    // runs every matrix in one parallel region. Outputs are those of matmul, bit for bit.
    virtual void matmul_shared_input(const weight_view* Ws, float* const* ys, int n_mats, const float* x,
                                     int n_tokens) {
        for (int i = 0; i < n_mats; ++i) matmul(Ws[i], x, n_tokens, ys[i]);
    }
    // y[t, k] = W[rows[k], :] . x[t, :] for k < n_rows_sel   (NanoSpec / gathered heads)
    virtual void matmul_selected(const weight_view& W, const int32_t* rows, int64_t n_rows_sel,
                                 const float* x, int n_tokens, float* y) = 0;
    // y[t, :] = W[ids[t], :] dequantized   (embedding lookup)
    virtual void get_rows(const weight_view& W, const int32_t* ids, int n, float* y) = 0;
    // y[t, :] = x[t, :] / rms(x[t, :]) * w   (w may be null: no weight); in place allowed
    virtual void rms_norm(const float* x, const float* w, int n_rows, int n, float eps, float* y) = 0;
    // Rotates each of n_heads heads of x[t] by position pos[t].  x: [n_tokens, n_heads, head_dim]
    virtual void rope(float* x, int n_tokens, int n_heads, int head_dim, const int32_t* pos,
                      const rope_freqs& freqs, rope_style style) = 0;
    // Causal attention of n_tokens queries at positions pos[t] over cache rows [0, n_kv).
    //   q: [n_tokens, n_head, head_dim]; k_cache, v_cache: [n_ctx, n_head_kv, head_dim]; out like q
    virtual void attention(const float* q, const float* k_cache, const float* v_cache, int n_tokens,
                           const int32_t* pos, int n_kv, const attention_params& p, float* out) = 0;
    // attention() of several sequences in one call (a ragged batch): each sequence's queries see its
    // own cache only; every output row is the one attention() gives for that sequence alone, bit for
    // bit, with F16 / Q8_0 rows read as their float values. The default calls attention() per
    // sequence and takes F32 caches only (invalid_argument_error otherwise).
    virtual void attention_batch(const float* q, const attention_seq* seqs, int n_seqs, const int32_t* pos,
                                 const attention_params& p, float* out);
    // out[i] = gelu_tanh(gate[i]) * up[i]  or  silu(gate[i]) * up[i]
    virtual void gelu_mul(const float* gate, const float* up, int64_t n, float* out) = 0;
    virtual void silu_mul(const float* gate, const float* up, int64_t n, float* out) = 0;
    // Parallel helper for elementwise work that the model needs (adds, scaling).
    virtual void add(const float* a, const float* b, int64_t n, float* out) = 0;
    // out[i] = x[i] * s   (in place allowed)
    virtual void scale(const float* x, float s, int64_t n, float* out) = 0;

    // --- Backend memory. The defaults are host memory (the CPU backend); CUDA overrides all. ---
    // True when backend memory is host memory: the caller may read and write it directly.
    virtual bool host_memory() const { return true; }
    // `bytes` of zero-filled backend memory, 64-byte aligned. Throws on exhaustion.
    virtual void* alloc(size_t bytes);
    virtual void free(void* p);
    virtual void upload(void* dst, const void* host_src, size_t bytes);
    // Waits for the operations queued before it, then copies to the host.
    virtual void download(void* host_dst, const void* src, size_t bytes);
    // Both in backend memory.
    virtual void copy(void* dst, const void* src, size_t bytes);
    // The backend-memory copy of a host array of model constants (see the top of this file);
    // the host array itself for host-memory backends.
    virtual const float* constant(const float* host, int64_t n) { return host; }
};

// n elements of T in a backend's memory, freed with it. resize() keeps no contents.
template <class T>
class backend_buffer {
public:
    explicit backend_buffer(backend& be) : be_(&be) {}
    ~backend_buffer() { reset(); }
    backend_buffer(const backend_buffer&) = delete;
    backend_buffer& operator=(const backend_buffer&) = delete;
    backend_buffer(backend_buffer&& o) noexcept
        : be_(o.be_), p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}

    // Grows to at least n elements (new memory is zero-filled; old contents are dropped).
    void reserve(size_t n) {
        if (n <= n_) return;
        reset();
        p_ = static_cast<T*>(be_->alloc(n * sizeof(T)));
        n_ = n;
    }
    void reset() {
        if (p_) be_->free(p_);
        p_ = nullptr;
        n_ = 0;
    }
    T* data() { return p_; }
    const T* data() const { return p_; }
    size_t size() const { return n_; }
    backend& owner() const { return *be_; }

private:
    backend* be_;
    T* p_ = nullptr;
    size_t n_ = 0;
};

class thread_pool;
std::unique_ptr<backend> make_cpu_backend(int n_threads);

// For its lifetime the backend's parallel regions use n threads (n_threads_draft: a draft model's
// forwards), then all of them again; n <= 0 changes nothing.
class active_threads_scope {
public:
    active_threads_scope(backend& be, int n) : be_(n > 0 ? &be : nullptr) {
        if (be_) be_->set_active_threads(n);
    }
    ~active_threads_scope() {
        if (be_) be_->set_active_threads(be_->n_threads());
    }
    active_threads_scope(const active_threads_scope&) = delete;
    active_threads_scope& operator=(const active_threads_scope&) = delete;

private:
    backend* be_;
};

// The memory the kernel reports available now for new allocations (Linux MemAvailable), 0 when unknown.
size_t available_host_memory();

// CUDA (cuda/; compiled when SPECGEN_CUDA is on). Both are callable in every build:
// cuda_device_count() is 0 without CUDA support or without a usable device, and
// make_cuda_backend() then throws device_error saying which.
bool cuda_compiled();
int cuda_device_count();
std::unique_ptr<backend> make_cuda_backend(int device);

// The backend for a device string: "cpu", "cuda" (device 0) or "cuda:N". Throws
// invalid_argument_error for other strings and device_error when CUDA is unavailable.
std::unique_ptr<backend> make_backend(const std::string& device, int n_threads);

}  // namespace specgen
