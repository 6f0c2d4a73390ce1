// Shared tokenizer machinery: metadata loading, special-token matching, encode/decode drivers.
// The algorithms live in spm.cpp and bpe.cpp.
#include "tokenizer/tokenizer.h"

#include <algorithm>

#include "common/error.h"
#include "gguf/gguf_reader.h"

namespace specgen {

namespace {

// Control tokens that end a turn in the chat formats we know; is_eog() includes them besides the
// ids the file names (llama.cpp applies the same list, since files rarely name an eot id).
const char* const k_eog_texts[] = {
    "<end_of_turn>", "<|eot_id|>", "<|im_end|>", "<|endoftext|>", "<|end|>", "<|eom_id|>",
    "<|end_of_text|>", "<EOT>", "<|return|>", "<|call|>", "_<EOT>", "<｜end▁of▁sentence｜>",
};

}  // namespace

tokenizer::tokenizer(const gguf_file& f) {
    const std::string where = f.path() + ": ";
    model_ = f.get_string("tokenizer.ggml.model");
    pre_ = f.get_string("tokenizer.ggml.pre", "default");
    if (model_ != "llama" && model_ != "gpt2")
        throw model_load_error(where + "tokenizer.ggml.model '" + model_ +
                               "' is not supported (expected 'llama' or 'gpt2')");

    const std::vector<std::string_view> tokens = f.get_string_array("tokenizer.ggml.tokens");
    if (tokens.empty()) throw model_load_error(where + "tokenizer.ggml.tokens is empty");
    if (tokens.size() > static_cast<size_t>(INT32_MAX))
        throw model_load_error(where + "tokenizer.ggml.tokens has too many entries");
    const size_t n = tokens.size();
    text_.reserve(n);
    for (std::string_view t : tokens) text_.emplace_back(t);

    types_.assign(n, token_type::normal);
    if (f.has("tokenizer.ggml.token_type")) {
        std::vector<int64_t> tt = f.get_int_array("tokenizer.ggml.token_type");
        if (tt.size() != n)
            throw model_load_error(where + "tokenizer.ggml.token_type has " + std::to_string(tt.size()) +
                                   " entries for " + std::to_string(n) + " tokens");
        for (size_t i = 0; i < n; ++i) {
            if (tt[i] < 0 || tt[i] > 6)
                throw model_load_error(where + "tokenizer.ggml.token_type[" + std::to_string(i) +
                                       "] = " + std::to_string(tt[i]) + " is not a token type");
            types_[i] = static_cast<token_type>(tt[i]);
        }
    }

    load_special_ids(f);
    bytes_.resize(n);
    if (model_ == "llama") init_spm(f);
    else init_bpe(f);
    build_special_matcher();
}

void tokenizer::load_special_ids(const gguf_file& f) {
    const int64_t n = static_cast<int64_t>(text_.size());
    auto id_of = [&](const char* key) -> int32_t {
        int64_t v = f.get_int(key, -1);
        if (v < -1 || v >= n)
            throw model_load_error(f.path() + ": " + key + " = " + std::to_string(v) +
                                   " is outside the vocabulary of " + std::to_string(n) + " tokens");
        return static_cast<int32_t>(v);
    };
    bos_ = id_of("tokenizer.ggml.bos_token_id");
    eos_ = id_of("tokenizer.ggml.eos_token_id");
    eot_ = id_of("tokenizer.ggml.eot_token_id");
    eom_ = id_of("tokenizer.ggml.eom_token_id");
    unk_ = id_of("tokenizer.ggml.unknown_token_id");
    // SentencePiece vocabularies add BOS unless the file says otherwise (llama.cpp and transformers
    // agree); byte-level BPE files state it when they want it.
    add_bos_ = f.get_bool("tokenizer.ggml.add_bos_token", model_ == "llama") && bos_ >= 0;
    add_eos_ = f.get_bool("tokenizer.ggml.add_eos_token", false) && eos_ >= 0;

    is_eog_.assign(text_.size(), 0);
    for (int32_t id : {eos_, eot_, eom_})
        if (id >= 0) is_eog_[id] = 1;
    for (const char* t : k_eog_texts) {
        int32_t id = -1;
        for (size_t i = 0; i < text_.size(); ++i)
            if (text_[i] == t && (types_[i] == token_type::control || types_[i] == token_type::user_defined))
                id = static_cast<int32_t>(i);
        if (id >= 0) is_eog_[id] = 1;
    }
    for (size_t i = 0; i < is_eog_.size(); ++i)
        if (is_eog_[i]) eog_.push_back(static_cast<int32_t>(i));
}

void tokenizer::build_special_matcher() {
    for (size_t i = 0; i < text_.size(); ++i) {
        const token_type t = types_[i];
        if (t != token_type::control && t != token_type::user_defined) continue;
        const std::string& s = text_[i];
        if (s.empty()) continue;
        // Whitespace-only user pieces were respelled in init_spm and are reached by merges instead.
        if (t == token_type::user_defined && model_ == "llama" &&
            s.find_first_not_of(' ') == std::string::npos)
            continue;
        // First spelling wins when two tokens share one.
        if (!special_.emplace(std::string_view(s), static_cast<int32_t>(i)).second) continue;
        special_first_byte_[static_cast<unsigned char>(s[0])] = true;
        if (std::find(special_lengths_.begin(), special_lengths_.end(), s.size()) == special_lengths_.end())
            special_lengths_.push_back(static_cast<uint32_t>(s.size()));
    }
    std::sort(special_lengths_.rbegin(), special_lengths_.rend());
}

int32_t tokenizer::match_special(std::string_view text, size_t pos, bool parse_special, size_t* len) const {
    if (!special_first_byte_[static_cast<unsigned char>(text[pos])]) return -1;
    const size_t left = text.size() - pos;
    for (uint32_t l : special_lengths_) {
        if (l > left) continue;
        auto it = special_.find(text.substr(pos, l));
        if (it == special_.end()) continue;
        if (!parse_special && types_[it->second] == token_type::control) continue;
        *len = l;
        return it->second;
    }
    return -1;
}

std::vector<int32_t> tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
    std::vector<int32_t> out;
    out.reserve(text.size() / 3 + 4);
    if (add_special && add_bos_) out.push_back(bos_);

    // Cut at special tokens, leftmost then longest, and tokenize the text between them.
    size_t frag_start = 0;
    auto flush = [&](size_t end) {
        if (end == frag_start) return;
        std::string_view frag = text.substr(frag_start, end - frag_start);
        if (model_ == "llama") encode_spm(frag, frag_start == 0, out);
        else encode_bpe(frag, out);
    };
    for (size_t pos = 0; pos < text.size();) {
        size_t len = 0;
        int32_t id = match_special(text, pos, parse_special, &len);
        if (id < 0) {
            ++pos;
            continue;
        }
        flush(pos);
        out.push_back(id);
        pos += len;
        frag_start = pos;
    }
    flush(text.size());

    if (add_special && add_eos_) out.push_back(eos_);
    return out;
}

std::string tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special) const {
    std::string out;
    bool first_text = true;
    for (int32_t id : ids) {
        check_id(id);
        const token_type t = types_[id];
        if (skip_special && (t == token_type::control || t == token_type::unknown)) continue;
        const std::string& b = bytes_[id];
        // Undo the dummy prefix SentencePiece puts in front of the text.
        if (first_text && add_space_prefix_ && t != token_type::control && !b.empty() && b[0] == ' ') {
            out.append(b, 1, std::string::npos);
        } else {
            out += b;
        }
        if (t != token_type::control) first_text = false;
    }
    return out;
}

void tokenizer::check_id(int32_t id) const {
    if (id < 0 || id >= n_vocab())
        throw invalid_argument_error("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                                     std::to_string(n_vocab()) + ")");
}

const std::string& tokenizer::token_bytes(int32_t id) const {
    check_id(id);
    return bytes_[id];
}

const std::string& tokenizer::token_text(int32_t id) const {
    check_id(id);
    return text_[id];
}

token_type tokenizer::type(int32_t id) const {
    check_id(id);
    return types_[id];
}

bool tokenizer::is_eog(int32_t id) const {
    return id >= 0 && id < n_vocab() && is_eog_[id];
}

bool tokenizer::is_control(int32_t id) const {
    return id >= 0 && id < n_vocab() && types_[id] == token_type::control;
}

}  // namespace specgen
