// The attention step of evaluator::forward_batch for one layer: every entry's new keys and values go
// into its own sequence's slot of the KV cache, then each entry's queries attend over that sequence's
// rows only (causal, sliding window for local layers), so a sequence's result does not depend on the
// other sequences in the batch.
#pragma once
#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "model/batch.h"
#include "model/kv_cache.h"

namespace specgen {

class batch_attention {
public:
    // q: [R, n_head, head_dim]; k, v: [R, n_head_kv, head_dim] (roped keys), R = b.n_rows(), backend
    // memory; pos: host [R], the rows' positions; out: like q.
    void run(backend& be, kv_cache& cache, const batch& b, int il, const attention_params& ap, const float* q,
             const float* k, const float* v, const int32_t* pos, float* out);

private:
    std::vector<attention_seq> seqs_;  // the batch's sequences for backend::attention_batch
};

}  // namespace specgen
