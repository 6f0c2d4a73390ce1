// The drafters specgen ships (DESIGN.md "Drafters") and the factory that picks one from the
// generator parameters.
#pragma once
#include <memory>

#include "engine/params.h"
#include "speculative/drafters/drafter.h"

namespace specgen {

class model;
class draft_vocab;
class tokenizer;
class kv_cache;
struct backend;

// Returns nullptr when params.draft is empty (plain decoding).
//   "ngram": prompt lookup over the history (ALGORITHMS.md section 6).
//   "self":  the target's own first params.self_layers layers (early exit) sharing its KV cache.
//   other:   a path to a draft GGUF with the same vocabulary (checked here).
std::unique_ptr<drafter> make_drafter(const generator_params& params, const model& target, const tokenizer& tok,
                                      kv_cache& target_cache, backend& be);

std::unique_ptr<drafter> make_ngram_drafter(int n_max, int n_min);

// Probability of the most likely token under softmax(logits[0, n)) at temperature 1: the draft_p_min
// test of the neural drafters (over S with NanoSpec / FR-Spec: the top probability of q_S).
float top_probability(const float* logits, int n);

// The draft head's token set over m's LM head (ALGORITHMS.md section 3): NanoSpec's in-context set
// (params.nanospec, empty until seeded), FR-Spec's static one (params.frspec > 0, filled from
// params.frspec_path), or null (full head). Used by the neural drafters and the SSD speculator.
std::unique_ptr<draft_vocab> make_draft_vocab(const generator_params& params, const model& m);

}  // namespace specgen
