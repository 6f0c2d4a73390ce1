// A slot: one sequence of the generator's KV cache (kv_cache sequence `index`) with the speculator
// that runs in it. A request's sequence owns a slot from admission to its end (engine/scheduler.h);
// the slot then keeps the tokens whose rows it holds, so the next request that starts with them reuses
// those rows instead of prefilling them (prefix reuse, as llama.cpp's cache_prompt), and whatever its
// speculator keeps of them (prefix_state, opaque here).
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "speculative/speculator.h"

namespace specgen {

class sequence;

struct slot {
    int index = 0;
    // What the speculator keeps of the cached rows between requests (null: nothing): before `spec`,
    // which writes it until its end.
    std::unique_ptr<prefix_state> prefix;
    std::unique_ptr<speculator> spec;  // this slot's own speculator (null: plain decoding)
    // Tokens whose KV rows (every layer) rows 0..cached.size()-1 of the slot hold.
    std::vector<int32_t> cached;
    sequence* owner = nullptr;         // the request running in it, or null (free)
    int64_t last_used = 0;             // when its last request ended (free slots: least recently used first)

    // Of the first n cached rows (copied: another slot's rows copied in), how many a request admitted
    // with n_sequences - 1 others may reuse.
    int reusable_rows(int n, bool copied, int n_sequences) const {
        return prefix ? prefix->reusable_rows(n, copied, n_sequences) : n;
    }
};

// Longest common prefix of a and b, at most `limit` entries.
inline int common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b, int limit) {
    int n = 0;
    const int lim = std::min<int>(limit, int(std::min(a.size(), b.size())));
    while (n < lim && a[n] == b[n]) ++n;
    return n;
}

}  // namespace specgen
