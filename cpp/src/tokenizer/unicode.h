// UTF-8 stepping and the code point classes the pre-tokenizers need.
//
// Invalid UTF-8 is never rejected: a byte that does not start a well-formed sequence (overlong,
// surrogate, beyond U+10FFFF, truncated, stray continuation) is one "character" of length 1 whose
// code point is reported as U+FFFD. Callers keep the original bytes, so tokenization of such input
// still round-trips exactly (SPM through <0xNN> byte tokens, BPE through its byte alphabet).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace specgen {

enum cp_flags : uint8_t {
    cp_letter = 1,      // \p{L}
    cp_number = 2,      // \p{N}
    cp_whitespace = 4,  // \s (Unicode White_Space)
    cp_mark = 8,        // \p{M}
    cp_punct = 16,      // \p{P}
};

struct cp_range {
    uint32_t first, last;
    uint8_t flags;
};
extern const cp_range cp_ranges[];  // unicode_tables.cpp (generated)
extern const size_t cp_ranges_count;

// Class flags of a code point (binary search; ASCII answered from a table).
uint8_t cp_class(uint32_t cp);

struct utf8_char {
    uint32_t cp;  // U+FFFD for an invalid byte
    uint32_t len; // bytes consumed, 1..4
};

// Decodes the character starting at s[i] (i < s.size()).
utf8_char utf8_next(std::string_view s, size_t i);

// Appends the UTF-8 encoding of cp.
void utf8_append(std::string& out, uint32_t cp);

// GPT-2's byte-level alphabet: every byte is spelled as a printable code point
// (printable Latin-1 bytes as themselves, the rest shifted to U+0100...).
uint32_t byte_to_unicode(uint8_t b);
// Inverse; returns -1 for a code point outside the alphabet.
int unicode_to_byte(uint32_t cp);

}  // namespace specgen
