// The drafters specgen ships (docs/DESIGN.md section 4) and their constructors. The sequential
// speculator (speculative/sequential.h) picks one from params.draft.
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

struct neural_weights;

// "ngram" is prompt lookup over the history (docs/ALGORITHMS.md section 6); "self" (the target's own
// first self_layers layers, sharing its KV cache) and a draft GGUF (a KV cache of its own per drafter)
// are neural drafters over weights from load_neural_weights() (speculative/drafters/neural.h), which
// the drafter shares. vocab: the draft head's token set (NanoSpec / FR-Spec) or null (full head), owned
// by the caller. seq: the request's sequence (slot) of target_cache, which a self drafter writes.
// capture: target layers whose inputs a handing-over drafter captures for proposal::features (null: none).
std::unique_ptr<drafter> make_neural_drafter(const generator_params& params, std::shared_ptr<const neural_weights> w,
                                             kv_cache& target_cache, backend& be, draft_vocab* vocab, int seq = 0,
                                             const std::vector<int>* capture = nullptr);
std::unique_ptr<drafter> make_ngram_drafter(int n_max, int n_min);

// Probability of the most likely token under softmax(logits[0, n)) at temperature 1: the draft_p_min
// test of the neural drafters (over S with NanoSpec / FR-Spec: the top probability of q_S).
float top_probability(const float* logits, int n);

}  // namespace specgen
