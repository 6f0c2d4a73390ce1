// The per-round verification trace (engine/verify_trace.h).
#include "engine/verify_trace.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/error.h"

namespace specgen {

std::unique_ptr<verify_trace> verify_trace::from_env() {
    const char* path = std::getenv("SPECGEN_VERIFY_TRACE");
    if (!path || !*path) return nullptr;
    return std::make_unique<verify_trace>(path);
}

verify_trace::verify_trace(const std::string& path) : file_(std::fopen(path.c_str(), "a")) {
    if (!file_) throw error("SPECGEN_VERIFY_TRACE: cannot open " + path + ": " + std::strerror(errno));
}

verify_trace::~verify_trace() { std::fclose(file_); }

namespace {
void append_list(std::string& out, const char* key, const std::vector<double>& v) {
    out += ",\"";
    out += key;
    out += "\":[";
    char buf[32];
    for (size_t i = 0; i < v.size(); ++i) {
        std::snprintf(buf, sizeof buf, "%s%.9g", i ? "," : "", v[i]);
        out += buf;
    }
    out += ']';
}
}  // namespace

void verify_trace::record(verifier& ver, verify_method used, const int32_t* draft, int32_t gamma,
                          const token_dist* p, const token_dist* q, const verify_result& result) {
    const int32_t k = result.n_accepted, y = result.next_token;
    const double q_next = k < gamma ? double(q[k].prob_of(y)) : -1.0;
    char head[192];
    std::snprintf(head, sizeof head,
                  "{\"method\":\"%s\",\"gamma\":%d,\"accepted\":%d,\"next\":%d,\"p_next\":%.9g,\"q_next\":%.9g",
                  used == verify_method::block ? "block" : "token", int(gamma), int(k), int(y),
                  double(p[k].prob_of(y)), q_next);
    line_ = head;
    reach_.resize(size_t(gamma));
    for (int32_t i = 0; i < gamma; ++i)  // q_i(x_i) > 0: the verifier checked it
        reach_[size_t(i)] = double(p[i].prob_of(draft[i])) / double(q[i].prob_of(draft[i]));
    append_list(line_, "ratio", reach_);
    ver.acceptance_reach(verify_method::token, draft, gamma, p, q, reach_);
    append_list(line_, "reach_token", reach_);
    ver.acceptance_reach(verify_method::block, draft, gamma, p, q, reach_);
    append_list(line_, "reach_block", reach_);
    line_ += "}\n";
    std::fwrite(line_.data(), 1, line_.size(), file_);
    std::fflush(file_);
}

}  // namespace specgen
