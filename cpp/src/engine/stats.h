// Statistics of one generation: THE field list every front-end publishes (Python's
// GenerationStats, the C struct specgen_stats, the CLI's summary). Names follow llama.cpp and vLLM
// (docs/DESIGN.md section 7). Add a field here and to specgen_stats (cpp/include/specgen/specgen.h);
// tests/test_stats.py checks that the Python and C front-ends publish every one.
//
// Row counts, so that their relation is plain: a speculative round verifies gamma + 1 target rows
// (n_verify_rows = n_drafted + n_rounds in all); n_verify_rows_reused of them had their layers run by
// the all-layers self drafter already; n_emitted_rows (k + 1 per round: the accepted drafts and the
// bonus token) are the rows the speed-of-light sums run over, so n_emitted_rows <= n_verify_rows and
// n_verify_rows_reused <= n_verify_rows.
#pragma once
#include <cstdint>
#include <vector>

namespace specgen {

// X(type, name, member, doc): the counters the engine accumulates, in publication order; `member`
// is the generation_stats member behind the published `name` (two keep their original member names
// until the engine code that writes them is renamed with them).
#define SPECGEN_STATS_FIELDS(X)                                                                                 \
    X(int64_t, n_prompt_tokens, n_prompt_tokens, "prompt tokens, BOS included")                                                 \
    X(int64_t, n_prompt_tokens_cached, n_prompt_tokens_cached, "prompt tokens whose KV rows were reused from a slot (prefix reuse)") \
    X(int64_t, n_generated, n_generated, "tokens emitted, the end-of-generation token excluded")                            \
    X(double, prefill_seconds, prefill_seconds, "time of the prompt's forward pass")                                            \
    X(double, decode_seconds, decode_seconds, "time of every step after the prefill")                                          \
    X(int64_t, n_rounds, n_rounds, "speculative rounds = target verification calls (0 for plain decoding)")              \
    X(int64_t, n_drafted, n_drafted, "draft tokens proposed")                                                             \
    X(int64_t, n_accepted, n_accepted, "draft tokens accepted")                                                            \
    X(double, draft_seconds, draft_seconds, "time drafting (part of decode_seconds)")                                         \
    X(double, verify_seconds, verify_seconds, "time verifying: target rows, processing, verification")                         \
    X(int64_t, n_verify_rows_reused, n_target_rows_reused, "verified rows whose layers the all-layers self drafter already ran")     \
    X(int64_t, n_emitted_rows, n_target_rows, "target rows on the emitted path (k + 1 per round): the bound sums' rows")       \
    X(double, sum_entropy, sum_entropy, "sum over the emitted rows of -sum_x p ln p (speed-of-light input)")                \
    X(double, sum_entropy2, sum_entropy2, "sum over the emitted rows of sum_x p (ln p)^2 (speed-of-light input)")            \
    X(double, sum_alpha, sum_alpha, "sum over accepted-path draft positions of sum_x min(p, q) (speed-of-light input)")   \
    X(int64_t, n_alpha, n_alpha, "positions in sum_alpha")                                                              \
    X(int64_t, ssd_hits, ssd_hits, "SSD: rounds whose draft came from the speculation cache")                            \
    X(int64_t, ssd_misses, ssd_misses, "SSD: rounds that ran the backup instead (the first round excluded)")               \
    X(int64_t, ssd_branches, ssd_branches, "SSD: branches (k, bonus) drafted to completion")                                 \
    X(double, ssd_wait_seconds, ssd_wait_seconds, "SSD: target idle, waiting for the drafter")                                   \
    X(double, ssd_overlap_seconds, ssd_overlap_seconds, "SSD: drafter busy while the target verified")                              \
    X(int64_t, vocab_set_size, vocab_set_size, "NanoSpec/FR-Spec: |S| at the end (0 without a reduced draft head)")           \
    X(double, draft_head_seconds, draft_head_seconds, "time in the drafter's LM head (part of draft_seconds)")                      \
    X(double, nanospec_prefill_seconds, nanospec_prefill_seconds, "NanoSpec: the seed head over the last prompt rows (part of prefill_seconds; under auto, of decode_seconds)")                                                                 \
    X(int64_t, auto_method, auto_method, "draft auto: the last round's method (0 none, 1 ngram, 2 self+nanospec, 3 draft model, 4 draft head)")            \
    X(double, auto_predicted_tokens_per_second, auto_predicted_tokens_per_second, "draft auto: the cost model's predicted decode tokens/s over the rounds (docs/ALGORITHMS.md section 8)") \
    X(int64_t, auto_n_switches, auto_n_switches, "draft auto: rounds whose method differs from the previous round's") \
    X(int64_t, n_draft_forwards, n_draft_forwards, "draft model or EAGLE-3 head: the drafter's forward passes that ran this request's rows") \
    X(int64_t, n_draft_batch_sequences, n_draft_batch_sequences, "draft model: sum over those forwards of the sequences each ran (/ n_draft_forwards: the mean draft batch)") \
    X(int64_t, n_draft_prompt_tokens_cached, n_draft_prompt_tokens_cached, "draft model or SSD drafter: prompt tokens whose rows its own KV cache kept from the slot's earlier requests (not forwarded again)") \
    X(int64_t, n_ngram_chained, n_ngram_chained, "ngram_chain: n-gram tokens that started a draft model's proposals (part of n_drafted)") \
    X(int64_t, n_ngram_chained_accepted, n_ngram_chained_accepted, "ngram_chain: those accepted (part of n_accepted)")

// X(name, doc): values derived from the counters (methods of generation_stats).
#define SPECGEN_STATS_DERIVED(X)                                                                      \
    X(prefill_tokens_per_second, "prompt rows the prefill computed (all but the last token, less those reused from the cache) / prefill_seconds; 0 when none was")                \
    X(decode_tokens_per_second, "n_generated / decode_seconds (0 without time)")                     \
    X(acceptance_rate, "n_accepted / n_drafted (0 without drafts)")                                  \
    X(mean_accepted_length, "tokens per target call: 1 + n_accepted / n_rounds (0 without rounds)")  \
    X(n_verify_rows, "target rows verified: gamma + 1 per round, n_drafted + n_rounds")             \
    X(ssd_hit_rate, "ssd_hits / (ssd_hits + ssd_misses)")                                            \
    X(ssd_overlap_fraction, "ssd_overlap_seconds / verify_seconds")

// X(name, doc): per draft position i (0-based), one count per round.
#define SPECGEN_STATS_POSITIONS(X)                                  \
    X(drafted_at, "rounds that drafted position i")                 \
    X(accepted_at, "rounds that accepted position i")

// Earlier names still published as aliases (Python dict keys): old name -> field.
#define SPECGEN_STATS_ALIASES(X)                       \
    X(n_target_rows, n_emitted_rows)                   \
    X(n_target_rows_reused, n_verify_rows_reused)

struct generation_stats {
    int64_t n_prompt_tokens = 0;
    int64_t n_prompt_tokens_cached = 0;  // prompt rows reused from a slot's cache, not prefilled
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
    int64_t n_target_rows_reused = 0;  // published as n_verify_rows_reused (see the list above)
    // Speed-of-light inputs: sums over the emitted target rows.
    int64_t n_target_rows = 0;     // published as n_emitted_rows
    double sum_entropy = 0;        // sum of -sum p ln p
    double sum_entropy2 = 0;       // sum of sum p (ln p)^2
    double sum_alpha = 0;          // sum over drafted positions of sum_x min(p, q)
    int64_t n_alpha = 0;
    // SSD / Saguaro (docs/ALGORITHMS.md section 4)
    int64_t ssd_hits = 0;           // rounds whose proposal came from the speculation cache
    int64_t ssd_misses = 0;         // rounds that ran the backup instead (the first round excluded)
    int64_t ssd_branches = 0;       // branches (k, bonus) drafted to completion
    double ssd_wait_seconds = 0;    // target idle: waiting for the drafter (hit branch, neural backup)
    double ssd_overlap_seconds = 0; // drafter busy while the target verified
    // NanoSpec / FR-Spec
    int64_t vocab_set_size = 0;    // |S| at the end
    double draft_head_seconds = 0;        // time in the drafter's LM head (part of draft_seconds)
    double nanospec_prefill_seconds = 0;  // the seed head over the last prompt rows for S (docs/ALGORITHMS.md section 3)
    // draft auto (speculative/auto/auto_speculator.h)
    int64_t auto_method = 0;                   // the last round's method (auto_method in cost_model.h)
    double auto_predicted_tokens_per_second = 0;
    int64_t auto_n_switches = 0;
    // Batched drafting with a draft model (speculative/draft_batch.h)
    int64_t n_draft_forwards = 0;         // draft forwards that ran this request's rows
    int64_t n_draft_batch_sequences = 0;  // sum over them of the sequences each one ran
    int64_t n_draft_prompt_tokens_cached = 0;  // prompt rows the drafter's own cache kept for the slot
    // n-gram tokens chained before a draft model's (params.ngram_chain, docs/ALGORITHMS.md section 6.1)
    int64_t n_ngram_chained = 0;           // proposed (part of n_drafted)
    int64_t n_ngram_chained_accepted = 0;  // accepted (part of n_accepted)

    // Reused rows cost nothing: counting them made a cached prompt "prefill" at billions of tokens/s.
    // The prompt's last token is forwarded by the first decode step, not by the prefill, so a prompt
    // cached up to its last token prefilled nothing (not one token in a few microseconds).
    double prefill_tokens_per_second() const {
        const int64_t computed = n_prompt_tokens - 1 - n_prompt_tokens_cached;
        return prefill_seconds > 0 && computed > 0 ? double(computed) / prefill_seconds : 0;
    }
    double decode_tokens_per_second() const { return decode_seconds > 0 ? n_generated / decode_seconds : 0; }
    double acceptance_rate() const { return n_drafted ? double(n_accepted) / n_drafted : 0; }
    double ssd_hit_rate() const { return ssd_hits + ssd_misses ? double(ssd_hits) / (ssd_hits + ssd_misses) : 0; }
    double ssd_overlap_fraction() const { return verify_seconds > 0 ? ssd_overlap_seconds / verify_seconds : 0; }
    // Tokens per target call (each round emits the accepted drafts plus one token).
    double mean_accepted_length() const { return n_rounds ? 1.0 + double(n_accepted) / n_rounds : 0; }
    int64_t n_verify_rows() const { return n_drafted + n_rounds; }
};

}  // namespace specgen
