// Whether a draft model may propose tokens to a target: the rule the neural drafter
// loader (speculative/drafters/neural.cpp, for the sequential drafter and SSD alike) applies.
#pragma once
#include <string>

namespace specgen {

class model;
class tokenizer;

// Accepts a draft whose vocabulary differs from the target's only by padding or a few added tokens
// (as the sizes of one released family do, e.g. 151936 vs 152064 rows): same tokenizer type and
// BOS/EOS, sizes within kMaxVocabSizeDifference, and the same text for every shared id from
// kFirstCheckedId on (llama.cpp's rule; the first ids are special placeholders some sizes of a family
// spell differently). Otherwise throws model_load_error naming `where` and the first differing id.
// On success restricts the draft model to the ids the target has (model::restrict_vocab), so it never
// proposes an id outside the target's vocabulary; a draft with fewer ids embeds the target's extra ones
// as its unknown token (model::set_missing_token_row).
constexpr int kMaxVocabSizeDifference = 128;
constexpr int kFirstCheckedId = 5;
void check_draft_vocabulary(const model& target, const tokenizer& target_tok, model& draft, const tokenizer& draft_tok,
                            const std::string& where);

}  // namespace specgen
