/* Requests on one generator from 4 threads (specgen.h, "requests"): every request's greedy text
 * equals the text of the same prompt run alone (serially, before). Prints "ALL CHECKS PASSED". */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <specgen/specgen.h>

#define N_THREADS 4
#define N_PER_THREAD 3
#define MAX_TEXT 4096

static const char * PROMPTS[] = {"The capital of France is", "def fibonacci(n):", "Once upon a time",
                                 "The printing press"};
#define N_PROMPTS 4

static specgen_generator * gen;
static int n_tokens;
static char serial[N_PROMPTS][MAX_TEXT];
static int failures;
static pthread_mutex_t fail_mu = PTHREAD_MUTEX_INITIALIZER;

static void fail(const char * what, const char * detail) {
    pthread_mutex_lock(&fail_mu);
    fprintf(stderr, "FAIL: %s: %s\n", what, detail ? detail : "");
    failures++;
    pthread_mutex_unlock(&fail_mu);
}

/* Runs one request to its end through specgen_request_next (polling with a timeout). */
static int run(const char * prompt, char * out) {
    specgen_generate_params p = specgen_generate_default_params();
    p.temperature = 0.0f;
    p.max_tokens = n_tokens;
    specgen_request * r = specgen_request_submit(gen, prompt, &p);
    if (!r) {
        fail("submit", specgen_last_error());
        return -1;
    }
    size_t used = 0;
    for (;;) {
        char buf[7];  /* small on purpose: pieces come out in several reads */
        size_t n = 0;
        specgen_status rc = specgen_request_next(r, buf, sizeof buf, &n, 0.05);
        if (rc == SPECGEN_STATUS_TIMEOUT) continue;
        if (rc != SPECGEN_STATUS_OK) {
            fail("next", specgen_last_error());
            break;
        }
        if (n == 0) break;
        if (used + n >= MAX_TEXT) n = MAX_TEXT - 1 - used;
        memcpy(out + used, buf, n);
        used += n;
    }
    out[used] = '\0';
    if (!specgen_request_done(r)) fail("done", "request not done after its last piece");
    if (specgen_request_finish_reason(r) == SPECGEN_FINISH_REASON_NONE) fail("finish reason", "NONE after the end");
    specgen_stats st;
    if (specgen_request_stats(r, &st) != SPECGEN_STATUS_OK || st.n_generated <= 0) fail("stats", specgen_last_error());
    specgen_request_free(r);
    return 0;
}

static void * worker(void * arg) {
    const int id = (int)(size_t)arg;
    char text[MAX_TEXT];
    for (int j = 0; j < N_PER_THREAD; ++j) {
        const int k = (id + j) % N_PROMPTS;
        if (run(PROMPTS[k], text) == 0 && strcmp(text, serial[k]) != 0) fail("text differs from serial", PROMPTS[k]);
    }
    return NULL;
}

int main(int argc, char ** argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL.gguf N_TOKENS [N_PARALLEL]\n", argv[0]);
        return 2;
    }
    n_tokens = atoi(argv[2]);
    specgen_generator_params gp = specgen_generator_default_params();
    gp.n_threads = 2;
    gp.n_ctx = 256;
    gp.n_parallel = argc > 3 ? atoi(argv[3]) : 4;
    gen = specgen_generator_init(argv[1], &gp);
    if (!gen) {
        fprintf(stderr, "init: %s\n", specgen_last_error());
        return 1;
    }
    for (int k = 0; k < N_PROMPTS; ++k) run(PROMPTS[k], serial[k]);

    /* A cancelled request frees its slot at once; cancel is idempotent. */
    specgen_generate_params p = specgen_generate_default_params();
    p.max_tokens = 200;
    specgen_request * c = specgen_request_submit(gen, "Tell me a long story.", &p);
    if (!c || specgen_request_cancel(c) != SPECGEN_STATUS_OK || specgen_request_cancel(c) != SPECGEN_STATUS_OK)
        fail("cancel", specgen_last_error());
    else if (specgen_request_finish_reason(c) != SPECGEN_FINISH_REASON_CANCELLED &&
             specgen_request_finish_reason(c) != SPECGEN_FINISH_REASON_LENGTH)
        fail("cancel", "finish reason is not CANCELLED");
    specgen_request_free(c);

    pthread_t threads[N_THREADS];
    for (int i = 0; i < N_THREADS; ++i) pthread_create(&threads[i], NULL, worker, (void *)(size_t)i);
    for (int i = 0; i < N_THREADS; ++i) pthread_join(threads[i], NULL);
    specgen_generator_free(gen);
    if (failures) return 1;
    fprintf(stderr, "ALL CHECKS PASSED\n");
    return 0;
}
