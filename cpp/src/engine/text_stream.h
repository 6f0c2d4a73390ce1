// Incremental detokenization for streaming: turns generated token bytes into text pieces that are
// always whole UTF-8 characters, and finds stop strings even when they span several tokens.
//
// Text is held back while it could still be the start of a stop string or of an unfinished UTF-8
// character, so a stream never shows text that the final result drops.
#pragma once
#include <string>
#include <vector>

namespace specgen {

class text_stream {
public:
    explicit text_stream(std::vector<std::string> stop = {});

    // Appends the bytes of one token. Returns the text now safe to emit (possibly empty).
    // After a stop string is found, stopped() is true and later pushes emit nothing.
    std::string push(const std::string& bytes);
    // End of generation: returns what was held back (incomplete UTF-8 becomes U+FFFD).
    std::string finish();

    bool stopped() const { return stopped_; }
    // All text emitted so far (stop string excluded).
    const std::string& text() const { return emitted_; }

private:
    std::vector<std::string> stop_;
    std::string pending_;  // received but not yet emitted
    std::string emitted_;
    bool stopped_ = false;
};

// Number of bytes at the end of s that form an incomplete (but so far valid) UTF-8 sequence.
size_t utf8_incomplete_tail(const std::string& s);
// Replaces invalid UTF-8 sequences in s by U+FFFD.
std::string utf8_sanitize(const std::string& s);

}  // namespace specgen
