#include "speculative/vocab_check.h"

#include "common/error.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace specgen {

void check_draft_vocabulary(const std::string& where, const model& target, const tokenizer& a, const model& draft,
                            const tokenizer& b) {
    if (draft.hp().n_vocab != target.hp().n_vocab || a.n_vocab() != b.n_vocab())
        throw model_load_error(where + ": vocabulary of " + std::to_string(b.n_vocab()) + " tokens differs from the target's " +
                               std::to_string(a.n_vocab()));
    for (int32_t id = 0; id < a.n_vocab(); ++id)
        if (a.token_text(id) != b.token_text(id))
            throw model_load_error(where + ": token " + std::to_string(id) + " is '" + b.token_text(id) +
                                   "' but the target's is '" + a.token_text(id) + "' (different tokenizers)");
}

}  // namespace specgen
