/* An EAGLE-3 draft head through the C API: greedy generation with specgen_generator_params.draft_head
 * gives plain decoding's text (and the head's drafts are verified: some accepted), and the errors of a
 * missing head file, a GGUF that is not a head, and a head next to another drafter; with draft_kind AUTO
 * the head is one more candidate and the text stays plain decoding's. Prints the drafted
 * text on stdout (tests/test_eagle3.py compares it with the Python SDK's); exit 0 when every check passed.
 * usage: eagle3 TARGET HEAD MISSING_PATH PROMPT N_TOKENS */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <specgen/specgen.h>

#define CHECK(cond, ...)                             \
    do {                                             \
        if (!(cond)) {                               \
            fprintf(stderr, "FAILED: " __VA_ARGS__); \
            fprintf(stderr, "\n");                   \
            return 1;                                \
        }                                            \
    } while (0)

typedef struct {
    char text[8192];
    size_t len;
} text_buf;

static int append(const char * piece, size_t len, void * user) {
    text_buf * b = (text_buf *) user;
    if (b->len + len >= sizeof b->text) return 1;
    memcpy(b->text + b->len, piece, len);
    b->len += len;
    b->text[b->len] = '\0';
    return 0;
}

/* Greedy text of `prompt` on a generator loaded with gp; NULL generator: returns 1 with the error printed. */
static int generate(const char * target, const specgen_generator_params * gp, const char * prompt, int n_tokens,
                    text_buf * out, specgen_stats * st) {
    specgen_generator * gen = specgen_generator_init(target, gp);
    CHECK(gen != NULL, "init: %s", specgen_last_error());
    specgen_generate_params p = specgen_generate_default_params();
    p.temperature = 0.0f;
    p.max_tokens = n_tokens;
    p.ignore_eos = true;
    p.seed = 1;
    out->len = 0;
    out->text[0] = '\0';
    const specgen_status rc = specgen_generate(gen, prompt, &p, append, out, st);
    specgen_generator_free(gen);
    CHECK(rc == SPECGEN_STATUS_OK, "generate: %s", specgen_last_error());
    return 0;
}

int main(int argc, char ** argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: eagle3 TARGET HEAD MISSING_PATH PROMPT N_TOKENS\n");
        return 2;
    }
    const char * target = argv[1];
    const char * head = argv[2];
    const char * missing = argv[3];
    const char * prompt = argv[4];
    const int n_tokens = atoi(argv[5]);

    specgen_generator_params gp = specgen_generator_default_params();
    CHECK(gp.draft_head == NULL && gp.draft_kind == SPECGEN_DRAFT_KIND_NONE, "defaults");
    gp.n_threads = 1;
    gp.n_ctx = 256;
    static text_buf plain, drafted;
    specgen_stats st;
    if (generate(target, &gp, prompt, n_tokens, &plain, &st) != 0) return 1;
    CHECK(st.n_drafted == 0, "plain decoding drafted %lld tokens", (long long) st.n_drafted);

    gp.draft_head = "";  /* empty: no head, as NULL */
    if (generate(target, &gp, prompt, n_tokens, &drafted, &st) != 0) return 1;
    CHECK(st.n_drafted == 0 && strcmp(drafted.text, plain.text) == 0, "an empty draft_head drafted");

    gp.draft_head = head;
    gp.draft_max = 4;
    if (generate(target, &gp, prompt, n_tokens, &drafted, &st) != 0) return 1;
    CHECK(strcmp(drafted.text, plain.text) == 0, "head text differs from plain\n  head:  '%s'\n  plain: '%s'",
          drafted.text, plain.text);
    CHECK(st.n_generated == n_tokens, "generated %lld of %d tokens", (long long) st.n_generated, n_tokens);
    CHECK(st.n_rounds > 0 && st.n_drafted > 0 && st.n_accepted > 0 && st.n_accepted < st.n_drafted,
          "head rounds %lld drafted %lld accepted %lld", (long long) st.n_rounds, (long long) st.n_drafted,
          (long long) st.n_accepted);
    fprintf(stderr, "head: rounds %lld drafted %lld accepted %lld\n", (long long) st.n_rounds,
            (long long) st.n_drafted, (long long) st.n_accepted);

    /* A head path that does not exist: model load, the message names the knob and the path. */
    gp.draft_head = missing;
    CHECK(specgen_generator_init(target, &gp) == NULL, "missing head accepted");
    CHECK(specgen_last_status() == SPECGEN_STATUS_MODEL_LOAD, "missing head: status %s",
          specgen_status_name(specgen_last_status()));
    CHECK(strncmp(specgen_last_error(), "draft_head: ", 12) == 0 && strstr(specgen_last_error(), missing) != NULL,
          "missing head message: %s", specgen_last_error());
    fprintf(stderr, "missing head: %s\n", specgen_last_error());

    /* A GGUF that is not an EAGLE-3 head (the target itself): invalid argument naming the architecture. */
    gp.draft_head = target;
    CHECK(specgen_generator_init(target, &gp) == NULL, "a target as head accepted");
    CHECK(specgen_last_status() == SPECGEN_STATUS_INVALID_ARGUMENT, "target as head: status %s",
          specgen_status_name(specgen_last_status()));
    CHECK(strstr(specgen_last_error(), "expected 'eagle3'") != NULL, "target as head message: %s", specgen_last_error());

    /* auto takes the head as one more candidate: still plain decoding's text. */
    gp.draft_head = head;
    gp.draft_kind = SPECGEN_DRAFT_KIND_AUTO;
    static text_buf by_auto;
    if (generate(target, &gp, prompt, n_tokens, &by_auto, &st) != 0) return 1;
    CHECK(strcmp(by_auto.text, plain.text) == 0, "auto text differs from plain\n  auto:  '%s'\n  plain: '%s'",
          by_auto.text, plain.text);
    CHECK(st.auto_method >= 0 && st.auto_method <= 4, "auto_method %lld", (long long) st.auto_method);

    /* A head next to another drafter. */
    gp.draft_head = head;
    gp.draft_kind = SPECGEN_DRAFT_KIND_NGRAM;
    CHECK(specgen_generator_init(target, &gp) == NULL, "head with ngram accepted");
    CHECK(specgen_last_status() == SPECGEN_STATUS_INVALID_ARGUMENT, "head with ngram: status %s",
          specgen_status_name(specgen_last_status()));
    CHECK(strstr(specgen_last_error(), "draft_head drafts with an EAGLE-3 head") != NULL, "head with ngram message: %s",
          specgen_last_error());

    fwrite(drafted.text, 1, drafted.len, stdout);
    fprintf(stderr, "ALL CHECKS PASSED\n");
    return 0;
}
