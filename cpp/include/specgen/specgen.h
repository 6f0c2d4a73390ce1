/* specgen: the public C API.
 *
 * A `specgen_generator` is a loaded GGUF target model plus its (optional) speculative drafter. It
 * tokenizes, detokenizes and generates; a generation streams its text through a callback and
 * reports statistics. Speculative decoding (a draft model, the target's own first layers, n-gram
 * prompt lookup, an EAGLE-3 draft head; token-wise or block verification; NanoSpec; SSD) is chosen
 * when the generator is loaded and never changes the output distribution: greedy decoding gives the
 * same tokens with or without it.
 *
 *     specgen_generator_params gp = specgen_generator_default_params();
 *     gp.draft_kind = SPECGEN_DRAFT_KIND_NGRAM;
 *     specgen_generator * gen = specgen_generator_init("model.gguf", &gp);
 *     if (!gen) { fprintf(stderr, "%s\n", specgen_last_error()); return 1; }
 *     specgen_generate_params p = specgen_generate_default_params();
 *     p.temperature = 0.0f;
 *     specgen_stats st;
 *     specgen_status rc = specgen_generate(gen, "Once upon a time", &p, on_piece, NULL, &st);
 *     specgen_generator_free(gen);
 *
 * Conventions (valid for every function below unless its comment says otherwise):
 *   - Functions that can fail return a `specgen_status` (0 ok, a negative code otherwise) or a
 *     negative `specgen_status` in place of a count, or NULL for constructors. On every failure the
 *     calling thread's `specgen_last_error()` is set to a one-line message. It is not cleared on
 *     success (like errno): read it only right after a failure.
 *   - No function throws, aborts or exits; C++ exceptions never cross this boundary.
 *   - Strings in and out are UTF-8. Pointers passed in are borrowed for the duration of the call
 *     only; nothing is retained after it returns.
 *   - A generator may be used from any number of threads at once. Concurrent requests (blocking
 *     specgen_generate calls from several threads, or specgen_request handles) are decoded together,
 *     up to n_parallel at a time, each exactly as it would be alone (greedy: the same tokens; a
 *     fixed seed: the same sample). Requests beyond n_parallel wait in the generator's queue (at
 *     most max_queued of them; one more is refused with SPECGEN_STATUS_QUEUE_FULL); a request only
 *     ever ends when it finishes or its own caller cancels or frees it, never because of another.
 */
#ifndef SPECGEN_H
#define SPECGEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32) && !defined(__GNUC__)
#  ifdef SPECGEN_BUILD
#    define SPECGEN_API __declspec(dllexport)
#  else
#    define SPECGEN_API __declspec(dllimport)
#  endif
#else
#  define SPECGEN_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- status and errors ------------------------------------------------------------------------ */

typedef enum specgen_status {
    SPECGEN_STATUS_OK = 0,
    SPECGEN_STATUS_INVALID_ARGUMENT = -1, /* a NULL handle, a parameter outside its domain, a bad id */
    SPECGEN_STATUS_MODEL_LOAD = -2,       /* a model file missing, truncated, corrupt or unsupported */
    SPECGEN_STATUS_CONTEXT_OVERFLOW = -3, /* the prompt does not fit into n_ctx */
    SPECGEN_STATUS_NOT_IMPLEMENTED = -4,  /* a feature this build or version does not provide */
    SPECGEN_STATUS_CANCELLED = -5,        /* the caller's callback asked to stop */
    SPECGEN_STATUS_INTERNAL = -6,         /* anything else (out of memory, an internal error) */
    SPECGEN_STATUS_QUEUE_FULL = -7,       /* every slot is busy and max_queued requests wait: retry later */
    SPECGEN_STATUS_TIMEOUT = -8,          /* specgen_request_next: nothing new within the timeout */
} specgen_status;

/* The message of the calling thread's most recent failure, "" if none failed yet. The string is
 * owned by the library and valid until the next failing call on the same thread. Never NULL. */
SPECGEN_API const char * specgen_last_error(void);

/* The status of the calling thread's most recent failure (OK if none failed yet): how a NULL from a
 * constructor (specgen_request_submit: QUEUE_FULL, CONTEXT_OVERFLOW, ...) tells what went wrong. */
SPECGEN_API specgen_status specgen_last_status(void);

/* "ok", "invalid argument", ...; "unknown" for values outside the enum. Static storage. */
SPECGEN_API const char * specgen_status_name(specgen_status status);

/* The library version, "MAJOR.MINOR.PATCH" (CMake's project(VERSION), the same string as the
 * Python package's specgen.__version__ and `specgen --version`). Static storage. */
SPECGEN_API const char * specgen_version(void);

/* ---- loading a generator ---------------------------------------------------------------------- */

typedef struct specgen_generator specgen_generator; /* opaque */

typedef enum specgen_ssd_schedule {
    SPECGEN_SSD_SCHEDULE_UNIFORM = 0,   /* F_k = ssd_fanout */
    SPECGEN_SSD_SCHEDULE_GEOMETRIC = 1, /* F_k = F_0 * a^(k/2), a = measured acceptance */
} specgen_ssd_schedule;

typedef enum specgen_ssd_backup {
    SPECGEN_SSD_BACKUP_NEURAL = 0, /* draft K tokens now with the drafter */
    SPECGEN_SSD_BACKUP_FAST = 1,   /* n-gram proposal (point masses) */
} specgen_ssd_backup;

typedef enum specgen_draft_kind {
    SPECGEN_DRAFT_KIND_NONE = 0,  /* plain (autoregressive) decoding */
    SPECGEN_DRAFT_KIND_MODEL = 1, /* a separate draft GGUF (draft_path) with the target's vocabulary */
    SPECGEN_DRAFT_KIND_SELF = 2,  /* the target's own first self_layers layers (early exit) */
    SPECGEN_DRAFT_KIND_NGRAM = 3, /* prompt lookup: suffix matching over the token history */
    SPECGEN_DRAFT_KIND_AUTO = 4,  /* picks none / ngram / self+NanoSpec [/ draft model / draft head] and gamma per round (cost model) */
} specgen_draft_kind;

typedef enum specgen_verify {
    SPECGEN_VERIFY_TOKEN = 0, /* token-wise rejection sampling */
    SPECGEN_VERIFY_BLOCK = 1, /* block / hierarchical verification (HSD): accepts at least as much */
} specgen_verify;

/* KV cache element types (llama.cpp's -ctk / -ctv names f32, f16, q8_0). */
typedef enum specgen_kv_type {
    SPECGEN_KV_TYPE_F32 = 0,
    SPECGEN_KV_TYPE_F16 = 1,
    SPECGEN_KV_TYPE_Q8_0 = 2,
} specgen_kv_type;

/* A knob that is on, off, or left to the engine's measured default (llama.cpp's -fa on|off|auto). ON and
   OFF are 1 and 0: a program that assigned true / false keeps its meaning. */
typedef enum specgen_toggle {
    SPECGEN_TOGGLE_OFF = 0,
    SPECGEN_TOGGLE_ON = 1,
    SPECGEN_TOGGLE_AUTO = 2,
} specgen_toggle;

typedef struct specgen_generator_params {
    int32_t n_ctx;           /* context length in tokens, [1, 1048576]; default 4096 */
    int32_t n_threads;       /* compute threads, [0, 512]; 0 (default): automatic, all cores (at most 8) */
    int32_t n_threads_draft; /* SSD drafter threads, [0, 512]; 0: half of n_threads (the target keeps the rest) */

    /* Speculation. */
    specgen_draft_kind draft_kind; /* default SPECGEN_DRAFT_KIND_NONE */
    const char * draft_path;       /* the draft GGUF for SPECGEN_DRAFT_KIND_MODEL; optional for AUTO (one more candidate) */
    specgen_verify verify;         /* default SPECGEN_VERIFY_BLOCK */
    int32_t draft_max;             /* gamma, the most tokens drafted per round, [1, 64]; default 8 */
    int32_t draft_min;             /* rounds drafting fewer fall back to plain decoding, [0, draft_max] */
    float draft_p_min;             /* stop drafting below this drafter top probability, [0, 1];
                                      -1 (default): automatic, 0.5 with NanoSpec, else 0 (off) */
    int32_t self_layers;           /* self drafter: layers run before exiting; 0: all */
    int32_t ngram_max;             /* n-gram drafter: longest suffix matched, [ngram_min, 64]; default 4 */
    int32_t ngram_min;             /* shortest suffix matched, >= 1; default 1 */
    specgen_toggle nanospec;       /* draft head over the in-context vocabulary (NanoSpec); default AUTO: on for
                                      a draft model's head, off otherwise */
    int32_t nanospec_capacity;     /* NanoSpec vocabulary capacity, [16, 1048576]; default 3072 */
    int32_t nanospec_topk;         /* target top-k ids added to it per row, [1, 64]; default 16 */
    int32_t frspec;                /* FR-Spec baseline: draft head over the N most frequent tokens; 0 off */
    const char * frspec_path;      /* token frequency table: FR-Spec's ids (required when frspec > 0; NanoSpec's prompt seed ranks the vocabulary itself); copied */
    bool ssd;                      /* Saguaro: draft concurrently with verification (needs SELF or MODEL; nanospec/frspec apply) */
    int32_t ssd_fanout;            /* SSD: bonus candidates per outcome (F, or F_0 when geometric), [1, 64]; default 4 */
    specgen_ssd_schedule ssd_fanout_schedule; /* default SPECGEN_SSD_SCHEDULE_UNIFORM */
    specgen_ssd_backup ssd_backup; /* on a cache miss; default SPECGEN_SSD_BACKUP_NEURAL */
    int32_t ssd_budget;            /* SSD: most branches drafted per round, -1: until the verdict; default -1 */
    float saguaro_c;               /* Saguaro sampling weight on the drafter's top-F tokens, [0, 1]; 1 = off */
    /* Added in 0.1: */
    const char * device;           /* "cpu", "cuda" or "cuda:N"; NULL: "cpu" */
    bool draft_adaptive;           /* adapt gamma to acceptance (shrink after a rejection, grow after a full accept); default true */
    bool reuse_draft_hidden;       /* all-layers self drafter: verification reuses its hidden states; default true */
    /* Added in 0.2 (serving): */
    int32_t n_parallel;            /* sequences decoded together, each in its own KV slot, [1, 256]; default 1 (ssd: 1) */
    int32_t max_queued;            /* requests that may wait for a slot, [0, 1048576]; default 256 */
    specgen_kv_type type_k;        /* KV cache key type (llama.cpp -ctk); default SPECGEN_KV_TYPE_F32 */
    specgen_kv_type type_v;        /* KV cache value type (llama.cpp -ctv); default SPECGEN_KV_TYPE_F32 */
    bool batch_draft_policy;       /* with 2+ sequences per step, draft lengths from the step cost model; default true */
    int32_t ngram_chain;           /* with a draft model: an n-gram match of >= N tokens starts a proposal, the model drafts
                                      on; 0: off; default 4 */
    /* Added with EAGLE-3 draft heads: */
    const char * draft_head;       /* an EAGLE-3 draft head GGUF (llama.cpp's eagle3 layout) drafting from the
                                      target's hidden states, with draft_kind NONE, or AUTO (one more
                                      candidate); NULL or "" (default): none */
} specgen_generator_params;

/* The defaults listed above. */
SPECGEN_API specgen_generator_params specgen_generator_default_params(void);

/* Maps and validates the GGUF at `model_path` (and the draft model, if any) and builds the
 * generator. `params` may be NULL for the defaults.
 * Returns a new generator, owned by the caller and released with specgen_generator_free(); or NULL
 * with specgen_last_error() set: an invalid parameter or NULL path (invalid argument), a missing,
 * corrupt or unsupported file or a draft model with another vocabulary (model load; a draft head's
 * message starts with "draft_head"), an EAGLE-3 head that does not fit the target (invalid argument),
 * a speculative option this build does not provide (not implemented). Nothing is left allocated on
 * failure. */
SPECGEN_API specgen_generator * specgen_generator_init(const char * model_path,
                                                       const specgen_generator_params * params);

/* Releases the generator and unmaps its files. NULL is a no-op. */
SPECGEN_API void specgen_generator_free(specgen_generator * gen);

/* What the load found worth telling the user without failing, one line each ending in '\n'; "" when
 * nothing (and for a NULL generator, with last_error set). Today: a KV cache larger than the memory
 * available at load, which loads because its pages become resident only as sequences write them, so
 * requests that fill it run out of memory. Valid until specgen_generator_free(). */
SPECGEN_API const char * specgen_load_warnings(const specgen_generator * gen);

/* Model facts; 0 (and last_error set) for a NULL generator. */
SPECGEN_API int32_t specgen_n_vocab(const specgen_generator * gen);
SPECGEN_API int32_t specgen_n_ctx(const specgen_generator * gen);
/* Special token ids, -1 when the model has none (or gen is NULL). */
SPECGEN_API int32_t specgen_token_bos(const specgen_generator * gen);
SPECGEN_API int32_t specgen_token_eos(const specgen_generator * gen);

/* ---- tokens ----------------------------------------------------------------------------------- */

/* Tokenizes text[0, text_len) with the model's tokenizer. add_special prepends BOS (and appends
 * EOS) when the model asks for it; parse_special matches control tokens written as text
 * ("<start_of_turn>"). Invalid UTF-8 is kept byte for byte.
 * Returns n >= 0, the number of tokens of the text. When n <= n_tokens_max the tokens were written
 * to tokens[0, n); when n > n_tokens_max nothing was written: call again with a buffer of n.
 * (tokens may be NULL when n_tokens_max is 0.) Returns a negative specgen_status on failure
 * (NULL gen or text, n_tokens_max < 0, more than INT32_MAX tokens) with nothing written. */
SPECGEN_API int32_t specgen_tokenize(const specgen_generator * gen, const char * text, size_t text_len,
                                     int32_t * tokens, int32_t n_tokens_max, bool add_special,
                                     bool parse_special);

/* The bytes of tokens[0, n_tokens) (skip_special drops control tokens). Like snprintf:
 * returns n >= 0, the length in bytes without a terminator; when n < buf_size the text and a
 * terminating NUL were written to buf, else nothing was written: call again with n + 1 bytes.
 * (buf may be NULL when buf_size is 0.) The bytes are what the tokens spell and may be invalid
 * UTF-8 for arbitrary ids. Returns a negative specgen_status on failure (NULL gen, a token id
 * outside [0, n_vocab), n_tokens < 0) with nothing written. */
SPECGEN_API int32_t specgen_detokenize(const specgen_generator * gen, const int32_t * tokens, int32_t n_tokens,
                                       char * buf, int32_t buf_size, bool skip_special);

/* ---- generation ------------------------------------------------------------------------------- */

/* seed value asking for a fresh random seed: (uint64_t) -1, the -1 of the CLI and the Python SDK */
#define SPECGEN_SEED_RANDOM UINT64_MAX

typedef struct specgen_generate_params {
    int32_t max_tokens;     /* most tokens generated, [-1, 2^30]; -1: until EOS or n_ctx; default 256 */
    float temperature;      /* 0: greedy; >= 0 and finite; default 0.8 */
    int32_t top_k;          /* 0: off; >= 0; default 40 */
    float top_p;            /* (0, 1], 1: off; default 0.95 */
    float min_p;            /* [0, 1], 0: off; default 0.05 */
    float repeat_penalty;   /* > 0, 1: off; default 1 */
    int32_t repeat_last_n;  /* tokens the penalty looks back, >= -1 (-1: all, 0: off); default 64 */
    uint64_t seed;          /* sampling seed; SPECGEN_SEED_RANDOM (default): a fresh random one */
    const char * const * stop; /* n_stop stop strings, each <= 4096 bytes ("" ignored); NULL if n_stop is 0 */
    size_t n_stop;
    bool ignore_eos;        /* keep generating past end-of-generation tokens */
    bool add_bos;           /* prepend BOS when the model asks for it and the prompt lacks it; default true */
} specgen_generate_params;

/* The defaults listed above. */
SPECGEN_API specgen_generate_params specgen_generate_default_params(void);

typedef enum specgen_finish_reason {
    SPECGEN_FINISH_REASON_NONE = 0,      /* the generation did not start (an error before the prefill) */
    SPECGEN_FINISH_REASON_STOP = 1,      /* a stop string was generated (it is not part of the text) */
    SPECGEN_FINISH_REASON_LENGTH = 2,    /* max_tokens reached, or the context is full */
    SPECGEN_FINISH_REASON_EOS = 3,       /* the model emitted an end-of-generation token */
    SPECGEN_FINISH_REASON_CANCELLED = 4, /* the callback returned non-zero */
} specgen_finish_reason;

#define SPECGEN_MAX_DRAFT 64 /* the largest draft_max */

typedef struct specgen_stats {
    specgen_finish_reason finish_reason;
    uint64_t seed;                     /* the seed used (the drawn one for SPECGEN_SEED_RANDOM) */
    int64_t n_prompt_tokens;           /* BOS included */
    int64_t n_prompt_tokens_cached;    /* prompt tokens whose KV rows were reused from a slot (prefix reuse) */
    int64_t n_generated;               /* tokens emitted, end-of-generation token excluded */
    double prefill_seconds;
    double decode_seconds;
    double prefill_tokens_per_second;  /* n_prompt_tokens / prefill_seconds (0 if no time) */
    double decode_tokens_per_second;   /* n_generated / decode_seconds */
    /* Speculation (all 0 for plain decoding). */
    int64_t n_rounds;                  /* target verification calls */
    int64_t n_drafted;                 /* draft tokens proposed */
    int64_t n_accepted;                /* draft tokens accepted */
    double acceptance_rate;            /* n_accepted / n_drafted */
    double mean_accepted_length;       /* tokens per target call: 1 + n_accepted / n_rounds */
    double draft_seconds;
    double verify_seconds;
    /* SSD (all 0 without ssd). */
    int64_t ssd_hits;                  /* rounds whose draft came from the speculation cache */
    int64_t ssd_misses;                /* rounds that ran the backup (first round excluded) */
    double ssd_hit_rate;               /* hits / (hits + misses) */
    int64_t ssd_branches;              /* branches drafted */
    double ssd_wait_seconds;           /* target idle, waiting for the drafter */
    double ssd_overlap_fraction;       /* drafter busy time during verification / verify time */
    /* The rest of the field list (docs/DESIGN.md section 7; cpp/src/engine/stats.h). Row counts: a
     * round verifies gamma + 1 target rows, n_verify_rows = n_drafted + n_rounds in all;
     * n_verify_rows_reused <= n_verify_rows of them reused the self drafter's layers; n_emitted_rows
     * (k + 1 per round) are the rows the speed-of-light sums run over. */
    int64_t n_verify_rows;             /* target rows verified, n_drafted + n_rounds */
    int64_t n_verify_rows_reused;      /* verified rows whose layers the all-layers self drafter already ran */
    int64_t n_emitted_rows;            /* target rows on the emitted path (k + 1 per round) */
    double sum_entropy;                /* speed-of-light input: sum over emitted rows of -sum p ln p */
    double sum_entropy2;               /* speed-of-light input: sum over emitted rows of sum p (ln p)^2 */
    double sum_alpha;                  /* speed-of-light input: sum over emitted draft positions of sum min(p, q) */
    int64_t n_alpha;                   /* positions in sum_alpha */
    double ssd_overlap_seconds;        /* SSD: drafter busy while the target verified */
    int64_t vocab_set_size;            /* NanoSpec / FR-Spec: |S| at the end */
    double draft_head_seconds;         /* time in the drafter's LM head (part of draft_seconds) */
    double nanospec_prefill_seconds;   /* NanoSpec: the prefill's full head pass (part of prefill_seconds) */
    int64_t auto_method;               /* draft auto: the last round's method (0 none, 1 ngram, 2 self+nanospec, 3 draft model, 4 draft head) */
    double auto_predicted_tokens_per_second; /* draft auto: the cost model's predicted decode tokens/s */
    int64_t auto_n_switches;           /* draft auto: rounds whose method differs from the previous round's */
    int64_t n_draft_forwards;          /* draft model: draft forwards that ran this request's rows */
    int64_t n_draft_batch_sequences;   /* draft model: sum over them of the sequences each ran (the mean draft batch) */
    int64_t n_draft_prompt_tokens_cached; /* draft model or SSD drafter: prompt tokens whose rows its own KV cache kept (not forwarded again) */
    int64_t n_ngram_chained;           /* ngram_chain: n-gram tokens that started a draft model's proposals (part of n_drafted) */
    int64_t n_ngram_chained_accepted;  /* ngram_chain: those accepted (part of n_accepted) */
    /* Per draft position i < n_positions: rounds that drafted / accepted position i. */
    int32_t n_positions;               /* <= SPECGEN_MAX_DRAFT (draft_max is at most 64) */
    int64_t drafted_at[SPECGEN_MAX_DRAFT];
    int64_t accepted_at[SPECGEN_MAX_DRAFT];
} specgen_stats;

/* Called with each new piece of text: whole UTF-8 characters, never empty, not NUL-terminated
 * (exactly len bytes at piece, valid during the call only). Return 0 to go on, non-zero to cancel. */
typedef int (*specgen_piece_callback)(const char * piece, size_t len, void * user);

/* Continues `prompt` (tokenized as specgen_tokenize with add_special true, parse_special true)
 * and streams the continuation through `on_piece` (may be NULL), with user passed through.
 * `params` may be NULL for the defaults. `stats` (may be NULL) receives the statistics.
 * Returns SPECGEN_STATUS_OK when the generation finished (stats->finish_reason says why);
 * SPECGEN_STATUS_CANCELLED when on_piece returned non-zero (the text streamed so far stands, stats
 * are filled, finish_reason CANCELLED); otherwise invalid argument (NULL gen or prompt, a parameter
 * outside its domain), context overflow (the prompt does not fit into n_ctx) or internal, with
 * stats zeroed except seed (text may have been streamed before an internal error). The generator
 * stays usable after every return code; the prompt is never retained. */
SPECGEN_API specgen_status specgen_generate(specgen_generator * gen, const char * prompt,
                                            const specgen_generate_params * params,
                                            specgen_piece_callback on_piece, void * user,
                                            specgen_stats * stats);

/* As specgen_generate, with a prompt of token ids used as they are (BOS added per params->add_bos).
 * Ids outside [0, n_vocab) or an empty prompt without BOS: invalid argument. */
SPECGEN_API specgen_status specgen_generate_tokens(specgen_generator * gen, const int32_t * prompt,
                                                   int32_t n_prompt, const specgen_generate_params * params,
                                                   specgen_piece_callback on_piece, void * user,
                                                   specgen_stats * stats);

/* ---- requests: several generations on one generator ---------------------------------------------
 *
 * A request is a handle on one generation that the generator's engine decodes in the background,
 * batched with every other request of the generator (continuous batching: requests join and leave
 * between engine steps). Any thread may submit, read, cancel and free requests; each request is
 * read by one thread at a time.
 *
 *     specgen_request * r = specgen_request_submit(gen, "Once upon a time", &p);
 *     char buf[256]; size_t n;
 *     while (specgen_request_next(r, buf, sizeof buf, &n, -1.0) == SPECGEN_STATUS_OK && n > 0)
 *         fwrite(buf, 1, n, stdout);
 *     specgen_request_stats(r, &st);
 *     specgen_request_free(r);
 */
typedef struct specgen_request specgen_request;

/* Submits a generation of `prompt` (tokenized as in specgen_generate). Returns a new request owned
 * by the caller (specgen_request_free), or NULL with specgen_last_error() set: invalid argument,
 * context overflow, or queue full (every slot busy and max_queued requests waiting). `params` may
 * be NULL for the defaults; a SPECGEN_SEED_RANDOM seed is drawn here (specgen_request_stats reports it). */
SPECGEN_API specgen_request * specgen_request_submit(specgen_generator * gen, const char * prompt,
                                                     const specgen_generate_params * params);
/* As specgen_request_submit with token ids (as specgen_generate_tokens). */
SPECGEN_API specgen_request * specgen_request_submit_tokens(specgen_generator * gen, const int32_t * prompt,
                                                            int32_t n_prompt, const specgen_generate_params * params);

/* The text produced since the previous call (whole UTF-8 characters, stop strings withheld),
 * copied into buf (at most cap bytes; the rest stays for the next call), its length in *len (not
 * NUL-terminated). Waits up to timeout_s seconds for something new: 0 not at all; < 0, INFINITY or
 * a year or more: for ever (NaN is SPECGEN_STATUS_INVALID_ARGUMENT).
 * Returns OK with *len > 0 (text), OK with *len == 0 once the request has ended and every byte was
 * read (specgen_request_finish_reason says why), TIMEOUT when nothing came in time, or the error
 * the engine met while running it. buf may be NULL only with cap 0. */
SPECGEN_API specgen_status specgen_request_next(specgen_request * req, char * buf, size_t cap, size_t * len,
                                                double timeout_s);

/* Runs the request to its end, calling on_piece (may be NULL) with each piece as in
 * specgen_generate (non-zero cancels it: SPECGEN_STATUS_CANCELLED). */
SPECGEN_API specgen_status specgen_request_wait(specgen_request * req, specgen_piece_callback on_piece, void * user);

/* Ends the request now (finish reason CANCELLED unless it had ended); its slot is free when this
 * returns, text not yet read is dropped. No-op on an ended request. */
SPECGEN_API specgen_status specgen_request_cancel(specgen_request * req);

/* Whether the request has ended and all its text was read. */
SPECGEN_API bool specgen_request_done(const specgen_request * req);
/* NONE while it runs, then why it ended. */
SPECGEN_API specgen_finish_reason specgen_request_finish_reason(const specgen_request * req);
/* Its statistics so far (final once it ended). */
SPECGEN_API specgen_status specgen_request_stats(const specgen_request * req, specgen_stats * stats);

/* Cancels the request if it runs and releases it. NULL is a no-op. Free every request before its
 * generator (a request freed after it only releases its memory). */
SPECGEN_API void specgen_request_free(specgen_request * req);

#ifdef __cplusplus
}
#endif

#endif /* SPECGEN_H */
