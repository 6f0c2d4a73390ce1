// Whether a draft model may draft for a target: the one place that decides it (a draft GGUF is
// loaded by speculative/drafters/neural.cpp for the sequential drafter and for SSD alike).
#pragma once
#include <string>

namespace specgen {

class model;
class tokenizer;

// Throws model_load_error naming `where` (the draft's path) unless the draft's vocabulary is the
// target's: the same size in the embedding and the tokenizer, and the same text for every token id
// (the verifier compares token ids, so they must mean the same strings).
void check_draft_vocabulary(const std::string& where, const model& target, const tokenizer& target_tok,
                            const model& draft, const tokenizer& draft_tok);

}  // namespace specgen
