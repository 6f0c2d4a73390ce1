/* Prints the complete specgen_stats of one greedy n-gram-speculative generation as key=value lines
 * (tests/test_stats.py compares them with the Python SDK's GenerationStats for the same request).
 * usage: stats_speculative MODEL PROMPT N_TOKENS */
#include <stdio.h>
#include <stdlib.h>

#include <specgen/specgen.h>

int main(int argc, char ** argv) {
    if (argc != 4) return 2;
    specgen_generator_params gp = specgen_generator_default_params();
    gp.n_threads = 1;
    gp.n_ctx = 256;
    gp.draft_kind = SPECGEN_DRAFT_KIND_NGRAM;
    gp.draft_max = 4;
    specgen_generator * gen = specgen_generator_init(argv[1], &gp);
    if (!gen) {
        fprintf(stderr, "%s\n", specgen_last_error());
        return 1;
    }
    specgen_generate_params p = specgen_generate_default_params();
    p.temperature = 0.0f;
    p.max_tokens = atoi(argv[3]);
    p.seed = 7;
    specgen_stats st;
    if (specgen_generate(gen, argv[2], &p, NULL, NULL, &st) != SPECGEN_STATUS_OK) {
        fprintf(stderr, "%s\n", specgen_last_error());
        return 1;
    }
    printf("n_prompt_tokens=%lld\nn_generated=%lld\nn_rounds=%lld\nn_drafted=%lld\nn_accepted=%lld\n",
           (long long) st.n_prompt_tokens, (long long) st.n_generated, (long long) st.n_rounds,
           (long long) st.n_drafted, (long long) st.n_accepted);
    printf("n_verify_rows=%lld\nn_verify_rows_reused=%lld\nn_emitted_rows=%lld\nn_alpha=%lld\nsum_alpha=%.9g\n",
           (long long) st.n_verify_rows, (long long) st.n_verify_rows_reused, (long long) st.n_emitted_rows,
           (long long) st.n_alpha, st.sum_alpha);
    printf("sum_entropy=%.9g\nsum_entropy2=%.9g\nvocab_set_size=%lld\nmean_accepted_length=%.9g\n", st.sum_entropy,
           st.sum_entropy2, (long long) st.vocab_set_size, st.mean_accepted_length);
    printf("drafted_at=");
    for (int i = 0; i < st.n_positions; ++i) printf("%s%lld", i ? "," : "", (long long) st.drafted_at[i]);
    printf("\naccepted_at=");
    for (int i = 0; i < st.n_positions; ++i) printf("%s%lld", i ? "," : "", (long long) st.accepted_at[i]);
    printf("\n");
    specgen_generator_free(gen);
    return 0;
}
