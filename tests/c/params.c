/* The C API's share of the one parameter table: 0 threads = automatic, SPECGEN_SEED_RANDOM = a fresh
 * 63-bit seed, the device string checked by the engine's parser, messages from the table, and the
 * version string. Prints "version=..." and "seeds=A,B"; exit 0 when every check passed.
 * usage: params MODEL */
#include <stdio.h>
#include <string.h>

#include <specgen/specgen.h>

#define CHECK(cond, ...)                         \
    do {                                         \
        if (!(cond)) {                           \
            fprintf(stderr, "FAILED: " __VA_ARGS__); \
            fprintf(stderr, "\n");               \
            return 1;                            \
        }                                        \
    } while (0)

int main(int argc, char ** argv) {
    if (argc != 2) return 2;
    printf("version=%s\n", specgen_version());

    specgen_generator_params gp = specgen_generator_default_params();
    CHECK(gp.n_threads == 0 && gp.device == NULL && gp.draft_adaptive && gp.reuse_draft_hidden, "defaults");
    CHECK(gp.nanospec == SPECGEN_TOGGLE_AUTO && SPECGEN_TOGGLE_ON == 1 && SPECGEN_TOGGLE_OFF == 0, "nanospec toggle");
    gp.n_ctx = 0;
    CHECK(specgen_generator_init(argv[1], &gp) == NULL, "n_ctx 0 accepted");
    CHECK(strcmp(specgen_last_error(), "n_ctx must be in [1, 1048576], got 0") == 0, "message: %s", specgen_last_error());
    gp = specgen_generator_default_params();
    gp.device = "gpu";
    CHECK(specgen_generator_init(argv[1], &gp) == NULL, "device gpu accepted");
    CHECK(strstr(specgen_last_error(), "'cpu', 'cuda' or 'cuda:N'") != NULL, "message: %s", specgen_last_error());
    gp = specgen_generator_default_params();
    gp.draft_kind = (specgen_draft_kind) 9;
    CHECK(specgen_generator_init(argv[1], &gp) == NULL, "draft kind 9 accepted");
    CHECK(strstr(specgen_last_error(), "none, ngram, self, model") != NULL, "message: %s", specgen_last_error());
    gp = specgen_generator_default_params();
    gp.nanospec = (specgen_toggle) 3;
    CHECK(specgen_generator_init(argv[1], &gp) == NULL, "nanospec 3 accepted");
    CHECK(strstr(specgen_last_error(), "0 off, 1 on, 2 auto") != NULL, "message: %s", specgen_last_error());
    gp = specgen_generator_default_params();
    gp.nanospec = SPECGEN_TOGGLE_ON;  /* asked for without a drafter whose head it could cut */
    CHECK(specgen_generator_init(argv[1], &gp) == NULL, "nanospec on without a drafter accepted");
    CHECK(strstr(specgen_last_error(), "nanospec/frspec choose a draft LM head") != NULL, "message: %s", specgen_last_error());

    gp = specgen_generator_default_params();  /* n_threads 0: automatic */
    gp.n_ctx = 64;
    gp.device = "cpu";
    specgen_generator * gen = specgen_generator_init(argv[1], &gp);
    CHECK(gen != NULL, "init: %s", specgen_last_error());
    specgen_generate_params p = specgen_generate_default_params();
    CHECK(p.seed == SPECGEN_SEED_RANDOM && p.seed == (uint64_t) -1, "seed default");
    p.max_tokens = 1;
    specgen_stats a, b;
    CHECK(specgen_generate(gen, "Hi", &p, NULL, NULL, &a) == SPECGEN_STATUS_OK, "%s", specgen_last_error());
    CHECK(specgen_generate(gen, "Hi", &p, NULL, NULL, &b) == SPECGEN_STATUS_OK, "%s", specgen_last_error());
    CHECK(a.seed < (1ull << 63) && b.seed < (1ull << 63) && a.seed != b.seed, "random seeds %llu %llu",
          (unsigned long long) a.seed, (unsigned long long) b.seed);
    printf("seeds=%llu,%llu\n", (unsigned long long) a.seed, (unsigned long long) b.seed);
    p.max_tokens = -2;
    CHECK(specgen_generate(gen, "Hi", &p, NULL, NULL, &a) == SPECGEN_STATUS_INVALID_ARGUMENT, "max_tokens -2");
    CHECK(strcmp(specgen_last_error(), "max_tokens must be in [-1, 1073741824], got -2") == 0, "message: %s",
          specgen_last_error());
    specgen_generator_free(gen);
    fprintf(stderr, "ALL CHECKS PASSED\n");
    return 0;
}
