// Command-line options of the `specgen` binary (llama.cpp's flag names where llama.cpp has one).
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
    std::string model;           // -m; empty: the default model
    std::string prompt;          // -p
    std::string prompt_file;     // -f
    bool has_prompt = false;
    std::string draft_model;     // -md
    std::string draft_kind;      // --draft self|ngram
    uint64_t seed = 0;           // -s, when seed_given (-s -1 or none: a random seed)
    bool seed_given = false;
    generator_params gen;        // model_path and draft filled in by main
    generate_params run;         // seed filled in by main
    bool show_help = false;
    bool show_version = false;
};

// Parses argv[1..argc). Throws usage_error naming the flag and the value.
options parse_args(int argc, char** argv);

// The --help text.
std::string usage_text();


}  // namespace specgen::cli
