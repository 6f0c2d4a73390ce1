// KV cache row conversions (backend/kv_convert.h) against their scalar references on every ISA this
// machine runs: f32 -> f16 / q8_0 bytes and f16 / q8_0 -> f32 floats must match bit for bit, on
// random rows of several magnitudes plus half-precision edge values (subnormals, ties, overflow).
// Also kv_cache::store / keys / values round trips for every type, where store puts a kv head's
// row (the head-major host layout), and the f32-only hand-over API.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "model/kv_cache.h"
#include "backend/kv_convert.h"
#include "quant/quant.h"

#include "check.h"

using namespace specgen;

namespace {
using test_support::check;
using test_support::failures;

std::vector<float> test_values(uint32_t seed, int n) {
    std::mt19937 rng(seed);
    std::vector<float> x(n);
    const float scales[] = {1e-6f, 1e-3f, 1.0f, 30.0f, 3000.0f, 70000.0f};
    for (int i = 0; i < n; ++i) {
        std::normal_distribution<float> d(0.0f, scales[(i / 64) % 6]);
        x[i] = d(rng);
    }
    // Edge values for f16: smallest subnormal, a tie, just below / above the overflow threshold.
    const float edges[] = {5.96046448e-8f, 2.98023224e-8f, 1.0f + 1.0f / 2048, 65504.0f, 65519.0f, 65520.0f, -0.0f, 0.0f};
    for (int i = 0; i < 8 && i < n; ++i) x[i * 37 % n] = edges[i];
    return x;
}
}  // namespace

int main() {
    const int n = 32 * 96;
    const cpu_isa isas[] = {cpu_isa::scalar, cpu_isa::avx2, cpu_isa::avx512};
    for (cpu_isa isa : isas) {
        try {
            set_cpu_isa(isa);
        } catch (const invalid_argument_error&) {
            continue;  // this machine cannot run it
        }
        const std::string tag = std::string(" [") + cpu_isa_name(isa) + "]";
        for (ggml_type t : {ggml_type::F32, ggml_type::F16, ggml_type::Q8_0}) {
            const std::string name = std::string(ggml_type_name(t)) + tag;
            const size_t bytes = ggml_row_size(t, n);
            for (uint32_t seed = 0; seed < 4; ++seed) {
                const std::vector<float> x = test_values(seed, n);
                std::vector<uint8_t> got(bytes), want(bytes);
                kv::from_float(t, x.data(), got.data(), n);
                kv::from_float_ref(t, x.data(), want.data(), n);
                check(got == want, "from_float " + name);
                std::vector<float> back(n), back_ref(n);
                kv::to_float(t, want.data(), back.data(), n);
                kv::to_float_ref(t, want.data(), back_ref.data(), n);
                check(std::memcmp(back.data(), back_ref.data(), n * sizeof(float)) == 0, "to_float " + name);
                // The references themselves: f16 through the scalar conversions, q8_0 through quant.h.
                if (t == ggml_type::F16) {
                    bool ok = true;
                    for (int i = 0; i < n; ++i) {
                        uint16_t h;
                        std::memcpy(&h, want.data() + 2 * i, 2);
                        ok &= h == fp32_to_fp16(x[i]);
                    }
                    check(ok, "f16 reference " + name);
                }
                if (t == ggml_type::Q8_0) {
                    std::vector<uint8_t> q(bytes);
                    quantize_row(ggml_type::Q8_0, x.data(), q.data(), n);
                    check(q == want, "q8_0 reference vs quantize_row " + name);
                    std::vector<float> dq(n);
                    dequantize_row(ggml_type::Q8_0, want.data(), dq.data(), n);
                    check(std::memcmp(dq.data(), back_ref.data(), n * sizeof(float)) == 0, "q8_0 dequant " + name);
                }
                if (t == ggml_type::F32)
                    check(std::memcmp(back.data(), x.data(), n * sizeof(float)) == 0, "f32 identity " + name);
            }
        }
    }
    set_cpu_isa(best_cpu_isa());

    // kv_cache: what store() writes, keys()/values() give back converted, per sequence.
    hparams hp;
    hp.n_layer = 2;
    hp.n_head_kv = 2;
    hp.head_dim = 64;
    auto be = make_cpu_backend(1);
    for (ggml_type t : {ggml_type::F32, ggml_type::F16, ggml_type::Q8_0}) {
        kv_cache c(hp, 8, 3, t, t);
        c.allocate(*be);
        check(c.bytes_per_sequence() == size_t(2) * 2 * 8 * ggml_row_size(t, 128), "bytes_per_sequence");
        const std::vector<float> k = test_values(11, 3 * 128), v = test_values(12, 3 * 128);
        c.store(*be, 1, 2, 4, 3, k.data(), v.data());
        std::vector<float> kt(8 * 128), vt(8 * 128), want(3 * 128);
        const float* kk = c.keys(1, 2, 4, 7, kt.data());
        const float* vv = c.values(1, 2, 4, 7, vt.data());
        std::vector<uint8_t> q(ggml_row_size(t, 3 * 128));
        kv::from_float_ref(t, k.data(), q.data(), 3 * 128);
        kv::to_float_ref(t, q.data(), want.data(), 3 * 128);
        check(std::memcmp(kk + 4 * 128, want.data(), want.size() * sizeof(float)) == 0, "store/keys " + std::string(ggml_type_name(t)));
        kv::from_float_ref(t, v.data(), q.data(), 3 * 128);
        kv::to_float_ref(t, q.data(), want.data(), 3 * 128);
        check(std::memcmp(vv + 4 * 128, want.data(), want.size() * sizeof(float)) == 0, "store/values " + std::string(ggml_type_name(t)));
        // The bytes where attention reads them (attention_seq: k + hk * head_bytes + p * pos_bytes): in
        // host memory each kv head's rows are one run (head-major).
        check(c.head_major() && c.head_bytes_k() == 8 * ggml_row_size(t, 64) && c.pos_bytes_k() == ggml_row_size(t, 64),
              "head-major host layout " + std::string(ggml_type_name(t)));
        {
            std::vector<uint8_t> head(ggml_row_size(t, 64));
            bool ok = true;
            for (int p = 0; p < 3; ++p)
                for (int hk = 0; hk < 2; ++hk) {
                    kv::from_float_ref(t, k.data() + p * 128 + hk * 64, head.data(), 64);
                    ok &= std::memcmp(static_cast<const uint8_t*>(c.k_data(1, 2)) + hk * c.head_bytes_k() + (4 + p) * c.pos_bytes_k(),
                                      head.data(), head.size()) == 0;
                    kv::from_float_ref(t, v.data() + p * 128 + hk * 64, head.data(), 64);
                    ok &= std::memcmp(static_cast<const uint8_t*>(c.v_data(1, 2)) + hk * c.head_bytes_v() + (4 + p) * c.pos_bytes_v(),
                                      head.data(), head.size()) == 0;
                }
            check(ok, "stored bytes at head_bytes / pos_bytes " + std::string(ggml_type_name(t)));
        }
        // copy_prefix to another sequence, then clear the source: the copy stays.
        c.copy_prefix(2, 0, 7);
        c.clear(2);
        std::vector<float> k0(8 * 128);
        const float* k0p = c.keys(1, 0, 4, 7, k0.data());
        kv::from_float_ref(t, k.data(), q.data(), 3 * 128);
        kv::to_float_ref(t, q.data(), want.data(), 3 * 128);
        check(std::memcmp(k0p + 4 * 128, want.data(), want.size() * sizeof(float)) == 0, "copy_prefix " + std::string(ggml_type_name(t)));
        const float* k2p = c.keys(1, 2, 4, 7, kt.data());
        bool zero = true;
        for (int i = 4 * 128; i < 7 * 128; ++i) zero &= k2p[i] == 0.0f;
        check(zero, "clear " + std::string(ggml_type_name(t)));
        // read_rows / write_rows: f32 only, a clear error otherwise.
        std::vector<float> rows(2 * 2 * 128);
        bool threw = false;
        try {
            c.read_rows(0, 1, rows.data());
        } catch (const invalid_argument_error&) {
            threw = true;
        }
        check(threw == (t != ggml_type::F32), "read_rows type check " + std::string(ggml_type_name(t)));
    }
    bool threw = false;
    try {
        hparams odd = hp;
        odd.head_dim = 48;
        kv_cache c(odd, 8, 1, ggml_type::Q8_0, ggml_type::F32);
    } catch (const invalid_argument_error&) {
        threw = true;
    }
    check(threw, "q8_0 with head_dim 48 rejected");

    if (failures) return 1;
    std::printf("test_kv_convert: all checks passed\n");
    return 0;
}
