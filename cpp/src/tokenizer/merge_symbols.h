// The doubly linked symbol list that both merge-based tokenizers (SPM, byte-level BPE) rewrite:
// each symbol is a byte range of the text; merging a pair grows the left symbol and empties the
// right one. Each tokenizer keeps its own candidate priority (SPM: score, BPE: merge rank).
#pragma once
#include <cstdint>
#include <vector>

namespace specgen::merge {

struct symbol {
    uint32_t start, len;  // bytes of the text; len == 0: merged into its left neighbour
    int32_t prev, next;
    int32_t id;           // vocabulary id of the range, -1 when the vocabulary has none
};

// Merges sym[left] with its right neighbour into `merged`, unless the candidate is stale: it was
// queued when the pair had lengths (left_len, right_len), and lengths only grow, so any change
// means a newer candidate for this position exists. Returns whether the merge happened.
inline bool apply(std::vector<symbol>& sym, int32_t left, uint32_t left_len, uint32_t right_len, int32_t merged) {
    symbol& l = sym[left];
    if (l.len != left_len || l.next < 0) return false;
    symbol& r = sym[l.next];
    if (r.len != right_len) return false;
    l.len += r.len;
    l.id = merged;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = left;
    r.len = 0;
    return true;
}

}  // namespace specgen::merge
