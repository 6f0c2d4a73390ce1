#include "model/vocab_compat.h"

#include <algorithm>
#include <cstdlib>

#include "common/error.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace specgen {

void check_draft_vocabulary(const model& target, const tokenizer& target_tok, model& draft, const tokenizer& draft_tok,
                            const std::string& where) {
    auto fail = [&](const std::string& what) { throw model_load_error(where + ": " + what); };
    if (draft_tok.model_name() != target_tok.model_name())
        fail("tokenizer type '" + draft_tok.model_name() + "' differs from the target's '" + target_tok.model_name() + "'");
    if (draft_tok.add_bos() != target_tok.add_bos() || draft_tok.bos_id() != target_tok.bos_id())
        fail("BOS token " + std::to_string(draft_tok.bos_id()) + " differs from the target's " + std::to_string(target_tok.bos_id()));
    if (draft_tok.add_eos() != target_tok.add_eos() || draft_tok.eos_id() != target_tok.eos_id())
        fail("EOS token " + std::to_string(draft_tok.eos_id()) + " differs from the target's " + std::to_string(target_tok.eos_id()));
    const int n_target = target_tok.n_vocab(), n_draft = draft_tok.n_vocab();
    if (std::abs(n_target - n_draft) > kMaxVocabSizeDifference)
        fail("vocabulary of " + std::to_string(n_draft) + " tokens differs from the target's " + std::to_string(n_target) +
             " by more than " + std::to_string(kMaxVocabSizeDifference));
    const int n_shared = std::min(n_target, n_draft);
    for (int32_t id = kFirstCheckedId; id < n_shared; ++id)
        if (draft_tok.token_text(id) != target_tok.token_text(id))
            fail("token " + std::to_string(id) + " is '" + draft_tok.token_text(id) + "' but the target's is '" +
                 target_tok.token_text(id) + "' (different tokenizers)");
    if (draft.hp().n_vocab > target.hp().n_vocab) draft.restrict_vocab(target.hp().n_vocab);
    // The target's extra ids (padding, added tokens) can still reach the draft through the history.
    if (draft.hp().n_vocab < target.hp().n_vocab)
        draft.set_missing_token_row(draft_tok.unk_id() >= 0 && draft_tok.unk_id() < draft.hp().n_vocab ? draft_tok.unk_id() : 0);
}

}  // namespace specgen
