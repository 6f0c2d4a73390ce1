#include "engine/text_stream.h"

#include <algorithm>

namespace specgen {

namespace {
// Length of a UTF-8 sequence from its lead byte; 0 for a continuation or invalid lead byte.
int utf8_length(unsigned char c) {
    if (c < 0x80) return 1;
    if ((c & 0xE0) == 0xC0) return c >= 0xC2 ? 2 : 0;
    if ((c & 0xF0) == 0xE0) return 3;
    if ((c & 0xF8) == 0xF0) return c <= 0xF4 ? 4 : 0;
    return 0;
}
const char kReplacement[] = "\xEF\xBF\xBD";
}  // namespace

size_t utf8_incomplete_tail(const std::string& s) {
    // Look back at most 3 bytes for a lead byte whose sequence runs past the end.
    const size_t n = s.size();
    for (size_t back = 1; back <= 3 && back <= n; ++back) {
        const unsigned char c = static_cast<unsigned char>(s[n - back]);
        if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking
        const int len = utf8_length(c);
        return (len > int(back)) ? back : 0;
    }
    return 0;
}

std::string utf8_sanitize(const std::string& s) {
    std::string out;
    out.reserve(s.size());
    size_t i = 0;
    while (i < s.size()) {
        const unsigned char c = static_cast<unsigned char>(s[i]);
        int len = utf8_length(c);
        bool ok = len > 0 && i + len <= s.size();
        for (int k = 1; ok && k < len; ++k) ok = (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
        if (ok && len >= 3) {
            // Reject overlong forms, surrogates and code points above U+10FFFF.
            const unsigned char c1 = static_cast<unsigned char>(s[i + 1]);
            if (len == 3) ok = !(c == 0xE0 && c1 < 0xA0) && !(c == 0xED && c1 >= 0xA0);
            else ok = !(c == 0xF0 && c1 < 0x90) && !(c == 0xF4 && c1 >= 0x90);
        }
        if (ok) {
            out.append(s, i, len);
            i += len;
        } else {
            out += kReplacement;
            i += 1;
        }
    }
    return out;
}

text_stream::text_stream(std::vector<std::string> stop) : stop_(std::move(stop)) {
    stop_.erase(std::remove(stop_.begin(), stop_.end(), std::string()), stop_.end());
}

std::string text_stream::push(const std::string& bytes) {
    if (stopped_) return {};
    pending_ += bytes;
    // A complete stop string ends the text right before it.
    size_t cut = std::string::npos;
    for (const auto& s : stop_) cut = std::min(cut, pending_.find(s));
    if (cut != std::string::npos) {
        std::string out = utf8_sanitize(pending_.substr(0, cut));
        pending_.clear();
        stopped_ = true;
        emitted_ += out;
        return out;
    }
    // Hold back a tail that could still grow into a stop string or a UTF-8 character.
    size_t hold = utf8_incomplete_tail(pending_);
    for (const auto& s : stop_) {
        for (size_t k = std::min(s.size() - 1, pending_.size()); k > hold; --k) {
            if (pending_.compare(pending_.size() - k, k, s, 0, k) == 0) {
                hold = k;
                break;
            }
        }
    }
    std::string out = utf8_sanitize(pending_.substr(0, pending_.size() - hold));
    pending_.erase(0, pending_.size() - hold);
    emitted_ += out;
    return out;
}

std::string text_stream::finish() {
    if (stopped_) return {};
    std::string out = utf8_sanitize(pending_);
    pending_.clear();
    emitted_ += out;
    return out;
}

}  // namespace specgen
