// Hand-written matchers for the byte-level BPE pre-tokenizer regexes (see pretokenize.h).
// At each position the alternatives are tried in the regex's order and the first that matches
// wins, as in a backtracking regex engine; each alternative's greedy/backtracking outcome is
// computed directly from the class of the characters around it.
#include "tokenizer/pretokenize.h"

#include "tokenizer/unicode.h"

namespace specgen {

namespace {

struct cps {
    std::vector<uint32_t> cp;
    std::vector<uint8_t> cls;
    std::vector<size_t> off;  // byte offset of each character; off[n] == text size
    size_t n = 0;

    bool letter(size_t i) const { return i < n && (cls[i] & cp_letter); }
    bool number(size_t i) const { return i < n && (cls[i] & cp_number); }
    bool space(size_t i) const { return i < n && (cls[i] & cp_whitespace); }
    // [^\s\p{L}\p{N}]
    bool other(size_t i) const { return i < n && !(cls[i] & (cp_letter | cp_number | cp_whitespace)); }
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

size_t next_llama3(const cps& t, size_t i, bool qwen2) {
    if (size_t len = match_contraction(t, i, true)) return i + len;
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (!t.crlf(i) && !t.letter(i) && !t.number(i) && t.letter(i + 1)) return run_end(t, i + 1, &cps::letter);
    if (t.letter(i)) return run_end(t, i, &cps::letter);
    // \p{N}{1,3} (llama3) | \p{N} (qwen2)
    if (t.number(i)) {
        size_t j = i + 1;
        for (size_t lim = qwen2 ? i + 1 : i + 3; j < lim && t.number(j);) ++j;
        return j;
    }
    //  ?[^\s\p{L}\p{N}]+[\r\n]*
    size_t j = (t.is(i, ' ') && t.other(i + 1)) ? i + 1 : i;
    if (t.other(j)) return run_end(t, run_end(t, j, &cps::other), &cps::crlf);
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
    t.n = t.cp.size();
    t.off.push_back(text.size());

    for (size_t i = 0; i < t.n;) {
        size_t j = kind == pretokenizer_kind::gpt2 ? next_gpt2(t, i)
                                                   : next_llama3(t, i, kind == pretokenizer_kind::qwen2);
        words.emplace_back(t.off[i], t.off[j]);
        i = j;
    }
}

}  // namespace specgen
