// The cost model's measurement (docs/ALGORITHMS.md section 8.1): a few target forwards at load,
// cached per model + machine in a small JSON file so that later loads skip them.
//
// Cache file: $SPECGEN_CALIBRATION when set (read when it exists, else written there), otherwise
// ~/.cache/specgen/calibration-<hash>.json with hash = FNV-1a of (model path, file size, threads,
// device, hardware threads, version). SPECGEN_CALIBRATION=off measures every load and writes nothing.
// The automatic cache (not a file SPECGEN_CALIBRATION names) is measured again and rewritten when one
// target row (forward + head, min of 2) now differs from its T(1) by more than 1.5x either way.
// With a draft model (auto's draft model candidate) the file also holds the draft model's rows and
// heads, and the automatic cache is per pair (the hash adds the draft's path and size). A file without
// them (older, or written for the target alone) is measured again when automatic; a named one is
// taken for the target's costs and the draft model's are measured at load. An EAGLE-3 head (auto's
// draft_head candidate) is handled the same way: its rows and outputs in the file, the cache per head.
#pragma once
#include <string>

#include "speculative/auto/cost_model.h"

namespace specgen {

class model;
class kv_cache;
struct backend;
struct eagle3_head;

// Measures T(R) for R = 1..9, the full head over R rows, a body row and the subset head (min of 3
// repeats each) by forwarding into rows 0..8 of `cache` (the next prefill overwrites them).
cost_model measure_costs(const model& target, backend& be, kv_cache& cache);

// Measures the draft model's rows (its layers over R = 1..9 rows), its full head and its head over a
// subset S (min of 3 each) into c, in a small KV cache of its own.
void measure_draft_costs(const model& draft, backend& be, cost_model& c);

// Measures the EAGLE-3 head's fc + decoder layer over one row, its output over its draft vocabulary and
// over a subset S of its ids (min of 3 each) into c, in a small KV cache of its own.
void measure_eagle3_costs(const eagle3_head& head, backend& be, cost_model& c);

// Seconds of one target row (forward + full head), the min of two after a warm-up.
double probe_row_seconds(const model& target, backend& be, kv_cache& cache);

// The cached model for this model (+ draft model, + EAGLE-3 head, when not null) + machine, or a fresh
// measurement (then cached). `source` is set to the file read or written ("" when not cached).
cost_model load_or_measure_costs(const model& target, backend& be, kv_cache& cache, const std::string& model_path,
                                 int n_threads, const std::string& device, std::string& source,
                                 const model* draft = nullptr, const std::string& draft_path = "",
                                 const eagle3_head* head = nullptr, const std::string& head_path = "");

std::string cost_model_json(const cost_model& c);
bool parse_cost_model_json(const std::string& text, cost_model& out);  // false when malformed

}  // namespace specgen
