// Byte-level BPE over the vocabulary of a tokenizer.ggml.model == "gpt2" file (Llama 3, Qwen2).
//
// encode_bpe(fragment):
//   1. split the fragment into words with the pre-tokenizer tokenizer.ggml.pre names (pretokenize.cpp);
//   2. one symbol per byte of a word: the token spelling that byte in GPT-2's byte alphabet;
//   3. repeatedly apply the lowest-ranked merge of tokenizer.ggml.merges among adjacent pairs,
//      leftmost first on ties (a min-heap over candidate pairs, stale entries skipped when popped);
//   4. emit the symbols' ids.
// Merges never cross word boundaries. This is GPT-2 BPE as Hugging Face tokenizers runs it; with
// the llama3 pre-tokenizer also its ignore_merges (a word that is a token is emitted whole), as
// Llama 3's tokenizer.json sets and llama.cpp does for that pre-tokenizer.
#include <algorithm>

#include "common/error.h"
#include "gguf/gguf_reader.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/merge_symbols.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace specgen {

namespace {

pretokenizer_kind pretokenizer_for(const std::string& pre, const std::string& path) {
    // Names llama.cpp's converter writes for vocabularies that share each regex.
    struct entry { const char* name; pretokenizer_kind kind; };
    static const entry known[] = {
        {"llama-bpe", pretokenizer_kind::llama3}, {"llama3", pretokenizer_kind::llama3},
        {"llama-v3", pretokenizer_kind::llama3}, {"smaug-bpe", pretokenizer_kind::llama3},
        {"dbrx", pretokenizer_kind::llama3}, {"falcon3", pretokenizer_kind::llama3}, {"pixtral", pretokenizer_kind::llama3},
        {"qwen2", pretokenizer_kind::qwen2}, {"deepseek-r1-qwen", pretokenizer_kind::qwen2},
        {"qwen35", pretokenizer_kind::qwen35},
        {"deepseek-llm", pretokenizer_kind::deepseek_llm}, {"deepseek-coder", pretokenizer_kind::deepseek_coder},
        {"starcoder", pretokenizer_kind::starcoder}, {"refact", pretokenizer_kind::starcoder},
        {"command-r", pretokenizer_kind::starcoder}, {"smollm", pretokenizer_kind::starcoder},
        {"codeshell", pretokenizer_kind::starcoder}, {"exaone", pretokenizer_kind::starcoder},
        {"default", pretokenizer_kind::gpt2}, {"gpt2", pretokenizer_kind::gpt2}, {"gpt-2", pretokenizer_kind::gpt2},
        {"mpt", pretokenizer_kind::gpt2}, {"olmo", pretokenizer_kind::gpt2}, {"jais", pretokenizer_kind::gpt2},
    };
    for (const entry& e : known)
        if (pre == e.name) return e.kind;
    throw model_load_error(path + ": tokenizer.ggml.pre '" + pre +
                           "' is not supported (known: llama-bpe/llama3, qwen2, qwen35, deepseek-llm, deepseek-coder, "
                           "starcoder/refact/command-r/smollm, default/gpt2/mpt/olmo)");
}

using merge::symbol;

struct candidate {
    int32_t rank;
    int32_t left;  // symbol index
    uint32_t left_len, right_len;
    int32_t merged;
};

// Min-heap order on (rank, position).
struct merges_later {
    bool operator()(const candidate& a, const candidate& b) const {
        if (a.rank != b.rank) return a.rank > b.rank;
        return a.left > b.left;
    }
};

uint64_t pair_key(int32_t l, int32_t r) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(l)) << 32) | static_cast<uint32_t>(r);
}

}  // namespace

void tokenizer::init_bpe(const gguf_file& f) {
    const size_t n = text_.size();
    pretok_ = pretokenizer_for(pre_, f.path());
    ignore_merges_ = pretok_ == pretokenizer_kind::llama3;

    pieces_ = text_;
    piece_to_id_.reserve(n);
    for (size_t i = 0; i < n; ++i) piece_to_id_.emplace(std::string_view(pieces_[i]), static_cast<int32_t>(i));

    // token_bytes: undo the byte alphabet. A token using characters outside it (llama.cpp writes
    // some added tokens in plain UTF-8) and control tokens are their own text.
    for (size_t i = 0; i < n; ++i) {
        const std::string& t = text_[i];
        std::string raw;
        bool in_alphabet = types_[i] != token_type::control;
        for (size_t k = 0; k < t.size() && in_alphabet;) {
            utf8_char c = utf8_next(t, k);
            int b = unicode_to_byte(c.cp);
            if (b < 0) in_alphabet = false;
            else raw += static_cast<char>(b);
            k += c.len;
        }
        bytes_[i] = in_alphabet ? raw : t;
    }

    for (int b = 0; b < 256; ++b) {
        std::string s;
        utf8_append(s, byte_to_unicode(static_cast<uint8_t>(b)));
        auto it = piece_to_id_.find(s);
        byte_symbol_ids_[b] = it == piece_to_id_.end() ? -1 : it->second;
    }

    const std::vector<std::string_view> merges = f.get_string_array("tokenizer.ggml.merges");
    merges_.reserve(merges.size());
    std::string joined;
    for (size_t r = 0; r < merges.size(); ++r) {
        const std::string_view m = merges[r];
        const size_t sp = m.find(' ', 1);
        if (sp == std::string_view::npos)
            throw model_load_error(f.path() + ": tokenizer.ggml.merges[" + std::to_string(r) + "] = '" +
                                   std::string(m) + "' is not 'left right'");
        const std::string_view l = m.substr(0, sp), rr = m.substr(sp + 1);
        joined.assign(l);
        joined.append(rr);
        auto il = piece_to_id_.find(l), ir = piece_to_id_.find(rr), im = piece_to_id_.find(joined);
        // A merge naming pieces the vocabulary lacks can never apply; llama.cpp tolerates them too.
        if (il == piece_to_id_.end() || ir == piece_to_id_.end() || im == piece_to_id_.end()) continue;
        merges_.emplace(pair_key(il->second, ir->second), merge_info{static_cast<int32_t>(r), im->second});
    }
}

void tokenizer::encode_bpe(std::string_view frag, std::vector<int32_t>& out) const {
    std::vector<std::pair<size_t, size_t>> words;
    pretokenize(pretok_, frag, words);

    std::vector<symbol> sym;
    std::vector<candidate> heap;  // reused across words
    std::string spelled;          // a word in the byte alphabet (ignore_merges)
    for (const auto& [begin, end] : words) {
        const std::string_view w = frag.substr(begin, end - begin);
        if (w.size() == 1) {
            const int32_t id = byte_symbol_ids_[static_cast<unsigned char>(w[0])];
            if (id >= 0) out.push_back(id);
            else if (unk_ >= 0) out.push_back(unk_);
            continue;
        }
        if (ignore_merges_) {
            spelled.clear();
            for (char c : w) utf8_append(spelled, byte_to_unicode(static_cast<uint8_t>(c)));
            auto it = piece_to_id_.find(spelled);
            if (it != piece_to_id_.end()) {
                out.push_back(it->second);
                continue;
            }
        }
        sym.clear();
        for (size_t i = 0; i < w.size(); ++i) {
            const int32_t idx = static_cast<int32_t>(i);
            sym.push_back({static_cast<uint32_t>(i), 1, idx - 1, idx + 1,
                           byte_symbol_ids_[static_cast<unsigned char>(w[i])]});
        }
        sym.back().next = -1;

        heap.clear();
        auto try_pair = [&](int32_t left) {
            if (left < 0) return;
            const int32_t right = sym[left].next;
            if (right < 0 || sym[left].id < 0 || sym[right].id < 0) return;
            auto it = merges_.find(pair_key(sym[left].id, sym[right].id));
            if (it == merges_.end()) return;
            heap.push_back({it->second.rank, left, sym[left].len, sym[right].len, it->second.merged});
            std::push_heap(heap.begin(), heap.end(), merges_later{});
        };
        for (int32_t i = 0; i + 1 < static_cast<int32_t>(sym.size()); ++i) try_pair(i);

        while (!heap.empty()) {
            std::pop_heap(heap.begin(), heap.end(), merges_later{});
            const candidate c = heap.back();
            heap.pop_back();
            if (!merge::apply(sym, c.left, c.left_len, c.right_len, c.merged)) continue;
            try_pair(sym[c.left].prev);
            try_pair(c.left);
        }

        for (int32_t i = 0; i >= 0; i = sym[i].next) {
            if (sym[i].id >= 0) out.push_back(sym[i].id);
            else if (unk_ >= 0) out.push_back(unk_);  // the vocabulary cannot spell this byte
        }
    }
}

}  // namespace specgen
