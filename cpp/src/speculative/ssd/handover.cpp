#include "speculative/ssd/handover.h"

#include <algorithm>

#include "model/model.h"

namespace specgen {

void snapshot_kv(const kv_cache& cache, int n_embd, int pos0, handover_rows& rows) {
    const int n_rows = int(rows.hidden.size() / size_t(n_embd));
    rows.pos0 = pos0;
    rows.kv.resize(2 * size_t(cache.n_layer()) * size_t(n_rows) * cache.row_floats());
    cache.read_rows(pos0, n_rows, rows.kv.data());
}

void hand_over(const handover_rows& rows, int n_embd, kv_cache& target_cache, proposal& out) {
    const int n_rows = int(rows.hidden.size() / size_t(n_embd));
    target_cache.write_rows(rows.pos0, n_rows, rows.kv.data());
    const int n = std::min(n_rows, int(out.tokens.size()) + 1);
    out.hidden.assign(rows.hidden.begin(), rows.hidden.begin() + size_t(n) * n_embd);
    out.n_forwarded = n;
}

}  // namespace specgen
