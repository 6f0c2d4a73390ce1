// The C API (cpp/include/specgen/specgen.h) over the engine.
//
// Every exported function runs its body inside guard(), which turns each specgen::error subclass
// (and anything else) into a specgen_status and the thread-local last-error message: no exception
// crosses the boundary. Handles are the engine objects themselves wrapped in a struct, so the
// opaque type stays ours even if the engine's classes move.
#include "specgen/specgen.h"

#include <chrono>
#include <cmath>
#include <climits>
#include <tuple>
#include <cstring>
#include <memory>
#include <new>
#include <algorithm>
#include <string>
#include <vector>

#include "common/error.h"
#include "engine/generator.h"
#include "engine/params.h"
#include "engine/stats.h"

struct specgen_generator {
    std::unique_ptr<specgen::generator> gen;
    std::string load_warnings;  // the generator's, one per line (specgen_load_warnings)
};

struct specgen_request {
    std::unique_ptr<specgen::request> gen;
    uint64_t seed = 0;
    std::string unread;  // text taken from the engine, not yet copied out (a small buffer)
};

namespace {

thread_local std::string t_last_error;
thread_local specgen_status t_last_status = SPECGEN_STATUS_OK;

specgen_status set_error(specgen_status status, const char* what) {
    t_last_error = what ? what : "unknown error";
    t_last_status = status;
    return status;
}

// Runs fn(), mapping every exception to a status and the last-error message.
template <class F>
specgen_status guard(F&& fn) noexcept {
    try {
        return fn();
    } catch (const specgen::invalid_argument_error& e) {
        return set_error(SPECGEN_STATUS_INVALID_ARGUMENT, e.what());
    } catch (const specgen::model_load_error& e) {
        return set_error(SPECGEN_STATUS_MODEL_LOAD, e.what());
    } catch (const specgen::context_overflow_error& e) {
        return set_error(SPECGEN_STATUS_CONTEXT_OVERFLOW, e.what());
    } catch (const specgen::not_implemented_error& e) {
        return set_error(SPECGEN_STATUS_NOT_IMPLEMENTED, e.what());
    } catch (const specgen::cancelled_error& e) {
        return set_error(SPECGEN_STATUS_CANCELLED, e.what());
    } catch (const specgen::queue_full_error& e) {
        return set_error(SPECGEN_STATUS_QUEUE_FULL, e.what());
    } catch (const std::bad_alloc&) {
        return set_error(SPECGEN_STATUS_INTERNAL, "out of memory");
    } catch (const std::exception& e) {
        return set_error(SPECGEN_STATUS_INTERNAL, e.what());
    } catch (...) {
        return set_error(SPECGEN_STATUS_INTERNAL, "unknown exception");
    }
}

specgen_status invalid(const std::string& what) { return set_error(SPECGEN_STATUS_INVALID_ARGUMENT, what.c_str()); }

specgen_finish_reason to_c(specgen::finish_reason r) {
    switch (r) {
        case specgen::finish_reason::stop: return SPECGEN_FINISH_REASON_STOP;
        case specgen::finish_reason::length: return SPECGEN_FINISH_REASON_LENGTH;
        case specgen::finish_reason::eos: return SPECGEN_FINISH_REASON_EOS;
        case specgen::finish_reason::cancelled: return SPECGEN_FINISH_REASON_CANCELLED;
        default: return SPECGEN_FINISH_REASON_NONE;
    }
}

void fill_stats(const specgen::request& g, uint64_t seed, specgen_stats* out) {
    const specgen::generation_stats& s = g.stats();
    out->finish_reason = to_c(g.reason());
    out->seed = seed;
    // Every field of the one list (engine/stats.h): a field missing from specgen_stats fails to compile.
#define SPECGEN_X(type, name, member, doc) out->name = s.member;
    SPECGEN_STATS_FIELDS(SPECGEN_X)
#undef SPECGEN_X
#define SPECGEN_X(name, doc) out->name = s.name();
    SPECGEN_STATS_DERIVED(SPECGEN_X)
#undef SPECGEN_X
    out->n_positions = int32_t(std::min<size_t>(std::max(s.drafted_at.size(), s.accepted_at.size()), SPECGEN_MAX_DRAFT));
    for (int32_t i = 0; i < out->n_positions; ++i) {
        out->drafted_at[i] = size_t(i) < s.drafted_at.size() ? s.drafted_at[i] : 0;
        out->accepted_at[i] = size_t(i) < s.accepted_at.size() ? s.accepted_at[i] : 0;
    }
}

specgen::generate_params to_engine(const specgen_generate_params& p, uint64_t seed) {
    specgen::generate_params gp;
    gp.max_tokens = p.max_tokens;
    gp.sampling.temperature = p.temperature;
    gp.sampling.top_k = p.top_k;
    gp.sampling.top_p = p.top_p;
    gp.sampling.min_p = p.min_p;
    gp.sampling.repeat_penalty = p.repeat_penalty;
    gp.sampling.repeat_last_n = p.repeat_last_n;
    if (p.n_stop > 0 && !p.stop) throw specgen::invalid_argument_error("stop is NULL but n_stop is " + std::to_string(p.n_stop));
    for (size_t i = 0; i < p.n_stop; ++i) {
        if (!p.stop[i]) throw specgen::invalid_argument_error("stop[" + std::to_string(i) + "] is NULL");
        gp.stop.emplace_back(p.stop[i]);  // empty ones are ignored by the engine's text_stream
    }
    gp.seed = seed;
    gp.add_bos = p.add_bos;
    gp.ignore_eos = p.ignore_eos;
    return gp;  // checked once, by generator::start
}

specgen_status run_generation(specgen_generator* gen, const std::vector<int32_t>& prompt,
                              const specgen_generate_params& p, uint64_t seed, specgen_piece_callback on_piece,
                              void* user, specgen_stats* stats) {
    std::unique_ptr<specgen::request> g = gen->gen->start(prompt, to_engine(p, seed));
    struct canceller {  // a request left by an exception must not stay live on the generator
        specgen::request& g;
        ~canceller() { g.cancel(); }
    } end_on_exit{*g};
    bool cancelled = false;
    while (!g->done()) {
        const std::string piece = g->step();
        if (!piece.empty() && on_piece && on_piece(piece.data(), piece.size(), user) != 0) {
            g->cancel();
            cancelled = true;
        }
    }
    if (stats) fill_stats(*g, seed, stats);
    if (cancelled) return set_error(SPECGEN_STATUS_CANCELLED, "generation cancelled by the callback");
    return SPECGEN_STATUS_OK;
}

specgen_status generate_common(specgen_generator* gen, const int32_t* tokens, int32_t n_tokens, const char* text,
                               const specgen_generate_params* params, specgen_piece_callback on_piece, void* user,
                               specgen_stats* stats) {
    if (stats) std::memset(stats, 0, sizeof *stats);
    const specgen_generate_params p = params ? *params : specgen_generate_default_params();
    const uint64_t seed = p.seed == SPECGEN_SEED_RANDOM ? specgen::random_seed() : p.seed;
    if (stats) stats->seed = seed;
    return guard([&]() -> specgen_status {
        if (!gen || !gen->gen) return invalid("generator is NULL");
        std::vector<int32_t> prompt;
        if (text) {
            prompt = gen->gen->tok().encode(text, true, true);
        } else {
            if (n_tokens < 0) return invalid("n_prompt must be >= 0, got " + std::to_string(n_tokens));
            if (n_tokens > 0 && !tokens) return invalid("prompt is NULL");
            prompt.assign(tokens, tokens + n_tokens);
        }
        return run_generation(gen, prompt, p, seed, on_piece, user, stats);
    });
}

}  // namespace

extern "C" {

const char* specgen_last_error(void) { return t_last_error.c_str(); }

specgen_status specgen_last_status(void) { return t_last_status; }

const char* specgen_status_name(specgen_status status) {
    switch (status) {
        case SPECGEN_STATUS_OK: return "ok";
        case SPECGEN_STATUS_INVALID_ARGUMENT: return "invalid argument";
        case SPECGEN_STATUS_MODEL_LOAD: return "model load error";
        case SPECGEN_STATUS_CONTEXT_OVERFLOW: return "context overflow";
        case SPECGEN_STATUS_NOT_IMPLEMENTED: return "not implemented";
        case SPECGEN_STATUS_CANCELLED: return "cancelled";
        case SPECGEN_STATUS_INTERNAL: return "internal error";
        case SPECGEN_STATUS_QUEUE_FULL: return "queue full";
        case SPECGEN_STATUS_TIMEOUT: return "timeout";
    }
    return "unknown";
}

const char* specgen_version(void) { return specgen::version(); }

specgen_generator_params specgen_generator_default_params(void) {
    const specgen::generator_params d;
    specgen_generator_params p;
    std::memset(&p, 0, sizeof p);
    p.n_ctx = d.n_ctx;
    p.n_threads = d.n_threads;
    p.n_threads_draft = d.n_threads_draft;
    p.draft_kind = SPECGEN_DRAFT_KIND_NONE;
    p.draft_path = nullptr;
    p.frspec_path = nullptr;
    p.verify = d.verify == specgen::verify_mode::token ? SPECGEN_VERIFY_TOKEN : SPECGEN_VERIFY_BLOCK;
    p.draft_max = d.draft_max;
    p.draft_min = d.draft_min;
    p.draft_p_min = d.draft_p_min;
    p.self_layers = d.self_layers;
    p.ngram_max = d.ngram_max;
    p.ngram_min = d.ngram_min;
    static_assert(int(SPECGEN_TOGGLE_OFF) == int(specgen::toggle::off) && int(SPECGEN_TOGGLE_ON) == int(specgen::toggle::on) &&
                      int(SPECGEN_TOGGLE_AUTO) == int(specgen::toggle::automatic),
                  "specgen_toggle mirrors specgen::toggle");
    p.nanospec = static_cast<specgen_toggle>(int(d.nanospec));
    p.nanospec_capacity = d.nanospec_capacity;
    p.nanospec_topk = d.nanospec_topk;
    p.frspec = d.frspec;
    p.ssd = d.ssd;
    p.ssd_fanout = d.ssd_fanout;
    p.ssd_fanout_schedule = SPECGEN_SSD_SCHEDULE_UNIFORM;
    p.ssd_backup = SPECGEN_SSD_BACKUP_NEURAL;
    p.ssd_budget = d.ssd_budget;
    p.saguaro_c = d.saguaro_c;
    p.device = nullptr;
    p.draft_adaptive = d.draft_adaptive;
    p.reuse_draft_hidden = d.reuse_draft_hidden;
    p.n_parallel = d.n_parallel;
    p.max_queued = d.max_queued;
    p.type_k = SPECGEN_KV_TYPE_F32;
    p.type_v = SPECGEN_KV_TYPE_F32;
    p.batch_draft_policy = d.batch_draft_policy;
    p.ngram_chain = d.ngram_chain;
    p.draft_head = nullptr;
    return p;
}

specgen_generator* specgen_generator_init(const char* model_path, const specgen_generator_params* params) {
    specgen_generator* out = nullptr;
    guard([&]() -> specgen_status {
        if (!model_path || !*model_path) return invalid("model_path is NULL or empty");
        const specgen_generator_params p = params ? *params : specgen_generator_default_params();
        specgen::generator_params gp;
        gp.model_path = model_path;
        gp.n_ctx = p.n_ctx;
        gp.n_threads = p.n_threads;
        gp.n_threads_draft = p.n_threads_draft;
        switch (p.draft_kind) {
            case SPECGEN_DRAFT_KIND_NONE: gp.set_draft(specgen::draft_kind::none); break;
            case SPECGEN_DRAFT_KIND_SELF: gp.set_draft(specgen::draft_kind::self); break;
            case SPECGEN_DRAFT_KIND_NGRAM: gp.set_draft(specgen::draft_kind::ngram); break;
            case SPECGEN_DRAFT_KIND_AUTO:  // draft_path, when given: auto's draft model candidate
                gp.set_draft(specgen::draft_kind::automatic, p.draft_path ? p.draft_path : "");
                break;
            case SPECGEN_DRAFT_KIND_MODEL:
                if (!p.draft_path || !*p.draft_path) return invalid("draft_kind is MODEL but draft_path is NULL or empty");
                gp.set_draft(specgen::draft_kind::model, p.draft_path);
                break;
            default: return invalid("unknown draft_kind " + std::to_string(int(p.draft_kind)) + " (valid: none, ngram, self, model, auto)");
        }
        if (p.device) gp.device = p.device;
        gp.draft_adaptive = p.draft_adaptive;
        gp.reuse_draft_hidden = p.reuse_draft_hidden;
        gp.n_parallel = p.n_parallel;
        gp.max_queued = p.max_queued;
        gp.batch_draft_policy = p.batch_draft_policy;
        gp.ngram_chain = p.ngram_chain;
        if (p.draft_head) gp.draft_head = p.draft_head;  // validate() refuses the drafters it excludes
        for (auto [c, out, name] : {std::tuple{p.type_k, &gp.type_k, "type_k"}, std::tuple{p.type_v, &gp.type_v, "type_v"}}) {
            switch (c) {
                case SPECGEN_KV_TYPE_F32: *out = specgen::kv_type::f32; break;
                case SPECGEN_KV_TYPE_F16: *out = specgen::kv_type::f16; break;
                case SPECGEN_KV_TYPE_Q8_0: *out = specgen::kv_type::q8_0; break;
                default: return invalid(std::string("unknown ") + name + " " + std::to_string(int(c)) + " (valid: f32, f16, q8_0)");
            }
        }
        switch (p.verify) {
            case SPECGEN_VERIFY_TOKEN: gp.verify = specgen::verify_mode::token; break;
            case SPECGEN_VERIFY_BLOCK: gp.verify = specgen::verify_mode::block; break;
            default: return invalid("unknown verify mode " + std::to_string(int(p.verify)));
        }
        gp.draft_max = p.draft_max;
        gp.draft_min = p.draft_min;
        gp.draft_p_min = p.draft_p_min;
        gp.self_layers = p.self_layers;
        gp.ngram_max = p.ngram_max;
        gp.ngram_min = p.ngram_min;
        if (int(p.nanospec) < SPECGEN_TOGGLE_OFF || int(p.nanospec) > SPECGEN_TOGGLE_AUTO)
            return invalid("unknown nanospec " + std::to_string(int(p.nanospec)) + " (valid: 0 off, 1 on, 2 auto)");
        gp.nanospec = static_cast<specgen::toggle>(int(p.nanospec));  // the enums agree (default_params)
        gp.nanospec_capacity = p.nanospec_capacity;
        gp.nanospec_topk = p.nanospec_topk;
        gp.frspec = p.frspec;
        if (p.frspec_path) gp.frspec_path = p.frspec_path;
        gp.ssd = p.ssd;
        gp.ssd_fanout = p.ssd_fanout;
        switch (p.ssd_fanout_schedule) {
            case SPECGEN_SSD_SCHEDULE_UNIFORM: gp.ssd_fanout_schedule = specgen::ssd_schedule::uniform; break;
            case SPECGEN_SSD_SCHEDULE_GEOMETRIC: gp.ssd_fanout_schedule = specgen::ssd_schedule::geometric; break;
            default: return invalid("unknown ssd_fanout_schedule " + std::to_string(int(p.ssd_fanout_schedule)));
        }
        switch (p.ssd_backup) {
            case SPECGEN_SSD_BACKUP_NEURAL: gp.ssd_backup = specgen::ssd_backup_mode::neural; break;
            case SPECGEN_SSD_BACKUP_FAST: gp.ssd_backup = specgen::ssd_backup_mode::fast; break;
            default: return invalid("unknown ssd_backup " + std::to_string(int(p.ssd_backup)));
        }
        gp.ssd_budget = p.ssd_budget;
        gp.saguaro_c = p.saguaro_c;
        auto h = std::make_unique<specgen_generator>();
        h->gen = std::make_unique<specgen::generator>(gp);
        for (const std::string& w : h->gen->load_warnings()) h->load_warnings += w + "\n";
        out = h.release();
        return SPECGEN_STATUS_OK;
    });
    return out;
}

void specgen_generator_free(specgen_generator* gen) {
    guard([&]() -> specgen_status {
        delete gen;
        return SPECGEN_STATUS_OK;
    });
}

int32_t specgen_n_vocab(const specgen_generator* gen) {
    if (gen && gen->gen) return gen->gen->n_vocab();
    invalid("generator is NULL");
    return 0;
}

int32_t specgen_n_ctx(const specgen_generator* gen) {
    if (gen && gen->gen) return gen->gen->n_ctx();
    invalid("generator is NULL");
    return 0;
}

const char* specgen_load_warnings(const specgen_generator* gen) {
    if (gen && gen->gen) return gen->load_warnings.c_str();
    invalid("generator is NULL");
    return "";
}

int32_t specgen_token_bos(const specgen_generator* gen) { return gen && gen->gen ? gen->gen->tok().bos_id() : -1; }
int32_t specgen_token_eos(const specgen_generator* gen) { return gen && gen->gen ? gen->gen->tok().eos_id() : -1; }

int32_t specgen_tokenize(const specgen_generator* gen, const char* text, size_t text_len, int32_t* tokens,
                         int32_t n_tokens_max, bool add_special, bool parse_special) {
    int32_t result = 0;
    const specgen_status st = guard([&]() -> specgen_status {
        if (!gen || !gen->gen) return invalid("generator is NULL");
        if (!text && text_len > 0) return invalid("text is NULL");
        if (n_tokens_max < 0) return invalid("n_tokens_max must be >= 0, got " + std::to_string(n_tokens_max));
        if (n_tokens_max > 0 && !tokens) return invalid("tokens is NULL but n_tokens_max is " + std::to_string(n_tokens_max));
        const std::vector<int32_t> ids = gen->gen->tok().encode(std::string_view(text ? text : "", text_len), add_special, parse_special);
        if (ids.size() > size_t(INT32_MAX)) return invalid("text has more than INT32_MAX tokens");
        result = int32_t(ids.size());
        if (result <= n_tokens_max && result > 0) std::memcpy(tokens, ids.data(), ids.size() * sizeof(int32_t));
        return SPECGEN_STATUS_OK;
    });
    return st == SPECGEN_STATUS_OK ? result : int32_t(st);
}

int32_t specgen_detokenize(const specgen_generator* gen, const int32_t* tokens, int32_t n_tokens, char* buf,
                           int32_t buf_size, bool skip_special) {
    int32_t result = 0;
    const specgen_status st = guard([&]() -> specgen_status {
        if (!gen || !gen->gen) return invalid("generator is NULL");
        if (n_tokens < 0) return invalid("n_tokens must be >= 0, got " + std::to_string(n_tokens));
        if (n_tokens > 0 && !tokens) return invalid("tokens is NULL but n_tokens is " + std::to_string(n_tokens));
        if (buf_size < 0) return invalid("buf_size must be >= 0, got " + std::to_string(buf_size));
        if (buf_size > 0 && !buf) return invalid("buf is NULL but buf_size is " + std::to_string(buf_size));
        const std::string s = gen->gen->tok().decode(std::vector<int32_t>(tokens, tokens + n_tokens), skip_special);
        if (s.size() >= size_t(INT32_MAX)) return invalid("detokenized text exceeds INT32_MAX bytes");
        result = int32_t(s.size());
        if (result < buf_size) {
            std::memcpy(buf, s.data(), s.size());
            buf[s.size()] = '\0';
        }
        return SPECGEN_STATUS_OK;
    });
    return st == SPECGEN_STATUS_OK ? result : int32_t(st);
}

specgen_generate_params specgen_generate_default_params(void) {
    const specgen::generate_params d;
    specgen_generate_params p;
    std::memset(&p, 0, sizeof p);
    p.max_tokens = d.max_tokens;
    p.temperature = d.sampling.temperature;
    p.top_k = d.sampling.top_k;
    p.top_p = d.sampling.top_p;
    p.min_p = d.sampling.min_p;
    p.repeat_penalty = d.sampling.repeat_penalty;
    p.repeat_last_n = d.sampling.repeat_last_n;
    p.seed = SPECGEN_SEED_RANDOM;
    p.stop = nullptr;
    p.n_stop = 0;
    p.ignore_eos = d.ignore_eos;
    p.add_bos = d.add_bos;
    return p;
}

specgen_status specgen_generate(specgen_generator* gen, const char* prompt, const specgen_generate_params* params,
                                specgen_piece_callback on_piece, void* user, specgen_stats* stats) {
    if (!prompt) {
        if (stats) std::memset(stats, 0, sizeof *stats);
        return invalid("prompt is NULL");
    }
    return generate_common(gen, nullptr, 0, prompt, params, on_piece, user, stats);
}

specgen_status specgen_generate_tokens(specgen_generator* gen, const int32_t* prompt, int32_t n_prompt,
                                       const specgen_generate_params* params, specgen_piece_callback on_piece,
                                       void* user, specgen_stats* stats) {
    return generate_common(gen, prompt, n_prompt, nullptr, params, on_piece, user, stats);
}

}  // extern "C"

namespace {

specgen_request* submit_common(specgen_generator* gen, const int32_t* tokens, int32_t n_tokens, const char* text,
                               const specgen_generate_params* params) {
    specgen_request* out = nullptr;
    guard([&]() -> specgen_status {
        if (!gen || !gen->gen) return invalid("generator is NULL");
        const specgen_generate_params p = params ? *params : specgen_generate_default_params();
        const uint64_t seed = p.seed == SPECGEN_SEED_RANDOM ? specgen::random_seed() : p.seed;
        std::vector<int32_t> prompt;
        if (text) {
            prompt = gen->gen->tok().encode(text, true, true);
        } else {
            if (n_tokens < 0) return invalid("n_prompt must be >= 0, got " + std::to_string(n_tokens));
            if (n_tokens > 0 && !tokens) return invalid("prompt is NULL");
            prompt.assign(tokens, tokens + n_tokens);
        }
        auto r = std::make_unique<specgen_request>();
        r->seed = seed;
        r->gen = gen->gen->start(prompt, to_engine(p, seed));
        out = r.release();
        return SPECGEN_STATUS_OK;
    });
    return out;
}

}  // namespace

extern "C" {

specgen_request* specgen_request_submit(specgen_generator* gen, const char* prompt, const specgen_generate_params* params) {
    if (!prompt) {
        invalid("prompt is NULL");
        return nullptr;
    }
    return submit_common(gen, nullptr, 0, prompt, params);
}

specgen_request* specgen_request_submit_tokens(specgen_generator* gen, const int32_t* prompt, int32_t n_prompt,
                                               const specgen_generate_params* params) {
    return submit_common(gen, prompt, n_prompt, nullptr, params);
}

specgen_status specgen_request_next(specgen_request* req, char* buf, size_t cap, size_t* len, double timeout_s) {
    return guard([&]() -> specgen_status {
        if (!req || !req->gen) return invalid("request is NULL");
        if (!len) return invalid("len is NULL");
        if (cap > 0 && !buf) return invalid("buf is NULL but cap is " + std::to_string(cap));
        *len = 0;
        if (std::isnan(timeout_s)) return invalid("timeout_s is NaN");
        if (req->unread.empty()) {
            // Wait for progress until there is text, the request ended, or the time is up.
            const bool forever = specgen::waits_forever(timeout_s);
            const auto t_end = std::chrono::steady_clock::now() +
                               std::chrono::duration<double>(forever ? 0.0 : std::max(0.0, timeout_s));
            for (;;) {
                if (req->gen->done()) return SPECGEN_STATUS_OK;
                double left = -1.0;
                if (!forever)
                    left = std::max(0.0, std::chrono::duration<double>(t_end - std::chrono::steady_clock::now()).count());
                bool ready = false;
                req->unread = req->gen->next(left, &ready);
                if (!req->unread.empty()) break;
                if (forever) continue;
                if (!ready || (std::chrono::steady_clock::now() >= t_end && !req->gen->done()))
                    return set_error(SPECGEN_STATUS_TIMEOUT, "no new text within the timeout");
            }
        }
        if (cap == 0) return SPECGEN_STATUS_OK;
        // Copy whole UTF-8 characters only (a piece cut at cap would split one).
        size_t n = std::min(cap, req->unread.size());
        if (n < req->unread.size())
            while (n > 0 && (static_cast<unsigned char>(req->unread[n]) & 0xC0) == 0x80) --n;
        if (n == 0) return invalid("buf is too small for the next UTF-8 character (cap " + std::to_string(cap) + ")");
        std::memcpy(buf, req->unread.data(), n);
        req->unread.erase(0, n);
        *len = n;
        return SPECGEN_STATUS_OK;
    });
}

specgen_status specgen_request_wait(specgen_request* req, specgen_piece_callback on_piece, void* user) {
    return guard([&]() -> specgen_status {
        if (!req || !req->gen) return invalid("request is NULL");
        if (!req->unread.empty()) {
            const std::string piece = std::move(req->unread);
            req->unread.clear();
            if (on_piece && on_piece(piece.data(), piece.size(), user) != 0) {
                req->gen->cancel();
                return set_error(SPECGEN_STATUS_CANCELLED, "generation cancelled by the callback");
            }
        }
        while (!req->gen->done()) {
            const std::string piece = req->gen->step();
            if (!piece.empty() && on_piece && on_piece(piece.data(), piece.size(), user) != 0) {
                req->gen->cancel();
                return set_error(SPECGEN_STATUS_CANCELLED, "generation cancelled by the callback");
            }
        }
        return SPECGEN_STATUS_OK;
    });
}

specgen_status specgen_request_cancel(specgen_request* req) {
    return guard([&]() -> specgen_status {
        if (!req || !req->gen) return invalid("request is NULL");
        req->gen->cancel();
        req->unread.clear();
        return SPECGEN_STATUS_OK;
    });
}

bool specgen_request_done(const specgen_request* req) {
    if (!req || !req->gen) return true;
    return req->unread.empty() && req->gen->done();
}

specgen_finish_reason specgen_request_finish_reason(const specgen_request* req) {
    if (!req || !req->gen) return SPECGEN_FINISH_REASON_NONE;
    return to_c(req->gen->reason());
}

specgen_status specgen_request_stats(const specgen_request* req, specgen_stats* stats) {
    return guard([&]() -> specgen_status {
        if (!req || !req->gen) return invalid("request is NULL");
        if (!stats) return invalid("stats is NULL");
        std::memset(stats, 0, sizeof *stats);
        fill_stats(*req->gen, req->seed, stats);
        return SPECGEN_STATUS_OK;
    });
}

void specgen_request_free(specgen_request* req) {
    if (!req) return;
    guard([&]() -> specgen_status {
        req->gen.reset();  // cancels a running request and waits for the engine to let go
        return SPECGEN_STATUS_OK;
    });
    delete req;
}

}  // extern "C"
