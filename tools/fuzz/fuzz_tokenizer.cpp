// libFuzzer target: the reference model's tokenizer (Gemma 3, SentencePiece BPE, 262k pieces) on
// arbitrary input. Byte 0 picks the operation:
//   even: encode the rest as text (flags from byte 0) and check decode(encode(s)) == s, the
//         round trip tokenizer.h promises for every byte string (U+2581 reads back as ' ');
//   odd:  decode the rest as int32 ids (out-of-range ids must throw invalid_argument_error).
// The model path comes from SPECGEN_FUZZ_MODEL (run_fuzzers.sh sets it).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "gguf/gguf_reader.h"
#include "tokenizer/tokenizer.h"

static const specgen::tokenizer& tok() {
    static std::unique_ptr<specgen::tokenizer> t = [] {
        const char* p = std::getenv("SPECGEN_FUZZ_MODEL");
        if (!p) { std::fprintf(stderr, "set SPECGEN_FUZZ_MODEL\n"); std::abort(); }
        specgen::gguf_file f(p);
        return std::make_unique<specgen::tokenizer>(f);
    }();
    return *t;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 1) return 0;
    const specgen::tokenizer& t = tok();
    const uint8_t op = data[0];
    if (op % 2 == 0) {
        const std::string s(reinterpret_cast<const char*>(data + 1), size - 1);
        const bool parse_special = op & 2, add_special = op & 4;
        std::vector<int32_t> ids = t.encode(s, add_special, parse_special);
        for (int32_t id : ids)
            if (id < 0 || id >= t.n_vocab()) std::abort();
        if (add_special && t.add_bos() && !ids.empty()) ids.erase(ids.begin());
        const std::string back = t.decode(ids);
        // A literal U+2581 in the input decodes as a space: SentencePiece spells spaces with it and
        // Hugging Face's decoder does the same, so the round trip holds up to that one character.
        std::string want;
        for (size_t i = 0; i < s.size(); ++i) {
            if (s.compare(i, 3, "\xE2\x96\x81") == 0) { want += ' '; i += 2; }
            else want += s[i];
        }
        if (back != want) {
            std::fprintf(stderr, "round trip failed: %zu bytes in, %zu out\n", s.size(), back.size());
            std::abort();
        }
    } else {
        std::vector<int32_t> ids((size - 1) / 4);
        if (!ids.empty()) std::memcpy(ids.data(), data + 1, ids.size() * 4);
        try {
            (void)t.decode(ids, op & 2);
        } catch (const specgen::invalid_argument_error&) {
        }
    }
    return 0;
}
