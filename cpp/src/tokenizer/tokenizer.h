// The tokenizer stored in a GGUF file's tokenizer.ggml.* metadata.
//
// Two algorithms, chosen by tokenizer.ggml.model:
//   "llama": SentencePiece-style BPE (Gemma 3, Llama 2) -- spm.cpp. Spaces are spelled U+2581, pairs of
//            adjacent pieces merge best-score-first, characters missing from the vocabulary fall back
//            to <0xNN> byte tokens.
//   "gpt2":  byte-level BPE (Llama 3, Qwen2) -- bpe.cpp. Text is split by the pre-tokenizer that
//            tokenizer.ggml.pre names (pretokenize.cpp), bytes are spelled in GPT-2's byte alphabet and
//            merged by the rank of tokenizer.ggml.merges.
// Both first cut the text at special tokens written literally (tokenizer.cpp): user-defined tokens
// always, control tokens only when parse_special is set, longest match first.
//
// Reference: Hugging Face tokenizers as transformers builds them from the same GGUF
// (tests/test_tokenizer.py compares ids on real and synthetic vocabularies).
//
// Invalid UTF-8 never throws: encode keeps every input byte (SPM emits <0xNN> tokens for bytes that
// do not form a character, BPE spells any byte), so decode(encode(s)) == s for every byte string.
// decode returns raw bytes, which may be invalid UTF-8 when the ids are (the Python binding decodes
// with errors="replace").
//
// A tokenizer is immutable after construction; encode/decode are safe to call from many threads.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace specgen {

class gguf_file;

// tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
enum class token_type : uint8_t {
    undefined = 0, normal = 1, unknown = 2, control = 3, user_defined = 4, unused = 5, byte = 6,
};

// Byte-level BPE pre-tokenizers (the regexes of the models that use them, hand-written).
enum class pretokenizer_kind : uint8_t {
    gpt2,    // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
    llama3,  // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
    qwen2,   // as llama3 with \p{N} (one digit per word)
    qwen35,  // as qwen2 with combining marks joined to letters: [\p{L}\p{M}]+ and [^\s\p{L}\p{M}\p{N}]
    // Sequences of regexes, each applied to the pieces the previous left (pretokenize.cpp):
    deepseek_llm,    // [\r\n], \s?[cased letters]+, \s?[ASCII/CJK punctuation]+, \s+$, [CJK]+, \p{N}+
    deepseek_coder,  // [\r\n], \s?\p{L}+, \s?\p{P}+, [CJK]+, \p{N}
    starcoder,       // \p{N}, then gpt2 (also refact, command-r, smollm, codeshell, exaone)
};

class tokenizer {
public:
    // Copies everything it needs from `f`; the file may be unmapped afterwards.
    // Throws model_load_error on missing or inconsistent tokenizer metadata.
    explicit tokenizer(const gguf_file& f);
    // Lookup tables view into the token strings: moving keeps them valid (vector buffers move as a
    // whole), copying would not.
    tokenizer(const tokenizer&) = delete;
    tokenizer& operator=(const tokenizer&) = delete;
    tokenizer(tokenizer&&) = default;
    tokenizer& operator=(tokenizer&&) = default;

    int32_t n_vocab() const { return static_cast<int32_t>(text_.size()); }

    // add_special: prepend BOS / append EOS as tokenizer.ggml.add_bos_token / add_eos_token say.
    // parse_special: match control tokens written as text ("<start_of_turn>"); user-defined tokens
    // are matched whether or not it is set.
    std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;

    // Concatenated token_bytes(); skip_special drops control (and unknown-typed) tokens.
    // Throws invalid_argument_error naming the first id outside [0, n_vocab).
    std::string decode(const std::vector<int32_t>& ids, bool skip_special = false) const;

    // The raw bytes a token contributes to decoded text: U+2581 -> ' ', <0xNN> -> that byte (SPM);
    // GPT-2 byte alphabet undone (BPE); control tokens as their text. Throws invalid_argument_error.
    const std::string& token_bytes(int32_t id) const;
    // The token as the file spells it. Throws invalid_argument_error.
    const std::string& token_text(int32_t id) const;
    token_type type(int32_t id) const;

    int32_t bos_id() const { return bos_; }  // -1 if none
    int32_t eos_id() const { return eos_; }
    int32_t eot_id() const { return eot_; }
    int32_t unk_id() const { return unk_; }
    bool add_bos() const { return add_bos_; }
    bool add_eos() const { return add_eos_; }
    // End of generation: eos, eot, eom and the end-of-turn control tokens models emit
    // ("<end_of_turn>", "<|eot_id|>", "<|im_end|>", ...). False for out-of-range ids.
    bool is_eog(int32_t id) const;
    bool is_control(int32_t id) const;
    const std::vector<int32_t>& eog_ids() const { return eog_; }

    std::string model_name() const { return model_; }  // "llama" (SPM) or "gpt2" (BPE)
    std::string pre_name() const { return pre_; }      // tokenizer.ggml.pre as the file says

private:
    void load_special_ids(const gguf_file& f);
    void build_special_matcher();
    // Longest special token spelled at text[pos], or -1 (see encode for which ones count).
    int32_t match_special(std::string_view text, size_t pos, bool parse_special, size_t* len) const;

    // One stretch of text between special tokens. at_start: the fragment begins the input.
    void encode_spm(std::string_view frag, bool at_start, std::vector<int32_t>& out) const;  // spm.cpp
    void encode_bpe(std::string_view frag, std::vector<int32_t>& out) const;                // bpe.cpp
    void init_spm(const gguf_file& f);  // spm.cpp
    void init_bpe(const gguf_file& f);  // bpe.cpp
    void check_id(int32_t id) const;

    std::string model_, pre_;
    std::vector<std::string> text_;   // as the file spells it
    std::vector<std::string> bytes_;  // token_bytes
    std::vector<token_type> types_;
    // Lookup by spelling. SPM: the file's spelling, whitespace-only user pieces respelled with U+2581
    // (see init_spm). BPE: byte-alphabet spelling. Keys view into pieces_.
    std::vector<std::string> pieces_;
    std::unordered_map<std::string_view, int32_t> piece_to_id_;

    // Special tokens matched literally in the text (user-defined always, control if parse_special).
    std::unordered_map<std::string_view, int32_t> special_;
    std::vector<uint32_t> special_lengths_;  // distinct lengths, longest first
    bool special_first_byte_[256] = {};

    int32_t bos_ = -1, eos_ = -1, eot_ = -1, eom_ = -1, unk_ = -1;
    bool add_bos_ = false, add_eos_ = false;
    std::vector<int32_t> eog_;
    std::vector<uint8_t> is_eog_;

    // SPM
    std::vector<float> merge_priority_;  // higher merges first (score, or -index for Gemma)
    int32_t byte_ids_[256];              // <0xNN> token per byte, -1 if missing
    bool add_space_prefix_ = false;

    // BPE
    pretokenizer_kind pretok_ = pretokenizer_kind::gpt2;
    // A word that is itself a token is emitted whole, before any merge (Llama 3's tokenizer.json
    // "ignore_merges": its vocabulary holds words its merges cannot build, e.g. " Việt").
    bool ignore_merges_ = false;
    int32_t byte_symbol_ids_[256];  // the single-character token spelling each byte, -1 if missing
    struct merge_info { int32_t rank, merged; };
    std::unordered_map<uint64_t, merge_info> merges_;  // (left id << 32 | right id) -> merge
};

}  // namespace specgen
