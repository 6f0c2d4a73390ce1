/* The request queue and long waits (specgen.h, "requests"): with n_parallel 4 and max_queued 2,
 * eight back-to-back submits admit 6 (4 decode, 2 wait) and refuse 2 with QUEUE_FULL; reading with
 * an infinite timeout or one of 1e10 s waits for the text (never TIMEOUT); a NaN timeout is an
 * INVALID_ARGUMENT. Prints "ALL CHECKS PASSED". */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <specgen/specgen.h>

static int failures;

static void fail(const char * what, const char * detail) {
    fprintf(stderr, "FAIL: %s: %s\n", what, detail ? detail : "");
    failures++;
}

/* Reads r to its end with one timeout; returns the bytes read. */
static size_t drain(specgen_request * r, double timeout_s) {
    size_t total = 0;
    for (;;) {
        char buf[64];
        size_t n = 0;
        specgen_status rc = specgen_request_next(r, buf, sizeof buf, &n, timeout_s);
        if (rc != SPECGEN_STATUS_OK) {
            fail("next with a long timeout", specgen_last_error());
            return total;
        }
        if (n == 0) return total;
        total += n;
    }
}

int main(int argc, char ** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL.gguf\n", argv[0]);
        return 2;
    }
    specgen_generator_params gp = specgen_generator_default_params();
    gp.n_threads = 2;
    gp.n_ctx = 128;
    gp.n_parallel = 4;
    gp.max_queued = 2;
    specgen_generator * gen = specgen_generator_init(argv[1], &gp);
    if (!gen) {
        fprintf(stderr, "init: %s\n", specgen_last_error());
        return 1;
    }
    specgen_generate_params p = specgen_generate_default_params();
    p.temperature = 0.0f;
    p.max_tokens = 8;
    p.ignore_eos = true;

    specgen_request * admitted[8];
    int n_admitted = 0, n_refused = 0;
    for (int i = 0; i < 8; ++i) {
        specgen_request * r = specgen_request_submit(gen, "The capital of France is", &p);
        if (r) admitted[n_admitted++] = r;
        else if (specgen_last_status() == SPECGEN_STATUS_QUEUE_FULL) n_refused++;
        else fail("submit", specgen_last_error());
    }
    if (n_admitted != 6 || n_refused != 2) {
        char detail[96];
        snprintf(detail, sizeof detail, "admitted %d, refused %d; want 6 and 2", n_admitted, n_refused);
        fail("queue admission", detail);
    }

    char nothing[8];
    size_t n = 0;
    if (n_admitted > 0 && specgen_request_next(admitted[0], nothing, sizeof nothing, &n, NAN) != SPECGEN_STATUS_INVALID_ARGUMENT)
        fail("NaN timeout", "not INVALID_ARGUMENT");

    for (int i = 0; i < n_admitted; ++i) {
        const size_t got = drain(admitted[i], i % 2 ? INFINITY : 1e10);
        if (got == 0) fail("text", "a request read with a long timeout gave no text");
        if (specgen_request_finish_reason(admitted[i]) != SPECGEN_FINISH_REASON_LENGTH) fail("finish reason", "not LENGTH");
        specgen_request_free(admitted[i]);
    }
    specgen_generator_free(gen);
    if (failures) return 1;
    fprintf(stderr, "ALL CHECKS PASSED\n");
    return 0;
}
