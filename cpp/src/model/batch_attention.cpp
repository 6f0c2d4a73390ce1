#include "model/batch_attention.h"

#include <algorithm>

namespace specgen {

void batch_attention::run(backend& be, kv_cache& cache, const batch& b, int il, const attention_params& ap,
                          const float* q, const float* k, const float* v, const int32_t* pos, float* out) {
    const int64_t Q = int64_t(ap.n_head) * ap.head_dim, KV = cache.row_elements();
    for (const batch::entry& e : b.entries())
        cache.store(be, il, e.seq, e.pos0, e.n, k + e.row0 * KV, v + e.row0 * KV);
    const bool convert = cache.type_k() != ggml_type::F32 || cache.type_v() != ggml_type::F32;
    for (const batch::entry& e : b.entries()) {
        const int end = e.pos0 + e.n;
        const float *keys, *values;
        if (convert) {
            // Only the rows some query of the entry can see are converted.
            const int first = ap.sliding_window > 0 ? std::max(0, e.pos0 - ap.sliding_window + 1) : 0;
            if (k_tmp_.size() < size_t(end) * KV) k_tmp_.resize(size_t(end) * KV);
            if (v_tmp_.size() < size_t(end) * KV) v_tmp_.resize(size_t(end) * KV);
            keys = cache.keys(il, e.seq, first, end, k_tmp_.data());
            values = cache.values(il, e.seq, first, end, v_tmp_.data());
        } else {
            keys = cache.k(il, e.seq);
            values = cache.v(il, e.seq);
        }
        be.attention(q + e.row0 * Q, keys, values, e.n, pos + e.row0, end, ap, out + e.row0 * Q);
    }
}

}  // namespace specgen
