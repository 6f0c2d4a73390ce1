#include "engine/params.h"

#include <cmath>

#include "common/error.h"

namespace specgen {

namespace {
void require(bool ok, const std::string& what) {
    if (!ok) throw invalid_argument_error(what);
}
}  // namespace

void generator_params::validate() const {
    require(!model_path.empty(), "model_path is empty");
    require(n_ctx > 0 && n_ctx <= (1 << 20), "n_ctx must be in [1, 1048576], got " + std::to_string(n_ctx));
    require(n_threads >= 0 && n_threads <= 512, "n_threads must be in [0, 512] (0 = auto), got " + std::to_string(n_threads));
    require(device == "cpu" || device == "cuda" ||
                (device.rfind("cuda:", 0) == 0 && device.size() > 5 && device.size() <= 8 &&
                 device.find_first_not_of("0123456789", 5) == std::string::npos),
            "device must be 'cpu', 'cuda' or 'cuda:N', got '" + device + "'");
    require(n_threads_draft >= 0 && n_threads_draft <= 512, "n_threads_draft must be in [0, 512], got " + std::to_string(n_threads_draft));
    require(draft_max >= 1 && draft_max <= 64, "draft_max must be in [1, 64], got " + std::to_string(draft_max));
    require(draft_min >= 0 && draft_min <= draft_max, "draft_min must be in [0, draft_max], got " + std::to_string(draft_min));
    require(std::isfinite(draft_p_min) && draft_p_min >= 0 && draft_p_min <= 1, "draft_p_min must be in [0, 1]");
    require(self_layers >= 0, "self_layers must be >= 0 (0 = all layers)");
    require(ngram_min >= 1 && ngram_max >= ngram_min && ngram_max <= 64, "need 1 <= ngram_min <= ngram_max <= 64");
    require(nanospec_capacity >= 16 && nanospec_capacity <= (1 << 20), "nanospec_capacity must be in [16, 1048576]");
    require(nanospec_topk >= 1 && nanospec_topk <= 64,
            "nanospec_topk must be in [1, 64], got " + std::to_string(nanospec_topk));
    require(frspec >= 0, "frspec must be >= 0");
    require(ssd_fanout >= 1 && ssd_fanout <= 64, "ssd_fanout must be in [1, 64], got " + std::to_string(ssd_fanout));
    require(ssd_budget >= -1, "ssd_budget must be >= -1 (-1 = until the verdict), got " + std::to_string(ssd_budget));
    require(std::isfinite(saguaro_c) && saguaro_c >= 0 && saguaro_c <= 1, "saguaro_c must be in [0, 1]");
    require(!ssd || (!draft.empty() && draft != "ngram"),
            "ssd=True needs a neural drafter: draft='self' or a draft model (got '" + draft + "')");
    require(!(nanospec && frspec > 0), "nanospec and frspec are alternatives: set one of them");
    require(!(nanospec || frspec > 0) || (!draft.empty() && draft != "ngram"),
            "nanospec/frspec choose a draft LM head: they need draft='self' or a draft model (got '" + draft + "')");
}

void generate_params::validate() const {
    sampling.validate();
    require(logprobs >= -1 && logprobs <= 1024, "logprobs must be in [-1, 1024] (-1 = off), got " + std::to_string(logprobs));
    for (const auto& s : stop) require(s.size() <= 4096, "stop strings must be at most 4096 bytes");
}

}  // namespace specgen
