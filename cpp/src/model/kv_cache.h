// The KV cache: keys and values of every layer for up to n_seq sequences, each in its own region
// (a slot of n_ctx rows), stored as f32, f16 or q8_0 (separate types for K and V, as llama.cpp's
// -ctk / -ctv). Lives in the memory of the backend that computes with it (host for CPU, device for
// CUDA; f16 / q8_0 need host memory).
//
// Layout (backend memory, one block per sequence so a sequence's state is contiguous):
//   sequence s: [K of layer 0 .. n_layer-1][V of layer 0 .. n_layer-1], each layer n_ctx rows of
//   n_head_kv * head_dim elements in the cache's type. In host memory (the CPU backend) a layer holds
//   each kv head's n_ctx rows together ([n_head_kv][n_ctx][head_dim], "head-major"): attention gives a
//   thread one kv head, and a thread that streams whole rows reads the cache ~2.5x faster than one that
//   takes every other half of a row (docs/bench/kv-head-major-2026-12-07.md). Device memory (CUDA)
//   keeps the rows whole ([n_ctx][n_head_kv][head_dim]), as its attention kernel reads them.
// A row is converted to its type once, when written (kv_convert.h); attention reads it back as
// float, so a sequence's results depend only on its own rows (batch invariance).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "backend/backend.h"
#include "model/hparams.h"
#include "quant/ggml_type.h"

namespace specgen {

// "f32", "f16", "q8_0" (llama.cpp's -ctk / -ctv names) -> the type; invalid_argument_error otherwise.
ggml_type kv_cache_type_from_name(const std::string& name);
// Whether `t` can be a KV cache type (F32, F16, Q8_0).
bool kv_cache_type_supported(ggml_type t);

class kv_cache {
public:
    // n_seq sequences of n_ctx rows each. Throws invalid_argument_error for n_ctx or n_seq < 1, an
    // unsupported type, or q8_0 with a head_dim that is not a multiple of 32 (a block must not span
    // two heads).
    kv_cache(const hparams& hp, int n_ctx, int n_seq = 1, ggml_type type_k = ggml_type::F32,
             ggml_type type_v = ggml_type::F32);
    // Allocates the cache (zero-filled) in `be`'s memory; the first evaluator that uses the cache
    // does it if nobody did before. Throws invalid_argument_error for a second, different backend,
    // and for f16 / q8_0 on a backend without host memory.
    void allocate(backend& be);
    bool allocated() const { return kv_ != nullptr; }

    int n_ctx() const { return n_ctx_; }
    int n_seq() const { return n_seq_; }
    int n_layer() const { return n_layer_; }
    ggml_type type_k() const { return type_k_; }
    ggml_type type_v() const { return type_v_; }
    int64_t row_elements() const { return row_elems_; }  // n_head_kv * head_dim
    size_t row_bytes_k() const { return row_bytes_k_; }     // one position's keys, every kv head
    size_t row_bytes_v() const { return row_bytes_v_; }
    // Where kv head hk's element 0 of row p of a layer lies: k_data(il) + hk * head_bytes_k() +
    // p * pos_bytes_k() (the layout above; fixed once allocate() knows the backend's memory).
    bool head_major() const { return head_major_; }
    size_t head_bytes_k() const { return head_major_ ? size_t(n_ctx_) * head_row_bytes_k_ : head_row_bytes_k_; }
    size_t head_bytes_v() const { return head_major_ ? size_t(n_ctx_) * head_row_bytes_v_ : head_row_bytes_v_; }
    size_t pos_bytes_k() const { return head_major_ ? head_row_bytes_k_ : row_bytes_k_; }
    size_t pos_bytes_v() const { return head_major_ ? head_row_bytes_v_ : row_bytes_v_; }
    size_t bytes_per_sequence() const { return seq_bytes_; }  // K and V of every layer, n_ctx rows
    size_t bytes() const { return seq_bytes_ * size_t(n_seq_); }

    // Start of layer il's rows of sequence seq, in the cache's type (backend memory).
    void* k_data(int il, int seq = 0) { return base(seq) + size_t(il) * layer_bytes_k(); }
    void* v_data(int il, int seq = 0) { return base(seq) + size_t(n_layer_) * layer_bytes_k() + size_t(il) * layer_bytes_v(); }
    const void* k_data(int il, int seq = 0) const { return const_cast<kv_cache*>(this)->k_data(il, seq); }
    const void* v_data(int il, int seq = 0) const { return const_cast<kv_cache*>(this)->v_data(il, seq); }

    // Zero-fills sequence seq's region (a freed slot; positions are the caller's truth either way).
    void clear(int seq);
    // Rows [0, n) of every layer of sequence src copied into sequence dst (prefix reuse: a request
    // whose prompt starts with src's first n tokens continues from n). Rows of dst past n are kept.
    void copy_prefix(int src, int dst, int n);
    // Rows [pos0, pos0+n) of every layer of `src`'s sequence src_seq into this cache's sequence
    // dst_seq, byte for byte. Both caches need the same geometry and types (invalid_argument_error).
    void copy_rows_from(const kv_cache& src, int src_seq, int dst_seq, int pos0, int n);

    // Keys and values of rows pos0..pos0+n-1 of every layer of sequence seq, as
    // [K of layer 0..n_layer-1, then V][n][row] floats (row_floats() each): how a drafter that ran every
    // layer on the same weights hands its rows to the target's cache (speculative/ssd/ssd.h). f32 host-memory
    // caches only (invalid_argument_error otherwise: a converted row would not be the row the target
    // writes; use copy_rows_from between caches of the same type).
    size_t row_floats() const { return size_t(row_elems_); }
    void read_rows(int pos0, int n, float* out, int seq = 0) const;
    void write_rows(int pos0, int n, const float* in, int seq = 0);

    // Writes float rows k_rows, v_rows ([n, row_elements()], backend memory) as rows pos0.. of layer
    // il of sequence seq, converting to the cache's types.
    void store(backend& be, int il, int seq, int pos0, int n, const float* k_rows, const float* v_rows);
    // Rows [first, end) of layer il of sequence seq as float rows [n_ctx][row_elements()]: the cache
    // itself for a whole-row f32 cache, else converted into k_tmp / v_tmp (host memory of at least
    // end * row_elements() floats; rows below `first` are left untouched). Returned pointers index rows from 0.
    const float* keys(int il, int seq, int first, int end, float* k_tmp);
    const float* values(int il, int seq, int first, int end, float* v_tmp);

private:
    uint8_t* base(int seq) const;  // checks allocation and the sequence index
    void check_seq(int seq, const char* what) const;
    void check_rows(int pos0, int n, const char* what) const;
    void check_host_f32(const char* what) const;
    // Kv head hk's element 0 of row pos of layer il (the layout above).
    uint8_t* k_at(int il, int seq, int hk, int pos) const;
    uint8_t* v_at(int il, int seq, int hk, int pos) const;
    size_t layer_bytes_k() const { return size_t(n_ctx_) * row_bytes_k_; }
    size_t layer_bytes_v() const { return size_t(n_ctx_) * row_bytes_v_; }

    int n_ctx_, n_seq_, n_layer_;
    ggml_type type_k_, type_v_;
    int64_t row_elems_;
    int head_dim_, n_head_kv_;
    size_t row_bytes_k_, row_bytes_v_, seq_bytes_;
    size_t head_row_bytes_k_, head_row_bytes_v_;  // head_dim elements of one kv head
    bool head_major_ = false;
    std::unique_ptr<backend_buffer<uint8_t>> kv_;
};

}  // namespace specgen
