// draft_kind auto (docs/ALGORITHMS.md section 8; the draft model candidate: section 8.3): a speculator that owns one candidate speculator per
// method -- n-gram lookup, the self drafter over every layer with NanoSpec (with the hand-over) and,
// when params.draft_model names one, the draft model (its NanoSpec head with params.nanospec, else its
// full head; over the weights the speculator factory loaded once, t.draft) and, when params.draft_head
// names one, the EAGLE-3 head (speculative/eagle3.h: drafting over its NanoSpec S with params.nanospec,
// else its draft vocabulary; section 8.4) -- and before every round
// picks plain decoding or one of them, and gamma, by the measured cost model (cost_model.h,
// calibration.h: the draft model's rows and heads are measured beside the target's) and the live
// per-request acceptance and timings (policy.h).
//
// Lossless: a round's method and gamma are fixed before its proposal is drawn, from outcomes already
// emitted and times already measured; each round is then verified exactly (sections 1-2), so the
// output distribution is plain decoding's whatever the sequence of choices.
//
// Every candidate observes every verdict (the self drafter's S keeps growing while n-gram runs, and
// drafters catch up on the history they missed: speculative/drafters/drafter.h), so a switch costs
// nothing but the drafter's catch-up (the draft model forwards the rows it missed in its next round).
// SPECGEN_AUTO_FORCE_SWITCH=k (a test hook) cycles self+nanospec, [draft model,] [draft head,] ngram, none every k
// rounds regardless of the prediction (gamma still from the cost model).
//
// With params.ngram_chain a draft model round may start with the n-gram match of at least ngram_chain
// tokens, the model drafting on after it (docs/ALGORITHMS.md sections 6.1 and 8.3): the policy scores
// each g with and without the copy (its rows ride the model's first forward; its tokens are predicted
// by the n-gram rates of its match order) and tells the candidate which it chose.
//
// SSD is not a candidate: it pays only when the drafter and the target do not share memory
// bandwidth (a drafter on another device); auto's drafters always run on the target's device, where
// SSD measured 0.46x-0.8x of sequential drafting. Switching SSD on and off inside a request is not built.
#pragma once
#include <memory>

#include "speculative/speculator.h"

namespace specgen {

// t.seq: the sequence (KV slot) whose rows the self candidate drafts in.
std::unique_ptr<speculator> make_auto_speculator(const generator_params& params, const speculation_target& t);

// The params of auto's draft model candidate (params.draft_model): what speculator_factory loads the
// shared weights with. gamma is the policy's (no adaptation of its own) and it never stops early
// (draft_p_min 0: the policy's stop model is the self drafter's).
generator_params auto_draft_params(const generator_params& params);
// The params of auto's EAGLE-3 head candidate (params.draft_head, docs/ALGORITHMS.md section 8.4): likewise
// the policy's gamma, no early stop, and its NanoSpec S with params.nanospec.
generator_params auto_head_params(const generator_params& params);

}  // namespace specgen
