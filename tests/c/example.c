/* A C program using the public API as an application would: load, tokenize, generate greedily with
 * a streaming callback, print the statistics, free; and the error paths.
 *
 *     example MODEL PROMPT N_TOKENS
 *
 * stdout: exactly the generated continuation. stderr: checks and statistics. Exit 0 when every
 * check passed, 1 otherwise (the failing check is named on stderr). tests/test_c_api.py runs it. */
#include <specgen/specgen.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;

#define CHECK(cond, ...)                                  \
    do {                                                  \
        if (!(cond)) {                                    \
            fprintf(stderr, "CHECK FAILED: %s: ", #cond); \
            fprintf(stderr, __VA_ARGS__);                 \
            fprintf(stderr, "\n");                        \
            failures++;                                   \
        }                                                 \
    } while (0)

struct sink {
    char text[65536];
    size_t len;
    int n_pieces;
    int cancel_after; /* cancel once this many pieces arrived; 0: never */
};

static int on_piece(const char * piece, size_t len, void * user) {
    struct sink * s = (struct sink *) user;
    if (s->len + len < sizeof s->text) {
        memcpy(s->text + s->len, piece, len);
        s->len += len;
        s->text[s->len] = '\0';
    }
    s->n_pieces++;
    if (s->cancel_after == 0) {
        fwrite(piece, 1, len, stdout);
        fflush(stdout);
    }
    return s->cancel_after > 0 && s->n_pieces >= s->cancel_after;
}

int main(int argc, char ** argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s MODEL PROMPT N_TOKENS\n", argv[0]);
        return 2;
    }
    const char * model = argv[1];
    const char * prompt = argv[2];
    const int n_tokens = atoi(argv[3]);

    fprintf(stderr, "specgen %s\n", specgen_version());

    /* Error path: a missing file gives NULL and a message, and nothing crashes. */
    specgen_generator * bad = specgen_generator_init("/nonexistent/model.gguf", NULL);
    CHECK(bad == NULL, "loading a missing file returned a handle");
    CHECK(strlen(specgen_last_error()) > 0, "no last_error after a failed load");
    fprintf(stderr, "missing file: %s\n", specgen_last_error());
    CHECK(specgen_generator_init(NULL, NULL) == NULL, "NULL path accepted");
    specgen_generator_free(NULL); /* a no-op */

    /* Invalid generator parameters are refused before the file is read. */
    specgen_generator_params gp = specgen_generator_default_params();
    gp.draft_max = 0;
    CHECK(specgen_generator_init(model, &gp) == NULL, "draft_max 0 accepted");
    fprintf(stderr, "draft_max 0: %s\n", specgen_last_error());

    gp = specgen_generator_default_params();
    gp.n_threads = 2;
    specgen_generator * gen = specgen_generator_init(model, &gp);
    if (!gen) {
        fprintf(stderr, "CHECK FAILED: load %s: %s\n", model, specgen_last_error());
        return 1;
    }
    CHECK(specgen_n_vocab(gen) > 0, "n_vocab %d", specgen_n_vocab(gen));
    CHECK(specgen_n_ctx(gen) == gp.n_ctx, "n_ctx %d", specgen_n_ctx(gen));
    CHECK(strcmp(specgen_load_warnings(gen), "") == 0, "load warnings: %s", specgen_load_warnings(gen));
    CHECK(strcmp(specgen_load_warnings(NULL), "") == 0 && strstr(specgen_last_error(), "NULL"), "NULL generator");

    /* Tokenize: ask for the size, then fill; detokenize back. */
    const int32_t n_prompt = specgen_tokenize(gen, prompt, strlen(prompt), NULL, 0, true, false);
    CHECK(n_prompt > 0, "tokenize size query returned %d", n_prompt);
    int32_t * tokens = (int32_t *) malloc(sizeof(int32_t) * (size_t) (n_prompt > 0 ? n_prompt : 1));
    CHECK(specgen_tokenize(gen, prompt, strlen(prompt), tokens, n_prompt, true, false) == n_prompt, "tokenize");
    CHECK(tokens[0] == specgen_token_bos(gen), "first token %d is not BOS %d", tokens[0], specgen_token_bos(gen));
    fprintf(stderr, "prompt tokens:");
    for (int32_t i = 0; i < n_prompt; ++i) fprintf(stderr, " %d", tokens[i]);
    fprintf(stderr, "\n");
    const int32_t n_text = specgen_detokenize(gen, tokens, n_prompt, NULL, 0, true);
    CHECK(n_text == (int32_t) strlen(prompt), "detokenize size %d, prompt has %zu bytes", n_text, strlen(prompt));
    char * text = (char *) malloc((size_t) n_text + 1);
    CHECK(specgen_detokenize(gen, tokens, n_prompt, text, n_text + 1, true) == n_text, "detokenize");
    CHECK(strcmp(text, prompt) == 0, "detokenize(tokenize(prompt)) = '%s'", text);
    const int32_t bad_id = specgen_n_vocab(gen);
    CHECK(specgen_detokenize(gen, &bad_id, 1, text, n_text + 1, false) == SPECGEN_STATUS_INVALID_ARGUMENT,
          "out-of-range id accepted");
    free(text);

    /* Invalid sampling parameters: a status, a message, and the generator stays usable. */
    specgen_generate_params p = specgen_generate_default_params();
    p.temperature = -1.0f;
    specgen_stats st;
    specgen_status rc = specgen_generate(gen, prompt, &p, NULL, NULL, &st);
    CHECK(rc == SPECGEN_STATUS_INVALID_ARGUMENT, "temperature -1 gave %s", specgen_status_name(rc));
    fprintf(stderr, "temperature -1: %s\n", specgen_last_error());

    /* Greedy generation, streamed. */
    p = specgen_generate_default_params();
    p.temperature = 0.0f;
    p.max_tokens = n_tokens;
    p.seed = 42;
    static struct sink s;
    memset(&s, 0, sizeof s);
    rc = specgen_generate_tokens(gen, tokens, n_prompt, &p, on_piece, &s, &st);
    CHECK(rc == SPECGEN_STATUS_OK, "generate: %s: %s", specgen_status_name(rc), specgen_last_error());
    CHECK(st.n_generated > 0 && st.n_generated <= n_tokens, "n_generated %lld", (long long) st.n_generated);
    CHECK(st.n_prompt_tokens == n_prompt, "n_prompt_tokens %lld", (long long) st.n_prompt_tokens);
    CHECK(st.seed == 42, "seed %llu", (unsigned long long) st.seed);
    CHECK(st.finish_reason == SPECGEN_FINISH_REASON_LENGTH || st.finish_reason == SPECGEN_FINISH_REASON_EOS,
          "finish_reason %d", (int) st.finish_reason);
    fprintf(stderr, "\nstats: n_prompt_tokens=%lld n_generated=%lld prefill=%.2f tok/s decode=%.2f tok/s finish=%d\n",
            (long long) st.n_prompt_tokens, (long long) st.n_generated, st.prefill_tokens_per_second,
            st.decode_tokens_per_second, (int) st.finish_reason);
    free(tokens);

    /* Cancellation: the callback's non-zero return stops the generation after one piece. */
    struct sink * c = (struct sink *) calloc(1, sizeof *c);
    c->cancel_after = 1;
    p.max_tokens = 8;
    rc = specgen_generate(gen, prompt, &p, on_piece, c, &st);
    CHECK(rc == SPECGEN_STATUS_CANCELLED, "cancel gave %s", specgen_status_name(rc));
    CHECK(st.finish_reason == SPECGEN_FINISH_REASON_CANCELLED, "finish_reason %d", (int) st.finish_reason);
    CHECK(c->n_pieces == 1, "%d pieces after cancelling", c->n_pieces);
    CHECK(strncmp(c->text, s.text, c->len) == 0, "cancelled run's text '%s' is not a prefix of '%s'", c->text, s.text);
    free(c);

    specgen_generator_free(gen);
    fprintf(stderr, failures ? "FAILED: %d checks\n" : "ALL CHECKS PASSED\n", failures);
    return failures ? 1 : 0;
}
