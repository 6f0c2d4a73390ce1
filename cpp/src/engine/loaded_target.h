// What a generator lends its engine (engine/scheduler.h, engine/sequence.h): the loaded target model
// and what runs it. The generator owns every part and outlives the engine thread; the parts are used on
// the engine thread, and by generator::logits() between its steps (scheduler::step_mutex()).
#pragma once

#include "engine/params.h"

namespace specgen {

class model;
class tokenizer;
class evaluator;
class kv_cache;
class verifier;
class target_head;
class verify_trace;
struct backend;

struct loaded_target {
    const generator_params& params;  // resolved (threads) and validated
    const model& m;
    const tokenizer& tok;
    backend& be;
    evaluator& eval;                 // the target's forward and head
    kv_cache& cache;                 // one sequence per slot
    verifier& verify;                // scratch shared by the sequences, one round at a time
    target_head& head;               // the head service the speculators get (speculative/target_head.h)
    bool check_reuse = false;        // $SPECGEN_CHECK_REUSE: recompute every hand-over row (sequence.cpp)
    verify_trace* trace = nullptr;   // $SPECGEN_VERIFY_TRACE: a line per round (engine/verify_trace.h)
};

}  // namespace specgen
