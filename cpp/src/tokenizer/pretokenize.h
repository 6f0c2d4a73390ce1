// Byte-level BPE pre-tokenization: splits text into the words the merges apply within, exactly as
// the regex of each pretokenizer_kind would (leftmost alternative first, greedy, with the
// backtracking of \s+(?!\S)), written by hand because std::regex has no \p{L} / \p{N}.
#pragma once
#include <cstddef>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace specgen {

// Appends [begin, end) byte offsets of each word of `text` to `words`; the words tile the text.
void pretokenize(pretokenizer_kind kind, std::string_view text,
                 std::vector<std::pair<size_t, size_t>>& words);

}  // namespace specgen
