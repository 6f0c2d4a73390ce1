#include "quant/ggml_type.h"

#include <string>

#include "common/error.h"

namespace specgen {

namespace {
// Indexed by the GGUF type number; entries with a null name are type numbers specgen does not know.
constexpr int kMaxType = 31;
const ggml_type_traits kTraits[kMaxType] = {
    /* 0 F32  */ {"F32", 1, 4, true, ggml_type::F32},
    /* 1 F16  */ {"F16", 1, 2, true, ggml_type::F32},
    /* 2 Q4_0 */ {"Q4_0", 32, 18, true, ggml_type::Q8_0},
    /* 3 Q4_1 */ {"Q4_1", 32, 20, true, ggml_type::Q8_0},
    /* 4      */ {nullptr, 0, 0, false, ggml_type::F32},
    /* 5      */ {nullptr, 0, 0, false, ggml_type::F32},
    /* 6 Q5_0 */ {"Q5_0", 32, 22, true, ggml_type::Q8_0},
    /* 7 Q5_1 */ {"Q5_1", 32, 24, true, ggml_type::Q8_0},
    /* 8 Q8_0 */ {"Q8_0", 32, 34, true, ggml_type::Q8_0},
    /* 9 Q8_1 */ {"Q8_1", 32, 36, false, ggml_type::Q8_0},
    /* 10 Q2_K */ {"Q2_K", 256, 84, false, ggml_type::Q8_K},
    /* 11 Q3_K */ {"Q3_K", 256, 110, false, ggml_type::Q8_K},
    /* 12 Q4_K */ {"Q4_K", 256, 144, true, ggml_type::Q8_K},
    /* 13 Q5_K */ {"Q5_K", 256, 176, true, ggml_type::Q8_K},
    /* 14 Q6_K */ {"Q6_K", 256, 210, true, ggml_type::Q8_K},
    /* 15 Q8_K */ {"Q8_K", 256, 292, false, ggml_type::Q8_K},
    {nullptr, 0, 0, false, ggml_type::F32}, {nullptr, 0, 0, false, ggml_type::F32},
    {nullptr, 0, 0, false, ggml_type::F32}, {nullptr, 0, 0, false, ggml_type::F32},
    {nullptr, 0, 0, false, ggml_type::F32}, {nullptr, 0, 0, false, ggml_type::F32},
    {nullptr, 0, 0, false, ggml_type::F32}, {nullptr, 0, 0, false, ggml_type::F32},
    {nullptr, 0, 0, false, ggml_type::F32}, {nullptr, 0, 0, false, ggml_type::F32},
    // Integer tensors hold indices, never weights (an EAGLE-3 head's d2t: I64): readable, not computable.
    /* 26 I32 */ {"I32", 1, 4, false, ggml_type::F32},
    /* 27 I64 */ {"I64", 1, 8, false, ggml_type::F32},
    {nullptr, 0, 0, false, ggml_type::F32}, {nullptr, 0, 0, false, ggml_type::F32},
    /* 30 BF16 */ {"BF16", 1, 2, true, ggml_type::F32},
};
}  // namespace

const ggml_type_traits* ggml_traits(uint32_t type) {
    if (type >= kMaxType || kTraits[type].name == nullptr) return nullptr;
    return &kTraits[type];
}

const ggml_type_traits& ggml_traits(ggml_type type) {
    const ggml_type_traits* t = ggml_traits(static_cast<uint32_t>(type));
    if (!t) throw invalid_argument_error("unknown ggml type " + std::to_string(static_cast<uint32_t>(type)));
    return *t;
}

const char* ggml_type_name(ggml_type type) { return ggml_traits(type).name; }

}  // namespace specgen
