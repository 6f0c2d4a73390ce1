// SentencePiece-style BPE over the vocabulary of a tokenizer.ggml.model == "llama" file.
//
// encode_spm(fragment):
//   1. normalize: ' ' -> U+2581, plus one U+2581 in front when add_space_prefix and the fragment
//      starts the input (SentencePiece's dummy prefix; Gemma files turn it off);
//   2. one symbol per UTF-8 character (an invalid byte is a symbol of its own), each looked up in
//      the vocabulary;
//   3. repeatedly merge the adjacent pair whose concatenation is a vocabulary piece with the highest
//      merge priority (a max-heap over candidate pairs, stale entries skipped when popped);
//   4. emit each symbol's id; a symbol that is not a piece falls back to its <0xNN> byte tokens
//      (unk where a byte token is missing).
//
// Merge priority is the piece's score, as in SentencePiece. Gemma files are the exception: their
// user-defined whitespace pieces carry a placeholder score of -1000, and the vocabulary order is the
// merge order, so Gemma ranks pieces by -index (for normal pieces the two orders agree; transformers
// builds its Gemma merges the same way). Ties between pairs forming pieces of equal priority go to the
// longer left piece, then the lower piece id, then the leftmost pair: this is the order of the merge
// list transformers derives from a vocabulary, so ids match the Hugging Face tokenizer exactly.
// Pairs involving a character missing from the vocabulary never merge (Hugging Face has already
// replaced it by byte tokens at that point).
#include <cstdio>
#include <queue>

#include "common/error.h"
#include "gguf/gguf_reader.h"
#include "tokenizer/merge_symbols.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace specgen {

namespace {

const std::string k_space_marker = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK

std::string replace_all(const std::string& s, const std::string& from, const std::string& to) {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
        if (s.compare(i, from.size(), from) == 0) {
            out += to;
            i += from.size();
        } else {
            out += s[i++];
        }
    }
    return out;
}

// "<0xNN>" -> NN, or -1.
int parse_byte_token(const std::string& s) {
    if (s.size() != 6 || s.compare(0, 3, "<0x") != 0 || s[5] != '>') return -1;
    int v = 0;
    for (int k = 3; k < 5; ++k) {
        char c = s[k];
        int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'A' && c <= 'F') ? c - 'A' + 10
              : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

using merge::symbol;

struct candidate {
    float priority;
    uint32_t left_len, right_len;
    int32_t merged;
    int32_t left;  // symbol index
};

// Max-heap order: a < b when b should merge first.
struct merges_later {
    bool operator()(const candidate& a, const candidate& b) const {
        if (a.priority != b.priority) return a.priority < b.priority;
        if (a.left_len != b.left_len) return a.left_len < b.left_len;
        if (a.right_len != b.right_len) return a.right_len < b.right_len;
        if (a.merged != b.merged) return a.merged > b.merged;
        return a.left > b.left;
    }
};

}  // namespace

void tokenizer::init_spm(const gguf_file& f) {
    const size_t n = text_.size();
    add_space_prefix_ = f.get_bool("tokenizer.ggml.add_space_prefix",
                                   f.get_bool("tokenizer.ggml.add_dummy_prefix", true));

    merge_priority_.assign(n, 0.0f);
    const std::string arch = f.get_string("general.architecture", "");
    if (arch.rfind("gemma", 0) == 0) {
        for (size_t i = 0; i < n; ++i) merge_priority_[i] = -static_cast<float>(i);
    } else if (f.has("tokenizer.ggml.scores")) {
        merge_priority_ = f.get_float_array("tokenizer.ggml.scores");
        if (merge_priority_.size() != n)
            throw model_load_error(f.path() + ": tokenizer.ggml.scores has " +
                                   std::to_string(merge_priority_.size()) + " entries for " +
                                   std::to_string(n) + " tokens");
    }

    // Whitespace-only pieces are stored with real spaces ("  ") while the text they must match has
    // been normalized to U+2581, so they are looked up by that spelling.
    pieces_.resize(n);
    for (size_t i = 0; i < n; ++i) {
        const std::string& t = text_[i];
        const bool all_spaces = !t.empty() && t.find_first_not_of(' ') == std::string::npos;
        pieces_[i] = all_spaces ? replace_all(t, " ", k_space_marker) : t;
    }
    piece_to_id_.reserve(n);
    for (size_t i = 0; i < n; ++i) piece_to_id_.emplace(std::string_view(pieces_[i]), static_cast<int32_t>(i));

    for (int b = 0; b < 256; ++b) byte_ids_[b] = -1;
    for (size_t i = 0; i < n; ++i) {
        int b = types_[i] == token_type::byte ? parse_byte_token(text_[i]) : -1;
        if (b >= 0 && byte_ids_[b] < 0) byte_ids_[b] = static_cast<int32_t>(i);
        if (b >= 0) bytes_[i] = std::string(1, static_cast<char>(b));
        else if (types_[i] == token_type::control) bytes_[i] = text_[i];
        else bytes_[i] = replace_all(text_[i], k_space_marker, " ");
    }
    // Byte fallback looks the byte pieces up by spelling when the file does not type them.
    for (int b = 0; b < 256; ++b) {
        if (byte_ids_[b] >= 0) continue;
        char name[7];
        snprintf(name, sizeof name, "<0x%02X>", b);
        auto it = piece_to_id_.find(std::string_view(name, 6));
        if (it != piece_to_id_.end()) byte_ids_[b] = it->second;
    }
}

void tokenizer::encode_spm(std::string_view frag, bool at_start, std::vector<int32_t>& out) const {
    std::string text;
    text.reserve(frag.size() + frag.size() / 2 + 3);
    if (add_space_prefix_ && at_start) text += k_space_marker;
    for (char c : frag) {
        if (c == ' ') text += k_space_marker;
        else text += c;
    }
    const std::string_view tv(text);

    auto lookup = [&](uint32_t start, uint32_t len) -> int32_t {
        auto it = piece_to_id_.find(tv.substr(start, len));
        return it == piece_to_id_.end() ? -1 : it->second;
    };

    std::vector<symbol> sym;
    sym.reserve(text.size());
    for (size_t i = 0; i < text.size();) {
        const uint32_t len = utf8_next(tv, i).len;
        const int32_t idx = static_cast<int32_t>(sym.size());
        sym.push_back({static_cast<uint32_t>(i), len, idx - 1, idx + 1, -1});
        sym.back().id = lookup(static_cast<uint32_t>(i), len);
        i += len;
    }
    if (sym.empty()) return;
    sym.back().next = -1;

    std::vector<candidate> storage;
    storage.reserve(sym.size());
    std::priority_queue<candidate, std::vector<candidate>, merges_later> heap(merges_later{}, std::move(storage));
    auto try_pair = [&](int32_t left) {
        if (left < 0) return;
        const int32_t right = sym[left].next;
        if (right < 0 || sym[left].id < 0 || sym[right].id < 0) return;
        const int32_t merged = lookup(sym[left].start, sym[left].len + sym[right].len);
        if (merged < 0) return;
        heap.push({merge_priority_[merged], sym[left].len, sym[right].len, merged, left});
    };
    for (int32_t i = 0; i + 1 < static_cast<int32_t>(sym.size()); ++i) try_pair(i);

    while (!heap.empty()) {
        const candidate c = heap.top();
        heap.pop();
        if (!merge::apply(sym, c.left, c.left_len, c.right_len, c.merged)) continue;
        try_pair(sym[c.left].prev);
        try_pair(c.left);
    }

    for (int32_t i = 0; i >= 0; i = sym[i].next) {
        const symbol& s = sym[i];
        if (s.id >= 0) {
            out.push_back(s.id);
            continue;
        }
        for (uint32_t k = 0; k < s.len; ++k) {
            const int32_t b = byte_ids_[static_cast<unsigned char>(text[s.start + k])];
            if (b >= 0) out.push_back(b);
            else if (unk_ >= 0) out.push_back(unk_);  // no byte token: the byte is lost (documented)
        }
    }
}

}  // namespace specgen
