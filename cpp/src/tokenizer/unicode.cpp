#include "tokenizer/unicode.h"

#include <array>

namespace specgen {

namespace {

std::array<uint8_t, 128> make_ascii_classes() {
    std::array<uint8_t, 128> t{};
    for (uint32_t c = 0; c < 128; ++c) {
        uint8_t f = 0;
        for (size_t i = 0; i < cp_ranges_count && cp_ranges[i].first <= c; ++i)
            if (c <= cp_ranges[i].last) f = cp_ranges[i].flags;
        t[c] = f;
    }
    return t;
}

struct byte_alphabet {
    uint32_t to_cp[256];
    int16_t from_cp[324];  // the alphabet lies within U+0000..U+0143
    byte_alphabet() {
        for (auto& v : from_cp) v = -1;
        uint32_t next = 256;
        for (uint32_t b = 0; b < 256; ++b) {
            bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
            to_cp[b] = printable ? b : next++;
            from_cp[to_cp[b]] = static_cast<int16_t>(b);
        }
    }
};

const byte_alphabet& alphabet() {
    static const byte_alphabet a;
    return a;
}

}  // namespace

uint8_t cp_class(uint32_t cp) {
    static const std::array<uint8_t, 128> ascii = make_ascii_classes();
    if (cp < 128) return ascii[cp];
    size_t lo = 0, hi = cp_ranges_count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp_ranges[mid].last < cp) lo = mid + 1;
        else hi = mid;
    }
    return (lo < cp_ranges_count && cp_ranges[lo].first <= cp) ? cp_ranges[lo].flags : 0;
}

utf8_char utf8_next(std::string_view s, size_t i) {
    const auto* p = reinterpret_cast<const unsigned char*>(s.data()) + i;
    const size_t left = s.size() - i;
    const unsigned char c = p[0];
    if (c < 0x80) return {c, 1};
    uint32_t len, cp, min;
    if ((c & 0xE0) == 0xC0) { len = 2; cp = c & 0x1F; min = 0x80; }
    else if ((c & 0xF0) == 0xE0) { len = 3; cp = c & 0x0F; min = 0x800; }
    else if ((c & 0xF8) == 0xF0) { len = 4; cp = c & 0x07; min = 0x10000; }
    else return {0xFFFD, 1};
    if (left < len) return {0xFFFD, 1};
    for (uint32_t k = 1; k < len; ++k) {
        if ((p[k] & 0xC0) != 0x80) return {0xFFFD, 1};
        cp = (cp << 6) | (p[k] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return {0xFFFD, 1};
    return {cp, len};
}

void utf8_append(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

uint32_t byte_to_unicode(uint8_t b) { return alphabet().to_cp[b]; }

int unicode_to_byte(uint32_t cp) {
    return cp < 324 ? alphabet().from_cp[cp] : -1;
}

}  // namespace specgen
