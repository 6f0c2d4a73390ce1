// A slot: one sequence of the generator's KV cache (kv_cache sequence `index`) with the speculator
// that runs in it. A request owns a slot from admission to its end (engine/scheduler.h); the slot
// then keeps the tokens whose rows it holds, so the next request that starts with them reuses those
// rows instead of prefilling them (prefix reuse, as llama.cpp's cache_prompt).
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "speculative/speculator.h"

namespace specgen {

class generation;

struct slot {
    int index = 0;
    std::unique_ptr<speculator> spec;  // this sequence's own speculator (null: plain decoding)
    // Tokens whose KV rows (every layer) rows 0..cached.size()-1 of the slot hold, and, when the
    // speculator wants the prompt's top-k (NanoSpec), their top-k ids [cached_topk rows, k].
    std::vector<int32_t> cached;
    std::vector<int32_t> cached_topk;
    // The rows after those (cached_seed_rows of them) whose top-k the last request never ran (an
    // optional top-k its speculator never asked for): their hidden states [rows, n_embd], so the next
    // request with this prefix can still seed S from them.
    std::vector<float> cached_seed_hidden;
    int cached_seed_rows = 0;
    generation* owner = nullptr;       // the request running in it, or null (free)
    int64_t last_used = 0;             // when its last request ended (free slots: least recently used first)
};

// Longest common prefix of a and b, at most `limit` entries.
inline int common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b, int limit) {
    int n = 0;
    const int lim = std::min<int>(limit, int(std::min(a.size(), b.size())));
    while (n < lim && a[n] == b[n]) ++n;
    return n;
}

}  // namespace specgen
