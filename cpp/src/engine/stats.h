// Statistics of one generation. Names follow llama.cpp and vLLM (DESIGN.md "Stats").
#pragma once
#include <cstdint>
#include <vector>

namespace specgen {

struct generation_stats {
    int64_t n_prompt_tokens = 0;
    int64_t n_generated = 0;
    double prefill_seconds = 0;
    double decode_seconds = 0;
    // Speculation (zero for plain decoding).
    int64_t n_rounds = 0;           // target verification calls
    int64_t n_drafted = 0;
    int64_t n_accepted = 0;
    std::vector<int64_t> accepted_at;  // per draft position i: rounds that accepted position i
    std::vector<int64_t> drafted_at;   // per draft position i: rounds that drafted position i
    double draft_seconds = 0;
    double verify_seconds = 0;
    int64_t n_target_rows_reused = 0;  // verified rows whose layers the all-layers self drafter already ran
    // Speed-of-light inputs: sums over the verified target rows.
    int64_t n_target_rows = 0;
    double sum_entropy = 0;        // sum of -sum p ln p
    double sum_entropy2 = 0;       // sum of sum p (ln p)^2
    double sum_alpha = 0;          // sum over drafted positions of sum_x min(p, q)
    int64_t n_alpha = 0;
    // SSD / Saguaro (ALGORITHMS.md 4)
    int64_t ssd_hits = 0;           // rounds whose proposal came from the speculation cache
    int64_t ssd_misses = 0;         // rounds that ran the backup instead (the first round excluded)
    int64_t ssd_branches = 0;       // branches (k, bonus) drafted to completion
    double ssd_wait_seconds = 0;    // target idle: waiting for the drafter (hit branch, neural backup)
    double ssd_overlap_seconds = 0; // drafter busy while the target verified
    // NanoSpec / FR-Spec
    int64_t vocab_set_size = 0;    // |S| at the end
    double draft_head_seconds = 0;        // time in the drafter's LM head (part of draft_seconds)
    double nanospec_prefill_seconds = 0;  // prefill's full head over the prompt rows for S (part of prefill_seconds)

    double prefill_tokens_per_second() const { return prefill_seconds > 0 ? n_prompt_tokens / prefill_seconds : 0; }
    double decode_tokens_per_second() const { return decode_seconds > 0 ? n_generated / decode_seconds : 0; }
    double acceptance_rate() const { return n_drafted ? double(n_accepted) / n_drafted : 0; }
    double ssd_hit_rate() const { return ssd_hits + ssd_misses ? double(ssd_hits) / (ssd_hits + ssd_misses) : 0; }
    double ssd_overlap_fraction() const { return verify_seconds > 0 ? ssd_overlap_seconds / verify_seconds : 0; }
    double mean_accepted_length() const { return n_rounds ? 1.0 + double(n_accepted) / n_rounds : 0; }
};

}  // namespace specgen
