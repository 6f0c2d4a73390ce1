// F32 / F16 / BF16 rows: dequantize (widen to float), quantize (round to nearest even) and the
// scalar reference dot with an F32 activation row (float accumulation in element order).
// Checked against gguf.quants (BF16) and numpy casts (F16) in tests/test_quant.py.
#include "quant/kernels.h"
#include "quant/quant.h"

namespace specgen {
namespace quant {

void dequant_f32(const void* src, float* dst, int64_t n) { std::memcpy(dst, src, n * sizeof(float)); }
void dequant_f16(const void* src, float* dst, int64_t n) {
    const uint16_t* s = static_cast<const uint16_t*>(src);
    for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(s[i]);
}
void dequant_bf16(const void* src, float* dst, int64_t n) {
    const uint16_t* s = static_cast<const uint16_t*>(src);
    for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(s[i]);
}

void quant_f32(const float* src, void* dst, int64_t n) { std::memcpy(dst, src, n * sizeof(float)); }
void quant_f16(const float* src, void* dst, int64_t n) {
    uint16_t* d = static_cast<uint16_t*>(dst);
    for (int64_t i = 0; i < n; ++i) d[i] = fp32_to_fp16(src[i]);
}
void quant_bf16(const float* src, void* dst, int64_t n) {
    uint16_t* d = static_cast<uint16_t*>(dst);
    for (int64_t i = 0; i < n; ++i) d[i] = fp32_to_bf16(src[i]);
}

float dot_f32_ref(int64_t n, const void* w, const void* x) {
    const float* a = static_cast<const float*>(w);
    const float* b = static_cast<const float*>(x);
    float s = 0;
    for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
    return s;
}
float dot_f16_ref(int64_t n, const void* w, const void* x) {
    const uint16_t* a = static_cast<const uint16_t*>(w);
    const float* b = static_cast<const float*>(x);
    float s = 0;
    for (int64_t i = 0; i < n; ++i) s += fp16_to_fp32(a[i]) * b[i];
    return s;
}
float dot_bf16_ref(int64_t n, const void* w, const void* x) {
    const uint16_t* a = static_cast<const uint16_t*>(w);
    const float* b = static_cast<const float*>(x);
    float s = 0;
    for (int64_t i = 0; i < n; ++i) s += bf16_to_fp32(a[i]) * b[i];
    return s;
}

}  // namespace quant
}  // namespace specgen
