// FR-Spec's frequency table (the NanoSpec baseline, docs/ALGORITHMS.md section 3): token ids sorted by
// descending corpus frequency, written by tools/build_frspec_table.py; the draft head of an frspec
// drafter covers the first N of them (a static draft_vocab).
//
// File layout (little-endian): a 16-byte header "SGFR", u32 version = 1, u32 n_vocab, u32 n_ids, then
// n_ids int32 ids, most frequent first, each distinct and in [0, n_vocab).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace specgen {

// Returns the first n ids of the table at `path`. Throws invalid_argument_error naming the file on a
// bad header, a table for another vocabulary size, fewer than n ids, or an id out of range/repeated.
std::vector<int32_t> read_frspec_table(const std::string& path, int32_t n_vocab, int32_t n);

}  // namespace specgen
