// SSD's hand-over (docs/ALGORITHMS.md section 4; speculative/ssd/ssd.h): an all-layers self drafter
// runs the target's own layers on the target's weights with batch- and thread-invariant kernels, so
// the hidden states and KV rows it computes for [bonus, x'_1..x'_g] are exactly the target's. A
// draft keeps them (snapshot, taken right after the draft, before another branch overwrites its
// cache rows in place); the round that uses the draft writes the KV rows into the target's cache
// and hands the hidden states to the engine as rows already forwarded.
#pragma once
#include <vector>

#include "speculative/proposal.h"

namespace specgen {

class kv_cache;

struct handover_rows {
    int pos0 = -1;              // position of the first row (the bonus / pending token)
    std::vector<float> hidden;  // [n_rows, n_embd] output-normed hidden states
    std::vector<float> kv;      // the drafter cache's KV rows pos0..pos0+n_rows-1 (kv_cache::read_rows' layout)
    void clear() {
        pos0 = -1;
        hidden.clear();
        kv.clear();
    }
};

// Copies the KV rows of the rows whose hidden states `rows.hidden` holds, from pos0, out of `cache`.
void snapshot_kv(const kv_cache& cache, int n_embd, int pos0, handover_rows& rows);
// Writes rows' KV into the target's cache and gives `out` the hidden states of the rows of
// [pending, x_1..x_g] the target would compute (at most g + 1; more when max_n cut the draft).
void hand_over(const handover_rows& rows, int n_embd, kv_cache& target_cache, proposal& out);

}  // namespace specgen
