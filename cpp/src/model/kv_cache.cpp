#include "model/kv_cache.h"

#include <cstring>

#include "common/error.h"
#include "backend/kv_convert.h"

namespace specgen {

ggml_type kv_cache_type_from_name(const std::string& name) {
    if (name == "f32") return ggml_type::F32;
    if (name == "f16") return ggml_type::F16;
    if (name == "q8_0") return ggml_type::Q8_0;
    throw invalid_argument_error("KV cache type '" + name + "' is not one of f32, f16, q8_0");
}

bool kv_cache_type_supported(ggml_type t) {
    return t == ggml_type::F32 || t == ggml_type::F16 || t == ggml_type::Q8_0;
}

kv_cache::kv_cache(const hparams& hp, int n_ctx, int n_seq, ggml_type type_k, ggml_type type_v)
    : n_ctx_(n_ctx), n_seq_(n_seq), n_layer_(hp.n_layer), type_k_(type_k), type_v_(type_v),
      row_elems_(int64_t(hp.n_head_kv) * hp.head_dim), head_dim_(hp.head_dim), n_head_kv_(hp.n_head_kv) {
    if (n_ctx <= 0) throw invalid_argument_error("n_ctx must be positive, got " + std::to_string(n_ctx));
    if (n_seq <= 0) throw invalid_argument_error("n_seq must be positive, got " + std::to_string(n_seq));
    for (ggml_type t : {type_k, type_v}) {
        if (!kv_cache_type_supported(t))
            throw invalid_argument_error(std::string("KV cache type ") + ggml_type_name(t) + " is not one of f32, f16, q8_0");
        if (t == ggml_type::Q8_0 && hp.head_dim % 32 != 0)
            throw invalid_argument_error("KV cache type q8_0 needs head_dim a multiple of 32, the model has " +
                                         std::to_string(hp.head_dim));
    }
    row_bytes_k_ = ggml_row_size(type_k, row_elems_);
    row_bytes_v_ = ggml_row_size(type_v, row_elems_);
    head_row_bytes_k_ = ggml_row_size(type_k, head_dim_);
    head_row_bytes_v_ = ggml_row_size(type_v, head_dim_);
    seq_bytes_ = size_t(n_layer_) * (layer_bytes_k() + layer_bytes_v());
}

void kv_cache::allocate(backend& be) {
    if (kv_) {
        if (&kv_->owner() != &be)
            throw invalid_argument_error(std::string("this KV cache lives in the memory of the ") + kv_->owner().name() +
                                         " backend and cannot be used by another backend (" + be.name() + ")");
        return;
    }
    if ((type_k_ != ggml_type::F32 || type_v_ != ggml_type::F32) && !be.host_memory())
        throw invalid_argument_error(std::string("KV cache types f16 / q8_0 need a host-memory backend; the ") + be.name() +
                                     " backend supports f32 only");
    auto buf = std::make_unique<backend_buffer<uint8_t>>(be);
    buf->reserve(bytes());
    kv_ = std::move(buf);
    head_major_ = be.host_memory();
}

void kv_cache::check_seq(int seq, const char* what) const {
    if (seq < 0 || seq >= n_seq_)
        throw invalid_argument_error(std::string(what) + ": sequence " + std::to_string(seq) + " outside [0, " +
                                     std::to_string(n_seq_) + ")");
}

void kv_cache::check_rows(int pos0, int n, const char* what) const {
    if (pos0 < 0 || n < 0 || int64_t(pos0) + n > n_ctx_)
        throw invalid_argument_error(std::string(what) + ": KV rows " + std::to_string(pos0) + "+" + std::to_string(n) +
                                     " outside the cache of " + std::to_string(n_ctx_));
}

uint8_t* kv_cache::base(int seq) const {
    if (!kv_) throw invalid_argument_error("the KV cache is not allocated yet");
    check_seq(seq, "KV cache");
    return const_cast<uint8_t*>(kv_->data()) + size_t(seq) * seq_bytes_;
}

uint8_t* kv_cache::k_at(int il, int seq, int hk, int pos) const {
    return static_cast<uint8_t*>(const_cast<kv_cache*>(this)->k_data(il, seq)) + size_t(hk) * head_bytes_k() +
           size_t(pos) * pos_bytes_k();
}

uint8_t* kv_cache::v_at(int il, int seq, int hk, int pos) const {
    return static_cast<uint8_t*>(const_cast<kv_cache*>(this)->v_data(il, seq)) + size_t(hk) * head_bytes_v() +
           size_t(pos) * pos_bytes_v();
}

void kv_cache::clear(int seq) {
    uint8_t* p = base(seq);
    backend& be = kv_->owner();
    if (be.host_memory()) {
        std::memset(p, 0, seq_bytes_);
    } else {  // zeros from a fresh (zero-filled) buffer in the backend's memory
        backend_buffer<uint8_t> zeros(be);
        zeros.reserve(seq_bytes_);
        be.copy(p, zeros.data(), seq_bytes_);
    }
}

void kv_cache::copy_prefix(int src, int dst, int n) {
    copy_rows_from(*this, src, dst, 0, n);
}

void kv_cache::copy_rows_from(const kv_cache& src, int src_seq, int dst_seq, int pos0, int n) {
    if (src.n_ctx_ != n_ctx_ || src.n_layer_ != n_layer_ || src.row_elems_ != row_elems_ || src.type_k_ != type_k_ ||
        src.type_v_ != type_v_)
        throw invalid_argument_error("KV rows can be copied only between caches of the same shape and types");
    check_rows(pos0, n, "copy KV rows");
    src.check_seq(src_seq, "copy KV rows (source)");
    check_seq(dst_seq, "copy KV rows (destination)");
    if (!src.kv_ || !kv_ || &src.kv_->owner() != &kv_->owner())
        throw invalid_argument_error("KV rows can be copied only between allocated caches of one backend");
    if (n == 0 || (&src == this && src_seq == dst_seq)) return;
    backend& be = kv_->owner();
    // Rows pos0.. of one kv head are contiguous in a head-major layer (one backend: both caches have it),
    // of all heads in a whole-row one.
    const int spans = head_major_ ? n_head_kv_ : 1;
    for (int il = 0; il < n_layer_; ++il)
        for (int hk = 0; hk < spans; ++hk) {
            be.copy(k_at(il, dst_seq, hk, pos0), src.k_at(il, src_seq, hk, pos0), size_t(n) * pos_bytes_k());
            be.copy(v_at(il, dst_seq, hk, pos0), src.v_at(il, src_seq, hk, pos0), size_t(n) * pos_bytes_v());
        }
}

void kv_cache::check_host_f32(const char* what) const {
    if (!kv_ || !kv_->owner().host_memory())
        throw invalid_argument_error(std::string(what) + ": KV rows can be copied only from an allocated host-memory cache");
    if (type_k_ != ggml_type::F32 || type_v_ != ggml_type::F32)
        throw invalid_argument_error(std::string(what) + ": KV rows as floats need an f32 cache, this one is K " +
                                     ggml_type_name(type_k_) + " / V " + ggml_type_name(type_v_) +
                                     " (copy_rows_from copies between caches of the same type)");
}

void kv_cache::read_rows(int pos0, int n, float* out, int seq) const {
    check_host_f32("read_rows");
    check_rows(pos0, n, "read_rows");
    const size_t span = size_t(n) * row_floats(), head = size_t(head_dim_) * sizeof(float);
    for (int il = 0; il < n_layer_; ++il)
        for (int t = 0; t < n; ++t)
            for (int hk = 0; hk < n_head_kv_; ++hk) {
                const size_t at = size_t(t) * row_floats() + size_t(hk) * head_dim_;
                std::memcpy(out + size_t(il) * span + at, k_at(il, seq, hk, pos0 + t), head);
                std::memcpy(out + size_t(n_layer_ + il) * span + at, v_at(il, seq, hk, pos0 + t), head);
            }
}

void kv_cache::write_rows(int pos0, int n, const float* in, int seq) {
    check_host_f32("write_rows");
    check_rows(pos0, n, "write_rows");
    const size_t span = size_t(n) * row_floats(), head = size_t(head_dim_) * sizeof(float);
    for (int il = 0; il < n_layer_; ++il)
        for (int t = 0; t < n; ++t)
            for (int hk = 0; hk < n_head_kv_; ++hk) {
                const size_t at = size_t(t) * row_floats() + size_t(hk) * head_dim_;
                std::memcpy(k_at(il, seq, hk, pos0 + t), in + size_t(il) * span + at, head);
                std::memcpy(v_at(il, seq, hk, pos0 + t), in + size_t(n_layer_ + il) * span + at, head);
            }
}

void kv_cache::store(backend& be, int il, int seq, int pos0, int n, const float* k_rows, const float* v_rows) {
    check_rows(pos0, n, "store KV rows");
    if (!head_major_) {
        // Whole rows: f32 is a backend copy (device memory on CUDA); other types are host memory (allocate() checks).
        uint8_t* kd = k_at(il, seq, 0, pos0);
        uint8_t* vd = v_at(il, seq, 0, pos0);
        if (type_k_ == ggml_type::F32) be.copy(kd, k_rows, size_t(n) * row_bytes_k_);
        else for (int t = 0; t < n; ++t) kv::from_float(type_k_, k_rows + t * row_elems_, kd + t * row_bytes_k_, row_elems_);
        if (type_v_ == ggml_type::F32) be.copy(vd, v_rows, size_t(n) * row_bytes_v_);
        else for (int t = 0; t < n; ++t) kv::from_float(type_v_, v_rows + t * row_elems_, vd + t * row_bytes_v_, row_elems_);
        return;
    }
    // Head-major (host memory): each row's kv heads go to their own runs of rows.
    for (int t = 0; t < n; ++t)
        for (int hk = 0; hk < n_head_kv_; ++hk) {
            const int64_t at = t * row_elems_ + int64_t(hk) * head_dim_;
            kv::from_float(type_k_, k_rows + at, k_at(il, seq, hk, pos0 + t), head_dim_);
            kv::from_float(type_v_, v_rows + at, v_at(il, seq, hk, pos0 + t), head_dim_);
        }
}

// Rows [first, end) of one layer's K or V (through `at`, kv_cache::k_at / v_at) as float rows.
template <class At>
static void rows_as_float(ggml_type type, int n_head_kv, int head_dim, int first, int end, At&& at, float* dst) {
    for (int p = first; p < end; ++p)
        for (int hk = 0; hk < n_head_kv; ++hk)
            kv::to_float(type, at(hk, p), dst + (int64_t(p) * n_head_kv + hk) * head_dim, head_dim);
}

const float* kv_cache::keys(int il, int seq, int first, int end, float* k_tmp) {
    if (type_k_ == ggml_type::F32 && !head_major_) return static_cast<const float*>(k_data(il, seq));
    check_rows(first, end - first, "read keys");
    rows_as_float(type_k_, n_head_kv_, head_dim_, first, end, [&](int hk, int p) { return k_at(il, seq, hk, p); }, k_tmp);
    return k_tmp;
}

const float* kv_cache::values(int il, int seq, int first, int end, float* v_tmp) {
    if (type_v_ == ggml_type::F32 && !head_major_) return static_cast<const float*>(v_data(il, seq));
    check_rows(first, end - first, "read values");
    rows_as_float(type_v_, n_head_kv_, head_dim_, first, end, [&](int hk, int p) { return v_at(il, seq, hk, p); }, v_tmp);
    return v_tmp;
}

}  // namespace specgen
