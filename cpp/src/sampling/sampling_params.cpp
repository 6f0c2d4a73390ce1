// sampling_params::validate(): every field's domain, checked once before a request starts.
#include <cmath>
#include <string>

#include "common/error.h"
#include "sampling/sampling.h"

namespace specgen {

[[noreturn]] static void bad_field(const char* field, double value, const char* domain) {
    throw invalid_argument_error("sampling_params." + std::string(field) + " = " +
                                 std::to_string(value) + ": must be " + domain);
}

void sampling_params::validate() const {
    // Written as !(ok) so that NaN, which fails every comparison, is rejected too.
    if (!(std::isfinite(temperature) && temperature >= 0.0f))
        bad_field("temperature", temperature, "finite and >= 0 (0 = greedy)");
    if (top_k < 0) bad_field("top_k", top_k, ">= 0 (0 = off)");
    if (!(top_p > 0.0f && top_p <= 1.0f)) bad_field("top_p", top_p, "in (0, 1] (1 = off)");
    if (!(min_p >= 0.0f && min_p <= 1.0f)) bad_field("min_p", min_p, "in [0, 1] (0 = off)");
    if (!(std::isfinite(repeat_penalty) && repeat_penalty > 0.0f))
        bad_field("repeat_penalty", repeat_penalty, "finite and > 0 (1 = off)");
    if (repeat_last_n < -1) bad_field("repeat_last_n", repeat_last_n, ">= -1 (0 = off, -1 = all)");
}

}  // namespace specgen
