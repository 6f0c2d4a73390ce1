// specgen: the command-line generator.
//
//   specgen -m model.gguf -p "Once upon a time" -n 64 --temp 0 --draft ngram
//
// Streams the continuation to stdout as it is generated and prints timing and acceptance statistics
// to stderr in llama.cpp's style. Every failure is one line `specgen: error: ...` on stderr with exit
// code 2 (a bad command line) or 1 (anything at run time); nothing escapes main() as an exception.
// `specgen bench ...` runs the Python benchmark module, `specgen serve ...` the OpenAI-compatible
// server (python_helper.h).
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

#include "args.h"
#include "common/error.h"
#include "backend/backend.h"
#include "engine/generator.h"
#include "python_helper.h"

namespace specgen::cli {

namespace {

// A run-time failure: printed as one line, exit code 1.
struct runtime_failure : std::runtime_error {
    using std::runtime_error::runtime_error;
};

volatile std::sig_atomic_t g_interrupted = 0;
// First Ctrl-C: finish the current step, print the statistics, exit 130. A second one kills.
extern "C" void on_sigint(int) {
    g_interrupted = 1;
    std::signal(SIGINT, SIG_DFL);
}

// One line, whatever the message holds.
std::string one_line(std::string s) {
    for (char& c : s)
        if (c == '\n' || c == '\r') c = ' ';
    while (!s.empty() && s.back() == ' ') s.pop_back();
    return s;
}

int fail(const std::string& what, int code) {
    std::fflush(stdout);
    std::fprintf(stderr, "specgen: error: %s\n", one_line(what).c_str());
    return code;
}

bool is_regular_file(const std::string& p) {
    struct stat st;
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string read_prompt_file(const std::string& path) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) throw runtime_failure("cannot read prompt file '" + path + "': no such file");
    if (S_ISDIR(st.st_mode)) throw runtime_failure("cannot read prompt file '" + path + "': it is a directory");
    if (!S_ISREG(st.st_mode)) throw runtime_failure("cannot read prompt file '" + path + "': not a regular file");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw runtime_failure("cannot read prompt file '" + path + "': " + std::strerror(errno));
    std::ostringstream ss;
    ss << in.rdbuf();
    std::string s = ss.str();
    if (!s.empty() && s.back() == '\n') s.pop_back();  // as llama.cpp: the file's final newline is not prompt
    return s;
}

std::string describe_speculation(const generator_params& g) {
    if (g.draft.empty() && g.draft_head.empty()) return "none (plain decoding)";
    const bool automatic = g.draft_type == draft_kind::automatic;
    std::string s = !g.draft_head.empty() && !automatic ? "EAGLE-3 head " + g.draft_head
                    : g.draft_type == draft_kind::model ? "draft model " + g.draft_model
                                                         : draft_kind_name(g.draft_type);
    if (automatic && !g.draft_model.empty()) s += " (with draft model " + g.draft_model + ")";
    if (automatic && !g.draft_head.empty()) s += " (with EAGLE-3 head " + g.draft_head + ")";
    s += ", verify " + std::string(g.verify == verify_mode::block ? "block" : "token");
    s += ", draft_max " + std::to_string(g.draft_max) + ", draft_min " + std::to_string(g.draft_min);
    if (g.draft_type == draft_kind::self) s += ", self_layers " + std::to_string(g.self_layers);
    if (g.nanospec_on()) s += g.nanospec == toggle::automatic ? ", nanospec (auto)" : ", nanospec";
    const bool chains = g.draft_type == draft_kind::model || (automatic && !g.draft_model.empty());
    if (chains && g.ngram_chain > 0) s += ", ngram chained (matches of " + std::to_string(g.ngram_chain) + "+ tokens)";
    if (g.frspec) s += ", frspec " + std::to_string(g.frspec);
    if (g.ssd)
        s += ", ssd (fanout " + std::to_string(g.ssd_fanout) + ", backup " +
             (g.ssd_backup == ssd_backup_mode::fast ? "fast" : "neural") + ", saguaro_c " + std::to_string(g.saguaro_c) + ")";
    return s;
}

void print_stats(const request& gen, double load_ms, uint64_t seed) {
    const generation_stats& s = gen.stats();
    const double p_ms = s.prefill_seconds * 1e3, e_ms = s.decode_seconds * 1e3;
    auto per_tok = [](double ms, int64_t n) { return n > 0 ? ms / double(n) : 0.0; };
    std::fprintf(stderr, "\n");
    std::fprintf(stderr, "specgen: seed = %llu, finish reason = %s\n", (unsigned long long)seed,
                 finish_reason_name(gen.reason()));
    std::fprintf(stderr, "specgen:        load time = %10.2f ms\n", load_ms);
    std::fprintf(stderr, "specgen: prompt eval time = %10.2f ms / %5lld tokens (%8.2f ms per token, %8.2f tokens per second)\n",
                 p_ms, (long long)s.n_prompt_tokens, per_tok(p_ms, s.n_prompt_tokens), s.prefill_tokens_per_second());
    std::fprintf(stderr, "specgen:        eval time = %10.2f ms / %5lld tokens (%8.2f ms per token, %8.2f tokens per second)\n",
                 e_ms, (long long)s.n_generated, per_tok(e_ms, s.n_generated), s.decode_tokens_per_second());
    std::fprintf(stderr, "specgen:       total time = %10.2f ms / %5lld tokens\n", load_ms + p_ms + e_ms,
                 (long long)(s.n_prompt_tokens + s.n_generated));
    if (s.n_rounds > 0) {
        std::fprintf(stderr,
                     "specgen: n_rounds = %lld, n_drafted = %lld, n_accepted = %lld, acceptance rate = %.2f%%, "
                     "mean accepted length = %.3f\n",
                     (long long)s.n_rounds, (long long)s.n_drafted, (long long)s.n_accepted, 100.0 * s.acceptance_rate(),
                     s.mean_accepted_length());
        std::fprintf(stderr, "specgen: draft time = %.2f ms, verify time = %.2f ms\n", s.draft_seconds * 1e3,
                     s.verify_seconds * 1e3);
        if (s.n_ngram_chained > 0)
            std::fprintf(stderr, "specgen: n-gram tokens chained = %lld, accepted = %lld\n", (long long)s.n_ngram_chained,
                         (long long)s.n_ngram_chained_accepted);
        if (s.ssd_hits + s.ssd_misses > 0)
            std::fprintf(stderr,
                         "specgen: ssd hit rate = %.2f%% (%lld/%lld), branches = %lld, target wait = %.2f ms, "
                         "overlap = %.2f%%\n",
                         100.0 * s.ssd_hit_rate(), (long long)s.ssd_hits, (long long)(s.ssd_hits + s.ssd_misses),
                         (long long)s.ssd_branches, s.ssd_wait_seconds * 1e3, 100.0 * s.ssd_overlap_fraction());
    }
}

int run(int argc, char** argv) {
    options o;
    try {
        o = parse_args(argc, argv);
    } catch (const usage_error& e) {
        return fail(e.what(), 2);
    }
    if (o.show_help) {
        std::fputs(usage_text().c_str(), stdout);
        return 0;
    }
    if (o.show_version) {
        std::printf("specgen %s\n", version());
        return 0;
    }
    if (o.conversation) {  // chat needs the Jinja chat template: the Python package's chat loop runs it
        std::string why;
        exec_python_module("specgen.chat", argc - 1, argv + 1, &why);
        throw runtime_failure(why);
    }
    auto note = [&](const std::string& line) {
        if (!o.log_disable) std::fprintf(stderr, "specgen: note: %s\n", one_line(line).c_str());
    };
    for (const std::string& n : o.notes) note(n);

    // Inputs that live in files: checked before the model is loaded, so a typo fails fast.
    std::string prompt = o.prompt;
    if (!o.prompt_file.empty()) prompt = read_prompt_file(o.prompt_file);

    generator_params gp = o.gen;
    if (!o.hf_repo.empty()) {
        std::string why;
        o.model = resolve_hub_model(o.hf_repo, &why);
        if (o.model.empty()) throw runtime_failure("-hf: " + why);
    }
    if (o.model.empty()) {
        o.model = default_model_path();
        if (o.model.empty())
            throw runtime_failure("no model given (-m) and the default model is not installed: pip install \"specgen[gemma]\"");
    }
    if (!is_regular_file(o.model)) throw runtime_failure("model file '" + o.model + "' does not exist or is not a file");
    gp.model_path = o.model;
    if (gp.frspec > 0 && gp.frspec_path.empty()) {
        gp.frspec_path = default_frspec_table();
        if (gp.frspec_path.empty())
            throw runtime_failure("--frspec needs --frspec-path (the shipped table comes with the specgen Python package)");
    }
    if (!gp.draft_head.empty() && !is_regular_file(gp.draft_head))
        throw runtime_failure("draft head file '" + gp.draft_head + "' does not exist or is not a file");
    if (!gp.draft_model.empty()) {
        if (!is_regular_file(gp.draft_model))
            throw runtime_failure("draft model file '" + gp.draft_model + "' does not exist or is not a file");
        // -md alone is kind model; with --draft auto the draft model is one of auto's candidates.
        gp.set_draft(gp.draft_type == draft_kind::automatic ? draft_kind::automatic : draft_kind::model, gp.draft_model);
    } else {
        gp.set_draft(gp.draft_type);
    }
    if (o.n_gpu_layers > 0 && gp.device == "cpu") {
        // llama.cpp's habit: -ngl 99 on a machine without a usable GPU warns and runs on the CPU.
        if (cuda_device_count() > 0) gp.device = "cuda";
        else note("-ngl " + std::to_string(o.n_gpu_layers) + ": no usable CUDA device (or a build without CUDA), running on the CPU");
    }
    gp.validate();

    generate_params run = o.run;
    if (!o.seed_given) run.seed = random_seed();

    const auto t0 = std::chrono::steady_clock::now();
    generator g(gp);
    for (const std::string& w : g.load_warnings()) std::fprintf(stderr, "specgen: warning: %s\n", w.c_str());
    const double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const std::vector<int32_t> tokens = g.tok().encode(prompt, true, true);
    std::signal(SIGINT, on_sigint);
    std::unique_ptr<request> gen = g.start(tokens, run);
    // Printed once the request is accepted, so that a load or prompt error stays the only line on stderr.
    if (!o.log_disable) {
        std::fprintf(stderr, "specgen: model %s (%s, %d layers, n_vocab %d), n_ctx %d, threads %d\n", gp.model_path.c_str(),
                     model_arch_name(g.target().hp().arch), int(g.target().hp().n_layer), int(g.n_vocab()), int(g.n_ctx()),
                     int(g.params().n_threads));
        std::fprintf(stderr, "specgen: speculation: %s\n", describe_speculation(gp).c_str());
    }

    bool ends_with_newline = true;  // nothing printed yet
    while (!gen->done()) {
        if (g_interrupted) {
            gen->cancel();
            break;
        }
        const std::string piece = gen->step();
        if (!piece.empty()) {
            std::fwrite(piece.data(), 1, piece.size(), stdout);
            std::fflush(stdout);
            ends_with_newline = piece.back() == '\n';
        }
    }
    // On a terminal the text ends with a newline, so the shell's prompt does not run on behind it; into a
    // pipe or file stdout stays exactly the continuation (what scripts compare and concatenate).
    if (!ends_with_newline && ::isatty(STDOUT_FILENO)) std::fputc('\n', stdout);
    std::fflush(stdout);
    if (!o.no_perf && !o.log_disable) print_stats(*gen, load_ms, run.seed);
    return g_interrupted ? 130 : 0;
}

}  // namespace

}  // namespace specgen::cli

int main(int argc, char** argv) {
    using namespace specgen;
    using cli::fail;
    try {
        if (argc >= 2 && std::strcmp(argv[1], "bench") == 0) {
            std::string why;
            cli::exec_bench(argc - 2, argv + 2, &why);
            return fail(why, 1);
        }
        if (argc >= 2 && std::strcmp(argv[1], "serve") == 0) {
            std::string why;
            cli::exec_serve(argc - 2, argv + 2, &why);
            return fail(why, 1);
        }
        return cli::run(argc, argv);
    } catch (const cli::usage_error& e) {
        return fail(e.what(), 2);
    } catch (const invalid_argument_error& e) {
        return fail(e.what(), 2);
    } catch (const model_load_error& e) {
        return fail(e.what(), 1);
    } catch (const context_overflow_error& e) {
        return fail(e.what(), 1);
    } catch (const not_implemented_error& e) {
        return fail(std::string("not implemented: ") + e.what(), 1);
    } catch (const std::bad_alloc&) {
        return fail("out of memory", 1);
    } catch (const std::exception& e) {
        return fail(e.what(), 1);
    } catch (...) {
        return fail("unknown internal error", 1);
    }
}
