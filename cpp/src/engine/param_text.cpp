// Setting a knob from its text (params.h, assign_param_text): the one map from the table's names to
// the structs' fields, so a front-end that reads text (the CLI) adds no per-knob code.
#include <algorithm>

#include "common/error.h"
#include "engine/params.h"

namespace specgen {

namespace {

// A flag's words: 1 true, 0 false, -1 neither.
int flag_word(const std::string& text) {
    if (text == "true" || text == "1" || text == "on") return 1;
    if (text == "false" || text == "0" || text == "off") return 0;
    return -1;
}

bool flag_value(const param_spec& s, const std::string& text, const std::string& label) {
    const int v = flag_word(text);
    if (v < 0) throw invalid_argument_error(label + " (" + s.name + ") takes true or false, got '" + text + "'");
    return v == 1;
}

// A toggle: a flag's words, or auto.
toggle toggle_value(const param_spec& s, const std::string& text, const std::string& label) {
    if (text == "auto") return toggle::automatic;
    const int v = flag_word(text);
    if (v < 0) throw invalid_argument_error(label + " (" + s.name + ") takes on, off or auto, got '" + text + "'");
    return v == 1 ? toggle::on : toggle::off;
}

}  // namespace

void assign_param_text(const param_spec& s, const std::string& text, const std::string& label, generator_params& g,
                       generate_params& r) {
    const std::string name = s.name;
    if (s.type == param_type::flag) {
        const bool v = flag_value(s, text, label);
        if (name == "draft_adaptive") g.draft_adaptive = v;
        else if (name == "reuse_draft_hidden") g.reuse_draft_hidden = v;
        else if (name == "batch_draft_policy") g.batch_draft_policy = v;
        else if (name == "ssd") g.ssd = v;
        else if (name == "add_bos") r.add_bos = v;
        else if (name == "ignore_eos") r.ignore_eos = v;
        else throw error("assign_param_text: flag '" + name + "' has no field");
        return;
    }
    if (s.type == param_type::toggle) {
        const toggle v = toggle_value(s, text, label);
        if (name == "nanospec") g.nanospec = v;
        else throw error("assign_param_text: toggle '" + name + "' has no field");
        return;
    }
    if (s.type == param_type::text) {
        if (name == "device") {
            parse_device(text);
            g.device = text;
        } else if (name == "draft_model") {
            if (text.empty()) throw invalid_argument_error(label + " expects a path, got ''");
            g.draft_model = text;
        } else if (name == "frspec_path") {
            g.frspec_path = text;
        } else if (name == "draft_head") {
            if (text.empty()) throw invalid_argument_error(label + " expects a path, got ''");
            g.draft_head = text;
        } else if (name == "stop") {
            if (text.empty()) throw invalid_argument_error(label + " expects a non-empty string");
            if (text.size() > 4096) throw invalid_argument_error(label + " strings must be at most 4096 bytes");
            r.stop.push_back(text);
        } else {
            throw error("assign_param_text: text '" + name + "' has no field");
        }
        return;
    }
    const long double v = parse_param_text(s, text, label);  // choices: their index
    const int32_t i = int32_t(v);
    if (name == "n_ctx") g.n_ctx = i;
    else if (name == "n_threads") g.n_threads = i;
    else if (name == "n_threads_draft") g.n_threads_draft = i;
    else if (name == "n_parallel") g.n_parallel = i;
    else if (name == "max_queued") g.max_queued = i;
    else if (name == "type_k") g.type_k = kv_type(i);
    else if (name == "type_v") g.type_v = kv_type(i);
    else if (name == "draft_kind") g.draft_type = draft_kind(i);
    else if (name == "verify") g.verify = i == 0 ? verify_mode::token : verify_mode::block;
    else if (name == "draft_max") g.draft_max = i;
    else if (name == "draft_min") g.draft_min = i;
    else if (name == "draft_p_min") g.draft_p_min = float(v);
    else if (name == "self_layers") g.self_layers = i;
    else if (name == "ngram_max") g.ngram_max = i;
    else if (name == "ngram_min") g.ngram_min = i;
    else if (name == "ngram_chain") g.ngram_chain = i;
    else if (name == "nanospec_capacity") g.nanospec_capacity = i;
    else if (name == "nanospec_topk") g.nanospec_topk = i;
    else if (name == "frspec") g.frspec = i;
    else if (name == "ssd_fanout") g.ssd_fanout = i;
    else if (name == "ssd_fanout_schedule") g.ssd_fanout_schedule = i == 0 ? ssd_schedule::uniform : ssd_schedule::geometric;
    else if (name == "ssd_backup") g.ssd_backup = i == 0 ? ssd_backup_mode::neural : ssd_backup_mode::fast;
    else if (name == "ssd_budget") g.ssd_budget = i;
    else if (name == "saguaro_c") g.saguaro_c = float(v);
    else if (name == "max_tokens") r.max_tokens = i;
    else if (name == "temperature") r.sampling.temperature = float(v);
    else if (name == "top_k") r.sampling.top_k = i;
    else if (name == "top_p") r.sampling.top_p = float(v);
    else if (name == "min_p") r.sampling.min_p = float(v);
    else if (name == "repeat_penalty") r.sampling.repeat_penalty = float(v);
    else if (name == "repeat_last_n") r.sampling.repeat_last_n = i;
    else if (name == "seed") r.seed = v < 0 ? random_seed() : uint64_t(v);
    else throw error("assign_param_text: '" + name + "' has no field");
}

std::vector<std::string> param_flag_names(const param_spec& s) {
    std::vector<std::string> out;
    const std::string all = s.flags;
    for (size_t at = 0; at < all.size();) {
        const size_t bar = std::min(all.find('|', at), all.size());
        out.push_back(all.substr(at, bar - at));
        at = bar + 1;
    }
    if ((s.type == param_type::flag || s.type == param_type::toggle) && !out.empty())
        out.push_back("--no-" + out.back().substr(2));
    return out;
}

}  // namespace specgen
