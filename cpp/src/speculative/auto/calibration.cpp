// docs/ALGORITHMS.md section 8.1: measuring the per-row costs and caching them.
#include "speculative/auto/calibration.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <dlfcn.h>
#include <fstream>
#include <limits>
#include <sstream>
#include <sys/stat.h>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "engine/params.h"
#include "model/kv_cache.h"
#include "model/model.h"
#include "quant/quant.h"
#include "quant/rows16.h"
#include "speculative/draft_vocab.h"
#include "speculative/drafters/eagle3_head.h"

namespace specgen {

namespace {
constexpr int kMaxRows = 9;      // g + 1 for draft_max 8
constexpr int kRepeats = 3;
constexpr int kSubsetIds = 2048; // |S| of the subset-head measurement
// The automatic cache is measured again when one row now takes this many times more or less than it
// says: a cache written while the machine was loaded made auto prefer the self drafter on text where
// n-gram lookup ran 1.9x faster (its row costs were 2-4x today's, and not in proportion).
constexpr double kStaleRatio = 1.5;

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

uint64_t fnv1a(const std::string& s) {
    uint64_t h = 1469598103934665603ull;
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    return h;
}

void put_list(std::ostringstream& o, const char* key, const std::vector<double>& v) {
    o << "  \"" << key << "\": [";
    for (size_t i = 0; i < v.size(); ++i) o << (i ? ", " : "") << v[i];
    o << "],\n";
}

// The numbers after "key": (one, or a [list]).
bool get_numbers(const std::string& t, const std::string& key, std::vector<double>& out) {
    out.clear();
    size_t at = t.find("\"" + key + "\"");
    if (at == std::string::npos) return false;
    at = t.find(':', at);
    if (at == std::string::npos) return false;
    ++at;
    while (at < t.size() && (t[at] == ' ' || t[at] == '\n')) ++at;
    const bool list = at < t.size() && t[at] == '[';
    if (list) ++at;
    while (at < t.size()) {
        while (at < t.size() && (t[at] == ' ' || t[at] == ',' || t[at] == '\n')) ++at;
        if (at >= t.size() || t[at] == ']' || t[at] == '}') break;
        char* end = nullptr;
        const double v = std::strtod(t.c_str() + at, &end);
        if (end == t.c_str() + at) return false;
        out.push_back(v);
        at = size_t(end - t.c_str());
        if (!list) break;
    }
    return !out.empty();
}
// The inputs both measurements run: kMaxRows token ids spread over the vocabulary, and two NanoSpec sets
// S over the model's head (kSubsetIds ids and an eighth of them), each with its own matrix as NanoSpec's
// drafter keeps it (not rows picked per call).
struct probe_inputs {
    explicit probe_inputs(const model& m)
        : tokens(spread_ids(kMaxRows, m.hp().n_vocab, 7919)),
          ids(spread_ids(std::min(kSubsetIds, m.hp().n_vocab), m.hp().n_vocab, 0)),
          n_ids(int(ids.size())),
          big(draft_vocab::kind::nanospec, m.output(), n_ids, 0.0f),
          small(draft_vocab::kind::nanospec, m.output(), n_ids / 8, 0.0f) {
        big.add(ids.data(), n_ids);
        small.add(ids.data(), n_ids / 8);
    }
    // n ids: (i * stride + 2) % n_vocab, or evenly spaced over the vocabulary for stride 0.
    static std::vector<int32_t> spread_ids(int n, int n_vocab, int stride) {
        std::vector<int32_t> v(static_cast<size_t>(n));
        for (int i = 0; i < n; ++i) v[size_t(i)] = stride ? int32_t((i * stride + 2) % n_vocab) : int32_t(i * (n_vocab / n));
        return v;
    }
    // The subset head's cost per id and fixed part from the two sets' times.
    void fit_subset_head(double sub, double sub_small, double& per_id, double& base) const {
        const double n_big = double(n_ids), n_small = double(n_ids / 8);
        per_id = std::max(0.0, (sub - sub_small) / (n_big - n_small));
        base = std::max(0.0, sub_small - per_id * n_small);
    }
    std::vector<int32_t> tokens, ids;
    int n_ids;
    draft_vocab big, small;
};
}  // namespace

double probe_row_seconds(const model& target, backend& be, kv_cache& cache) {
    evaluator ev(target, be);
    const int32_t token = 2;
    std::vector<float> logits(size_t(target.hp().n_vocab));
    double best = std::numeric_limits<double>::infinity();
    for (int rep = 0; rep < 3; ++rep) {  // the first pages the weights in
        const double t0 = now();
        ev.forward(cache, &token, 1, 0, target.hp().n_layer);
        ev.logits(ev.hidden(), 1, logits.data());
        if (rep > 0) best = std::min(best, now() - t0);
    }
    return best;
}

cost_model measure_costs(const model& target, backend& be, kv_cache& cache) {
    evaluator ev(target, be);
    const hparams& hp = target.hp();
    probe_inputs in(target);
    const std::vector<int32_t>& tokens = in.tokens;
    std::vector<float> logits(size_t(kMaxRows) * hp.n_vocab);
    cost_model c;
    c.verify.assign(kMaxRows, std::numeric_limits<double>::infinity());
    c.head_full.assign(kMaxRows, std::numeric_limits<double>::infinity());
    double body1 = std::numeric_limits<double>::infinity(), sub = body1, sub_small = body1;
    ev.forward(cache, tokens.data(), 1, 0, hp.n_layer);  // warm-up (page in the weights)
    ev.logits(ev.hidden(), 1, logits.data());
    for (int rep = 0; rep < kRepeats; ++rep) {
        for (int r = 1; r <= kMaxRows; ++r) {
            const double t0 = now();
            ev.forward(cache, tokens.data(), r, 0, hp.n_layer);
            const double t1 = now();
            ev.logits(ev.hidden(), r, logits.data());
            const double t2 = now();
            c.verify[size_t(r - 1)] = std::min(c.verify[size_t(r - 1)], t2 - t0);
            c.head_full[size_t(r - 1)] = std::min(c.head_full[size_t(r - 1)], t2 - t1);
            if (r == 1) {
                body1 = std::min(body1, t1 - t0);
                const double t3 = now();
                in.big.logits(be, ev.hidden(), 1, logits.data());
                const double t4 = now();
                in.small.logits(be, ev.hidden(), 1, logits.data());
                const double t5 = now();
                sub = std::min(sub, t4 - t3);
                sub_small = std::min(sub_small, t5 - t4);
            }
        }
    }
    // T(R) and the head are non-decreasing in R; smooth the noise of single measurements.
    for (int r = 1; r < kMaxRows; ++r) {
        c.verify[size_t(r)] = std::max(c.verify[size_t(r)], c.verify[size_t(r - 1)]);
        c.head_full[size_t(r)] = std::max(c.head_full[size_t(r)], c.head_full[size_t(r - 1)]);
    }
    c.body_row = body1;
    in.fit_subset_head(sub, sub_small, c.head_per_id, c.head_subset_base);
    return c;
}

void measure_draft_costs(const model& draft, backend& be, cost_model& c) {
    const hparams& hp = draft.hp();
    kv_cache cache(hp, kMaxRows + 1);
    evaluator ev(draft, be);
    probe_inputs in(draft);
    const std::vector<int32_t>& tokens = in.tokens;
    std::vector<float> logits(size_t(hp.n_vocab));
    const double inf = std::numeric_limits<double>::infinity();
    c.draft_forward.assign(kMaxRows, inf);
    double head = inf, sub = inf, sub_small = inf;
    ev.forward(cache, tokens.data(), 1, 0, hp.n_layer);  // warm-up (page in the weights)
    ev.logits(ev.hidden(), 1, logits.data());
    for (int rep = 0; rep < kRepeats; ++rep) {
        for (int r = 1; r <= kMaxRows; ++r) {
            const double t0 = now();
            ev.forward(cache, tokens.data(), r, 0, hp.n_layer);
            c.draft_forward[size_t(r - 1)] = std::min(c.draft_forward[size_t(r - 1)], now() - t0);
        }
        const double t1 = now();
        ev.logits(ev.hidden(), 1, logits.data());
        const double t2 = now();
        in.big.logits(be, ev.hidden(), 1, logits.data());
        const double t3 = now();
        in.small.logits(be, ev.hidden(), 1, logits.data());
        const double t4 = now();
        head = std::min(head, t2 - t1);
        sub = std::min(sub, t3 - t2);
        sub_small = std::min(sub_small, t4 - t3);
    }
    for (int r = 1; r < kMaxRows; ++r)
        c.draft_forward[size_t(r)] = std::max(c.draft_forward[size_t(r)], c.draft_forward[size_t(r - 1)]);
    c.draft_head_full = head;
    in.fit_subset_head(sub, sub_small, c.draft_head_per_id, c.draft_head_subset_base);
}

void measure_eagle3_costs(const eagle3_head& head, backend& be, cost_model& c) {
    const int E = head.hp.n_embd;
    const int64_t F = int64_t(head.target_layers.size()) * head.target_hidden;
    kv_cache cache(head.hp, kMaxRows + 1);
    eagle3_evaluator ev(head, be);
    backend_buffer<float> features(be);  // one target row's captured features (zeros: the time is the same)
    features.reserve(size_t(F));
    std::vector<float> g(static_cast<size_t>(E)), logits(static_cast<size_t>(head.n_draft_vocab()));
    // Two subsets S of the head's draft ids (an eighth of the draft vocabulary, at most kSubsetIds, and an
    // eighth of that), each with its own matrix as NanoSpec's drafter keeps it.
    const int n_big = std::max(8, std::min(kSubsetIds, head.n_draft_vocab() / 8)), n_small = std::max(1, n_big / 8);
    std::vector<int32_t> ids;
    for (int i = 0; i < n_big && i < head.n_draft_vocab(); ++i)
        ids.push_back(head.d2t[size_t(int64_t(i) * head.n_draft_vocab() / n_big)]);
    draft_vocab big(draft_vocab::kind::nanospec, head.output, int32_t(ids.size()), 0.0f, 1, head.d2t);
    draft_vocab small(draft_vocab::kind::nanospec, head.output, n_small, 0.0f, 1, head.d2t);
    big.add(ids.data(), int64_t(ids.size()));
    small.add(ids.data(), int64_t(n_small));
    const int32_t token = 2;
    const double inf = std::numeric_limits<double>::infinity();
    double row = inf, full = inf, sub = inf, sub_small = inf;
    for (int rep = 0; rep <= kRepeats; ++rep) {  // the first pages the weights in
        const double t0 = now();
        ev.fuse(features.data(), 1, g.data());
        ev.forward(cache, &token, g.data(), 1, rep);
        const double t1 = now();
        ev.logits(0, logits.data());
        const double t2 = now();
        ev.logits(0, big.head(), logits.data());
        const double t3 = now();
        ev.logits(0, small.head(), logits.data());
        const double t4 = now();
        if (rep == 0) continue;
        row = std::min(row, t1 - t0);
        full = std::min(full, t2 - t1);
        sub = std::min(sub, t3 - t2);
        sub_small = std::min(sub_small, t4 - t3);
    }
    c.eagle3_row = row;
    c.eagle3_output_full = full;
    const double n_b = double(big.size()), n_s = double(small.size());
    c.eagle3_output_per_id = n_b > n_s ? std::max(0.0, (sub - sub_small) / (n_b - n_s)) : 0.0;
    c.eagle3_output_subset_base = std::max(0.0, sub_small - c.eagle3_output_per_id * n_s);
}

std::string cost_model_json(const cost_model& c) {
    std::ostringstream o;
    o.precision(9);
    o << "{\n  \"version\": 1,\n";
    put_list(o, "verify_seconds", c.verify);
    put_list(o, "head_full_seconds", c.head_full);
    o << "  \"body_row_seconds\": " << c.body_row << ",\n";
    o << "  \"head_per_id_seconds\": " << c.head_per_id << ",\n";
    o << "  \"head_subset_base_seconds\": " << c.head_subset_base;
    if (c.has_draft()) {
        o << ",\n";
        put_list(o, "draft_forward_seconds", c.draft_forward);
        o << "  \"draft_head_full_seconds\": " << c.draft_head_full << ",\n";
        o << "  \"draft_head_per_id_seconds\": " << c.draft_head_per_id << ",\n";
        o << "  \"draft_head_subset_base_seconds\": " << c.draft_head_subset_base;
    }
    if (c.has_eagle3()) {
        o << ",\n";
        o << "  \"eagle3_row_seconds\": " << c.eagle3_row << ",\n";
        o << "  \"eagle3_output_full_seconds\": " << c.eagle3_output_full << ",\n";
        o << "  \"eagle3_output_per_id_seconds\": " << c.eagle3_output_per_id << ",\n";
        o << "  \"eagle3_output_subset_base_seconds\": " << c.eagle3_output_subset_base;
    }
    o << "\n}\n";
    return o.str();
}

bool parse_cost_model_json(const std::string& text, cost_model& out) {
    std::vector<double> v;
    cost_model c;
    if (!get_numbers(text, "verify_seconds", c.verify) || !get_numbers(text, "head_full_seconds", c.head_full)) return false;
    if (!get_numbers(text, "body_row_seconds", v)) return false;
    c.body_row = v[0];
    if (!get_numbers(text, "head_per_id_seconds", v)) return false;
    c.head_per_id = v[0];
    if (!get_numbers(text, "head_subset_base_seconds", v)) return false;
    c.head_subset_base = v[0];
    c.exact = get_numbers(text, "exact", v) && v[0] != 0;  // optional
    for (double x : c.verify)
        if (!(x > 0)) return false;
    if (!c.valid()) return false;
    // The draft model's part is optional (a file for the target alone has none); taken whole or not at all.
    cost_model d;
    if (get_numbers(text, "draft_forward_seconds", d.draft_forward) && get_numbers(text, "draft_head_full_seconds", v)) {
        d.draft_head_full = v[0];
        const bool ids = get_numbers(text, "draft_head_per_id_seconds", v);
        d.draft_head_per_id = ids ? v[0] : -1;
        const bool base = get_numbers(text, "draft_head_subset_base_seconds", v);
        d.draft_head_subset_base = base ? v[0] : -1;
        const bool rows_ok = std::all_of(d.draft_forward.begin(), d.draft_forward.end(), [](double x) { return x > 0; });
        if (ids && base && rows_ok && d.draft_head_full > 0 && d.draft_head_per_id >= 0 && d.draft_head_subset_base >= 0) {
            c.draft_forward = d.draft_forward;
            c.draft_head_full = d.draft_head_full;
            c.draft_head_per_id = d.draft_head_per_id;
            c.draft_head_subset_base = d.draft_head_subset_base;
        }
    }
    // The EAGLE-3 head's part likewise: optional, whole or not at all.
    double e[4];
    const char* keys[4] = {"eagle3_row_seconds", "eagle3_output_full_seconds", "eagle3_output_per_id_seconds",
                           "eagle3_output_subset_base_seconds"};
    bool head_ok = true;
    for (int i = 0; i < 4 && head_ok; ++i) {
        head_ok = get_numbers(text, keys[i], v) && v[0] >= 0;
        e[i] = head_ok ? v[0] : 0;
    }
    if (head_ok && e[0] > 0 && e[1] > 0) {
        c.eagle3_row = e[0];
        c.eagle3_output_full = e[1];
        c.eagle3_output_per_id = e[2];
        c.eagle3_output_subset_base = e[3];
    }
    out = c;
    return true;
}

// The file these kernels were loaded from, its size and modification time: another build of the same
// version (a kernel change, another compiler flag) has other costs, and must not reuse this one's.
static std::string build_identity() {
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&build_identity), &info) == 0 || !info.dli_fname) return "";
    struct stat st {};
    if (::stat(info.dli_fname, &st) != 0) return info.dli_fname;
    return std::string(info.dli_fname) + "|" + std::to_string((long long)st.st_size) + "|" +
           std::to_string((long long)st.st_mtime);
}

cost_model load_or_measure_costs(const model& target, backend& be, kv_cache& cache, const std::string& model_path,
                                 int n_threads, const std::string& device, std::string& source, const model* draft,
                                 const std::string& draft_path, const eagle3_head* head, const std::string& head_path) {
    source.clear();
    const char* env = std::getenv("SPECGEN_CALIBRATION");
    const std::string over = env ? env : "";
    const auto measure = [&] {
        cost_model c = measure_costs(target, be, cache);
        if (draft) measure_draft_costs(*draft, be, c);
        if (head) measure_eagle3_costs(*head, be, c);
        return c;
    };
    if (over == "off") return measure();
    std::string path = over;
    if (path.empty()) {
        struct stat st {};
        const long long size = ::stat(model_path.c_str(), &st) == 0 ? (long long)st.st_size : -1;
        // The kernels that will run are part of the machine: another ISA or layout has other costs.
        std::string kernels = cpu_isa_name(active_cpu_isa());
        const layer_weights& L = target.layer(0);
        for (const weight_view* w : {&target.output(), &L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) {
            const std::string tag = std::string("+rows16:") + ggml_type_name(w->type);
            if (rows16_available(w->type) && kernels.find(tag) == std::string::npos) kernels += tag;
        }
        const std::string key = model_path + "|" + std::to_string(size) + "|" + std::to_string(n_threads) + "|" + device +
                                "|" + std::to_string(std::thread::hardware_concurrency()) + "|" + version() + "|" + build_identity() +
                                "|" + kernels;
        std::string pair;  // the cache is per target + draft model pair
        if (draft) {
            struct stat dst {};
            const long long dsize = ::stat(draft_path.c_str(), &dst) == 0 ? (long long)dst.st_size : -1;
            pair = "|draft:" + draft_path + "|" + std::to_string(dsize);
        }
        if (head) {  // and per EAGLE-3 head
            struct stat hst {};
            const long long hsize = ::stat(head_path.c_str(), &hst) == 0 ? (long long)hst.st_size : -1;
            pair += "|head:" + head_path + "|" + std::to_string(hsize);
        }
        char hex[17];
        std::snprintf(hex, sizeof hex, "%016llx", (unsigned long long)fnv1a(key + pair));
        const char* xdg = std::getenv("XDG_CACHE_HOME");
        const char* home = std::getenv("HOME");
        if (!(xdg && *xdg) && !(home && *home)) return measure();
        const std::string dir = (xdg && *xdg) ? std::string(xdg) + "/specgen" : std::string(home) + "/.cache/specgen";
        ::mkdir((xdg && *xdg) ? xdg : (std::string(home) + "/.cache").c_str(), 0755);
        ::mkdir(dir.c_str(), 0755);
        path = dir + "/calibration-" + hex + ".json";
    }
    {
        std::ifstream in(path);
        if (in) {
            std::stringstream ss;
            ss << in.rdbuf();
            cost_model c;
            if (parse_cost_model_json(ss.str(), c)) {
                // A file the user named is taken as it is; the automatic cache is checked against now.
                const double ratio = over.empty() ? probe_row_seconds(target, be, cache) / c.verify[0] : 1.0;
                // Written without this draft model: a named file keeps its target costs and the draft
                // model's are measured now; the automatic cache is measured again whole.
                const bool lacks_draft = draft && !c.has_draft();
                const bool lacks_head = head && !c.has_eagle3();
                if (ratio < kStaleRatio && ratio > 1.0 / kStaleRatio && !((lacks_draft || lacks_head) && over.empty())) {
                    if (lacks_draft) measure_draft_costs(*draft, be, c);
                    if (lacks_head) measure_eagle3_costs(*head, be, c);
                    source = path;
                    return c;
                }
            }
        }
    }
    cost_model c = measure();
    const std::string tmp = path + ".tmp" + std::to_string(uint64_t(now() * 1e6));
    std::ofstream out(tmp);
    if (out << cost_model_json(c)) {
        out.close();
        if (std::rename(tmp.c_str(), path.c_str()) == 0) source = path;
    }
    std::remove(tmp.c_str());
    return c;
}

}  // namespace specgen
