// Command-line options of the `specgen` binary. Every engine knob's flags, help line and parse come
// from the parameter table (engine/params.h, param_specs()); this file adds only what the command
// line itself needs (model, prompt, chat mode) and llama.cpp's flags that mean nothing here.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/params.h"

namespace specgen::cli {

// A bad command line: the message is printed as `specgen: error: <what>` and the exit code is 2.
struct usage_error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct options {
    std::string model;           // -m; empty: the default model (or -hf)
    std::string hf_repo;         // -hf: a Hub reference, resolved by the Python package
    std::string prompt;          // -p
    std::string prompt_file;     // -f
    bool has_prompt = false;
    bool seed_given = false;     // -s: run.seed holds it (-1 drew a random one)
    generator_params gen;        // every table knob of generator scope; model_path filled in by main
    generate_params run;         // every table knob of generate scope
    int n_gpu_layers = -1;       // -ngl: llama.cpp's offload count (> 0: the whole model on CUDA); -1: not given
    bool conversation = false;   // -cnv / -i: chat with the model's template (the Python chat loop)
    bool show_help = false;
    bool show_version = false;
    bool no_perf = false;        // --no-perf: no timing lines
    bool log_disable = false;    // --log-disable: nothing on stderr but errors
    std::vector<std::string> notes;  // one line each, printed before the run (llama.cpp flags ignored here)
};

// Parses argv[1..argc). Throws usage_error naming the flag and the value.
options parse_args(int argc, char** argv);

// The --help text (the engine's knobs generated from the parameter table).
std::string usage_text();

}  // namespace specgen::cli
