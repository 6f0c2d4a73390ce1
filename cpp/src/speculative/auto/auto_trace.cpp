// The per-round trace of draft="auto" (speculative/auto/auto_trace.h).
#include "speculative/auto/auto_trace.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/error.h"

namespace specgen {

std::unique_ptr<auto_trace> auto_trace::from_env() {
    const char* path = std::getenv("SPECGEN_AUTO_TRACE");
    if (!path || !*path) return nullptr;
    return std::make_unique<auto_trace>(path);
}

auto_trace::auto_trace(const std::string& path) : file_(std::fopen(path.c_str(), "a")) {
    if (!file_) throw error("SPECGEN_AUTO_TRACE: cannot open " + path + ": " + std::strerror(errno));
}

auto_trace::~auto_trace() { std::fclose(file_); }

namespace {
void append_choice(std::string& out, const auto_choice& c) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "{\"g\":%d,\"tokens\":%.4f,\"seconds\":%.6f,\"score\":%.4f,\"chained\":%d}", c.gamma,
                  c.predicted_tokens, c.predicted_seconds, c.score, c.chained);
    out += buf;
}
}  // namespace

void auto_trace::choice(const auto_policy& policy, const auto_round& round, const auto_choice& chosen,
                        bool allow_neural) {
    line_ = "{\"method\":\"";
    line_ += auto_method_name(chosen.method);
    line_ += "\",\"chosen\":";
    append_choice(line_, chosen);
    line_ += ",\"candidates\":{";
    bool first = true;
    for (auto_method m : {auto_method::none, auto_method::ngram, auto_method::self_nanospec, auto_method::draft_model,
                          auto_method::draft_head}) {
        const bool neural = m == auto_method::self_nanospec || m == auto_method::draft_model || m == auto_method::draft_head;
        if (neural && (!allow_neural || !policy.can_choose(m))) continue;
        line_ += first ? "\"" : ",\"";
        line_ += auto_method_name(m);
        line_ += "\":";
        append_choice(line_, policy.predict(m, round));
        first = false;
    }
    line_ += '}';
}

void auto_trace::outcome(int drafted, int accepted, int chained, double seconds, double predicted_seconds) {
    char buf[160];
    std::snprintf(buf, sizeof buf, ",\"drafted\":%d,\"accepted\":%d,\"chained\":%d,\"seconds\":%.6f,\"predicted_seconds\":%.6f}\n",
                  drafted, accepted, chained, seconds, predicted_seconds);
    line_ += buf;
    std::fwrite(line_.data(), 1, line_.size(), file_);
    std::fflush(file_);
    line_.clear();
}

}  // namespace specgen
