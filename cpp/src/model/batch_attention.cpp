#include "model/batch_attention.h"


namespace specgen {

void batch_attention::run(backend& be, kv_cache& cache, const batch& b, int il, const attention_params& ap,
                          const float* q, const float* k, const float* v, const int32_t* pos, float* out) {
    const int64_t KV = cache.row_elements();
    seqs_.clear();
    for (const batch::entry& e : b.entries()) {
        cache.store(be, il, e.seq, e.pos0, e.n, k + e.row0 * KV, v + e.row0 * KV);
        attention_seq s;
        s.k = cache.k_data(il, e.seq);
        s.v = cache.v_data(il, e.seq);
        s.type_k = cache.type_k();
        s.type_v = cache.type_v();
        s.row_bytes_k = cache.pos_bytes_k();
        s.row_bytes_v = cache.pos_bytes_v();
        s.head_bytes_k = cache.head_bytes_k();
        s.head_bytes_v = cache.head_bytes_v();
        s.row0 = e.row0;
        s.n_rows = e.n;
        s.n_kv = e.pos0 + e.n;
        seqs_.push_back(s);
    }
    be.attention_batch(q, seqs_.data(), int(seqs_.size()), pos, ap, out);
}

}  // namespace specgen
