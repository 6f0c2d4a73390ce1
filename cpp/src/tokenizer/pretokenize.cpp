// Hand-written matchers for the byte-level BPE pre-tokenizer regexes (see pretokenize.h).
// At each position the alternatives are tried in the regex's order and the first that matches
// wins, as in a backtracking regex engine; each alternative's greedy/backtracking outcome is
// computed directly from the class of the characters around it.
//
// Pre-tokenizers made of several regexes (deepseek, starcoder) apply them one after the other, each
// to every piece the previous one left, keeping both the matches and the text between them as pieces
// (Hugging Face's Split with behavior "isolated"; llama.cpp's regex list). A regex sees only its
// piece: the piece's end is the end of its text.
#include "tokenizer/pretokenize.h"

#include <algorithm>
#include <iterator>

#include "tokenizer/unicode.h"

namespace specgen {

namespace {

struct cps {
    std::vector<uint32_t> cp;
    std::vector<uint8_t> cls;
    std::vector<size_t> off;  // byte offset of each character; off[n_all] == text size
    size_t n = 0;             // end of the text the current regex sees (a piece's end in a sequence)
    size_t n_all = 0;

    bool letter(size_t i) const { return i < n && (cls[i] & cp_letter); }
    bool number(size_t i) const { return i < n && (cls[i] & cp_number); }
    bool space(size_t i) const { return i < n && (cls[i] & cp_whitespace); }
    bool punct(size_t i) const { return i < n && (cls[i] & cp_punct); }
    // [\p{L}\p{M}]: a letter with its combining marks (qwen35)
    bool letter_or_mark(size_t i) const { return i < n && (cls[i] & (cp_letter | cp_mark)); }
    // [^\s\p{L}\p{N}]
    bool other(size_t i) const { return i < n && !(cls[i] & (cp_letter | cp_number | cp_whitespace)); }
    // [^\s\p{L}\p{M}\p{N}]
    bool other_no_mark(size_t i) const {
        return i < n && !(cls[i] & (cp_letter | cp_mark | cp_number | cp_whitespace));
    }
    bool crlf(size_t i) const { return i < n && (cp[i] == '\r' || cp[i] == '\n'); }
    bool is(size_t i, uint32_t c) const { return i < n && cp[i] == c; }
};

uint32_t ascii_lower(uint32_t c) {
    if (c >= 'A' && c <= 'Z') return c + 32;
    if (c == 0x17F) return 's';  // LATIN SMALL LETTER LONG S case-folds to 's'
    return c;
}

// 's|'t|'re|'ve|'m|'ll|'d (case-insensitive when ci): length in characters, or 0.
size_t match_contraction(const cps& t, size_t i, bool ci) {
    if (!t.is(i, '\'') || i + 1 >= t.n) return 0;
    auto low = [&](size_t k) { return ci ? ascii_lower(t.cp[k]) : t.cp[k]; };
    uint32_t a = low(i + 1);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if (i + 2 >= t.n) return 0;
    uint32_t b = low(i + 2);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
}

size_t run_end(const cps& t, size_t j, bool (cps::*pred)(size_t) const) {
    while ((t.*pred)(j)) ++j;
    return j;
}

// \s*[\r\n]+ | \s+(?!\S) | \s+ starting at whitespace i: end of the match.
size_t match_spaces(const cps& t, size_t i, bool with_newline_alt) {
    const size_t j = run_end(t, i, &cps::space);
    if (with_newline_alt) {
        // \s* backtracks to the last newline in the run, then [\r\n]+ takes just that one.
        for (size_t k = j; k > i; --k)
            if (t.crlf(k - 1)) return k;
    }
    if (j == t.n || j - 1 > i) return j == t.n ? j : j - 1;  // \s+(?!\S): leave one space for the next word
    return j;                                               // \s+
}

enum class llama3_variant { llama3, qwen2, qwen35 };

size_t next_llama3(const cps& t, size_t i, llama3_variant v) {
    if (size_t len = match_contraction(t, i, true)) return i + len;
    // [^\r\n\p{L}\p{N}]?\p{L}+   (qwen35: [^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+)
    auto word = v == llama3_variant::qwen35 ? &cps::letter_or_mark : &cps::letter;
    if (!t.crlf(i) && !t.letter(i) && !t.number(i) && (t.*word)(i + 1)) return run_end(t, i + 1, word);
    if ((t.*word)(i)) return run_end(t, i, word);
    // \p{N}{1,3} (llama3) | \p{N} (qwen2, qwen35)
    if (t.number(i)) {
        size_t j = i + 1;
        for (size_t lim = v == llama3_variant::llama3 ? i + 3 : i + 1; j < lim && t.number(j);) ++j;
        return j;
    }
    //  ?[^\s\p{L}\p{N}]+[\r\n]*   (qwen35: [^\s\p{L}\p{M}\p{N}])
    auto other = v == llama3_variant::qwen35 ? &cps::other_no_mark : &cps::other;
    size_t j = (t.is(i, ' ') && (t.*other)(i + 1)) ? i + 1 : i;
    if ((t.*other)(j)) return run_end(t, run_end(t, j, other), &cps::crlf);
    if (t.space(i)) return match_spaces(t, i, true);
    return i + 1;  // unreachable: every character is a letter, number, space or other
}

size_t next_gpt2(const cps& t, size_t i) {
    if (size_t len = match_contraction(t, i, false)) return i + len;
    const size_t j = t.is(i, ' ') ? i + 1 : i;
    //  ?\p{L}+ |  ?\p{N}+ |  ?[^\s\p{L}\p{N}]+
    if (t.letter(j)) return run_end(t, j, &cps::letter);
    if (t.number(j)) return run_end(t, j, &cps::number);
    if (t.other(j)) return run_end(t, j, &cps::other);
    if (t.space(i)) return match_spaces(t, i, false);
    return i + 1;
}

// --- The steps of regex sequences. Each returns the end of a match starting at i, or i. ---

bool in_ranges(const cp_range* r, size_t n, uint32_t c) {
    const cp_range* it = std::lower_bound(r, r + n, c, [](const cp_range& a, uint32_t v) { return a.last < v; });
    return it != r + n && it->first <= c;
}

// deepseek-llm's letter class: the cased letters of the Unicode version its tokenizer was made with,
// written as explicit ranges in its regex (so later Unicode additions are not letters here).
constexpr cp_range kDeepseekLetters[] = {
    {0x41, 0x5A, 0}, {0x61, 0x7A, 0}, {0xB5, 0xB5, 0}, {0xC0, 0xD6, 0}, {0xD8, 0xF6, 0}, {0xF8, 0x1BA, 0},
    {0x1BC, 0x1BF, 0}, {0x1C4, 0x293, 0}, {0x295, 0x2AF, 0}, {0x370, 0x373, 0}, {0x376, 0x377, 0}, {0x37B, 0x37D, 0},
    {0x37F, 0x37F, 0}, {0x386, 0x386, 0}, {0x388, 0x38A, 0}, {0x38C, 0x38C, 0}, {0x38E, 0x3A1, 0}, {0x3A3, 0x3F5, 0},
    {0x3F7, 0x481, 0}, {0x48A, 0x52F, 0}, {0x531, 0x556, 0}, {0x10A0, 0x10C5, 0}, {0x13A0, 0x13F5, 0},
    {0x13F8, 0x13FD, 0}, {0x1C90, 0x1CBA, 0}, {0x1CBD, 0x1CBF, 0}, {0x1D00, 0x1D2B, 0}, {0x1D6B, 0x1D77, 0},
    {0x1D79, 0x1D9A, 0}, {0x1E00, 0x1F15, 0}, {0x1F18, 0x1F1D, 0}, {0x1F20, 0x1F45, 0}, {0x1F48, 0x1F4D, 0},
    {0x1F50, 0x1F57, 0}, {0x1F59, 0x1F59, 0}, {0x1F5B, 0x1F5B, 0}, {0x1F5D, 0x1F5D, 0}, {0x1F5F, 0x1F7D, 0},
    {0x1F80, 0x1FB4, 0}, {0x1FB6, 0x1FBC, 0}, {0x1FBE, 0x1FBE, 0}, {0x1FC2, 0x1FC4, 0}, {0x1FC6, 0x1FCC, 0},
    {0x1FD0, 0x1FD3, 0}, {0x1FD6, 0x1FDB, 0}, {0x1FE0, 0x1FEC, 0}, {0x1FF2, 0x1FF4, 0}, {0x1FF6, 0x1FFC, 0},
    {0x2102, 0x2102, 0}, {0x2107, 0x2107, 0}, {0x210A, 0x2113, 0}, {0x2115, 0x2115, 0}, {0x2119, 0x211D, 0},
    {0x2124, 0x2124, 0}, {0x2126, 0x2126, 0}, {0x2128, 0x2128, 0}, {0x212A, 0x212D, 0}, {0x212F, 0x2134, 0},
    {0x2139, 0x2139, 0}, {0x213C, 0x213F, 0}, {0x2145, 0x2149, 0}, {0x214E, 0x214E, 0}, {0x2183, 0x2184, 0},
    {0x2C00, 0x2C7B, 0}, {0x2C7E, 0x2CE4, 0}, {0x2CEB, 0x2CEE, 0}, {0x2CF2, 0x2CF3, 0}, {0xA640, 0xA66D, 0},
    {0xA680, 0xA69B, 0}, {0xA722, 0xA76F, 0}, {0xA771, 0xA787, 0}, {0xA78B, 0xA78E, 0}, {0xAB70, 0xABBF, 0},
    {0xFB00, 0xFB06, 0}, {0xFB13, 0xFB17, 0}, {0xFF21, 0xFF3A, 0}, {0xFF41, 0xFF5A, 0}, {0x10400, 0x1044F, 0},
    {0x104B0, 0x104D3, 0}, {0x104D8, 0x104FB, 0}, {0x10C80, 0x10CB2, 0}, {0x10CC0, 0x10CF2, 0},
    {0x118A0, 0x118DF, 0}, {0x1E900, 0x1E943, 0},
};
// [!-/:-~！-／：-～‘-‟　-。]
constexpr cp_range kDeepseekPunct[] = {
    {0x21, 0x2F, 0}, {0x3A, 0x7E, 0}, {0x2018, 0x201F, 0}, {0x3000, 0x3002, 0}, {0xFF01, 0xFF0F, 0}, {0xFF1A, 0xFF5E, 0},
};
// [一-龥ࠀ-一가-퟿]: CJK ideographs, everything from U+0800 up to them, Hangul
constexpr cp_range kDeepseekCjk[] = {{0x800, 0x9FA5, 0}, {0xAC00, 0xD7FF, 0}};

template <size_t N>
bool in(const cp_range (&r)[N], const cps& t, size_t i) { return i < t.n && in_ranges(r, N, t.cp[i]); }

// \s?X+ for a class X
template <class Pred>
size_t space_then_run(const cps& t, size_t i, Pred x) {
    size_t j = (t.space(i) && x(i + 1)) ? i + 1 : i;
    if (!x(j)) return i;
    while (x(j)) ++j;
    return j;
}

template <class Pred>
size_t run(const cps& t, size_t i, Pred x) {
    size_t j = i;
    while (j < t.n && x(j)) ++j;
    return j;
}

using piece_list = std::vector<std::pair<size_t, size_t>>;  // character ranges

// One regex of a sequence over every piece; `match(t, i)` gives the end of the match at i (i: none).
template <class Match>
void split_isolated(cps& t, piece_list& pieces, piece_list& scratch, Match match) {
    scratch.clear();
    for (const auto& [b, e] : pieces) {
        t.n = e;
        size_t gap = b;
        for (size_t i = b; i < e;) {
            const size_t j = match(t, i);
            if (j <= i) { ++i; continue; }
            if (gap < i) scratch.emplace_back(gap, i);
            scratch.emplace_back(i, j);
            i = gap = j;
        }
        if (gap < e) scratch.emplace_back(gap, e);
    }
    t.n = t.n_all;
    pieces.swap(scratch);
}

// \s+$ : the whitespace that ends a piece.
void split_trailing_space(cps& t, piece_list& pieces, piece_list& scratch) {
    scratch.clear();
    for (const auto& [b, e] : pieces) {
        t.n = e;
        size_t k = e;
        while (k > b && t.space(k - 1)) --k;
        if (k > b && k < e) scratch.emplace_back(b, k);
        scratch.emplace_back(k == e ? b : k, e);
    }
    t.n = t.n_all;
    pieces.swap(scratch);
}

void sequence(pretokenizer_kind kind, cps& t, piece_list& pieces) {
    piece_list scratch;
    auto crlf = [](const cps& c, size_t i) { return c.crlf(i) ? i + 1 : i; };
    auto cjk = [](const cps& c, size_t i) { return run(c, i, [&](size_t k) { return in(kDeepseekCjk, c, k); }); };
    switch (kind) {
        case pretokenizer_kind::deepseek_llm:
            // [\r\n] | \s?[letters]+ | \s?[punct]+ | \s+$ | [cjk]+ | \p{N}+
            split_isolated(t, pieces, scratch, crlf);
            split_isolated(t, pieces, scratch, [](const cps& c, size_t i) {
                return space_then_run(c, i, [&](size_t k) { return in(kDeepseekLetters, c, k); });
            });
            split_isolated(t, pieces, scratch, [](const cps& c, size_t i) {
                return space_then_run(c, i, [&](size_t k) { return in(kDeepseekPunct, c, k); });
            });
            split_trailing_space(t, pieces, scratch);
            split_isolated(t, pieces, scratch, cjk);
            split_isolated(t, pieces, scratch, [](const cps& c, size_t i) {
                return run(c, i, [&](size_t k) { return c.number(k); });
            });
            break;
        case pretokenizer_kind::deepseek_coder:
            // [\r\n] | \s?\p{L}+ | \s?\p{P}+ | [cjk]+ | \p{N}
            split_isolated(t, pieces, scratch, crlf);
            split_isolated(t, pieces, scratch, [](const cps& c, size_t i) {
                return space_then_run(c, i, [&](size_t k) { return c.letter(k); });
            });
            split_isolated(t, pieces, scratch, [](const cps& c, size_t i) {
                return space_then_run(c, i, [&](size_t k) { return c.punct(k); });
            });
            split_isolated(t, pieces, scratch, cjk);
            split_isolated(t, pieces, scratch, [](const cps& c, size_t i) { return c.number(i) ? i + 1 : i; });
            break;
        case pretokenizer_kind::starcoder:
            // \p{N} | then GPT-2's regex within each piece (its final \s+ changes nothing: what it would
            // match is left between matches, a piece of its own either way)
            split_isolated(t, pieces, scratch, [](const cps& c, size_t i) { return c.number(i) ? i + 1 : i; });
            split_isolated(t, pieces, scratch, [](const cps& c, size_t i) { return next_gpt2(c, i); });
            break;
        default:
            break;
    }
}

}  // namespace

void pretokenize(pretokenizer_kind kind, std::string_view text,
                 std::vector<std::pair<size_t, size_t>>& words) {
    cps t;
    t.cp.reserve(text.size());
    t.cls.reserve(text.size());
    t.off.reserve(text.size() + 1);
    for (size_t i = 0; i < text.size();) {
        utf8_char c = utf8_next(text, i);
        t.cp.push_back(c.cp);
        t.cls.push_back(cp_class(c.cp));
        t.off.push_back(i);
        i += c.len;
    }
    t.n = t.n_all = t.cp.size();
    t.off.push_back(text.size());

    switch (kind) {
        case pretokenizer_kind::gpt2:
        case pretokenizer_kind::llama3:
        case pretokenizer_kind::qwen2:
        case pretokenizer_kind::qwen35: {
            const llama3_variant v = kind == pretokenizer_kind::qwen2    ? llama3_variant::qwen2
                                     : kind == pretokenizer_kind::qwen35 ? llama3_variant::qwen35
                                                                         : llama3_variant::llama3;
            for (size_t i = 0; i < t.n;) {
                size_t j = kind == pretokenizer_kind::gpt2 ? next_gpt2(t, i) : next_llama3(t, i, v);
                words.emplace_back(t.off[i], t.off[j]);
                i = j;
            }
            return;
        }
        default: {
            piece_list pieces;
            if (t.n > 0) pieces.emplace_back(0, t.n);
            sequence(kind, t, pieces);
            for (const auto& [b, e] : pieces) words.emplace_back(t.off[b], t.off[e]);
            return;
        }
    }
}

}  // namespace specgen
