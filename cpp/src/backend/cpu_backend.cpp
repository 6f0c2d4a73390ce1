// CPU implementation of the backend interface: quantized matmuls through the kernels of
// cpp/src/quant (SIMD chosen at start-up), exp / GELU / SiLU through those of vec_math.h (same
// bits on every ISA), the rest as plain loops over rows split across a thread pool. Every row is
// computed by exactly one thread with a fixed accumulation order.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <vector>

#include "backend/backend.h"
#include "backend/kv_convert.h"
#include "backend/thread_pool.h"
#include "backend/vec_math.h"
#include "common/error.h"
#include "quant/quant.h"
#include "quant/rows16.h"

namespace specgen {

namespace {

// Matmul rows are handed to threads in groups of this many: the multi-row kernels' tile height, and
// a whole number of rows16 groups (a packed matrix is split at group boundaries).
constexpr int64_t kRowGroup = 16;
static_assert(kRowGroup % kRows16 == 0, "matmul chunks must start at rows16 group boundaries");

// Elementwise work below this size runs on the calling thread: waking the pool costs more.
constexpr int64_t kElementwiseGrain = 16384;

// RoPE cos/sin of positions [0, n_pos) for one set of frequencies (rope_freqs' contents), grown on
// demand: rope() runs twice per layer over the same positions, and the table serves every later call
// too. Values as Hugging Face computes them: float32 inverse frequency times float32 position, cos/sin
// (here in double, rounded to float) times the float attention factor.
struct rope_table {
    std::vector<float> inv_freq;  // [half]
    float mscale;
    std::vector<float> cos, sin;  // [n_pos, half]
    int n_pos = 0;
};

// Positions beyond this are computed per call instead of cached (a table row is head_dim floats).
constexpr int kRopeMaxCached = 1 << 16;

inline void rope_angles(const float* inv_freq, float mscale, int half, int pos, float* c, float* s) {
    for (int i = 0; i < half; ++i) {
        const float angle = float(pos) * inv_freq[i];
        c[i] = float(std::cos(double(angle))) * mscale;
        s[i] = float(std::sin(double(angle))) * mscale;
    }
}

// Query rows of one attention work item: at most this many (items also split by head).
constexpr int kAttnChunk = 16;

// Cache rows a block of attend_group's passes takes: 64 KB of f32 keys at head_dim 128, kept in cache while
// every query head of the group and every query row of the item reads them.
constexpr int kKeyBlock = 128;

// One kv head's keys (or values) in the cache, handed to attend_group a block of rows at a time. f32 rows
// are read in place; f16 / q8_0 rows are converted block by block into the thread's scratch (kKeyBlock rows
// of head_dim floats), so the converted block is still in cache when every head and query row reads it.
// The conversion is exact, so both give the same floats.
class head_rows {
public:
    // The kv head's row 0 at `head` in the cache, rows `row_bytes` apart, in the cache's type.
    head_rows(const void* head, ggml_type type, size_t row_bytes, int D, float* scratch)
        : base_(static_cast<const uint8_t*>(head)), type_(type), row_bytes_(row_bytes), scratch_(scratch),
          step_(type == ggml_type::F32 ? int64_t(row_bytes / sizeof(float)) : D), D_(D) {}
    // f32 rows of a float array, `stride` floats apart (backend::attention's whole-row caches).
    head_rows(const float* head, int64_t stride, int D) : head_rows(head, ggml_type::F32, size_t(stride) * sizeof(float), D, nullptr) {}
    // Rows [b0, b1] (at most kKeyBlock of them) as floats: row j at the result + (j - b0) * step().
    const float* block(int b0, int b1) const {
        if (type_ == ggml_type::F32) return reinterpret_cast<const float*>(base_ + size_t(b0) * row_bytes_);
        for (int j = b0; j <= b1; ++j) kv::to_float(type_, base_ + size_t(j) * row_bytes_, scratch_ + (j - b0) * step_, D_);
        return scratch_;
    }
    int64_t step() const { return step_; }

private:
    const uint8_t* base_;
    ggml_type type_;
    size_t row_bytes_;
    float* scratch_;
    int64_t step_;
    int D_;
};

// The (query, output) pairs of one block that read the same cache rows [f, l], handed to a grouped kernel
// (vec::dot_rows_multi, vec::weighted_sum_rows_add_multi) up to kMax at a time: every query row of an item
// before the diagonal block, and the query heads of a kv head always. Each output's bits are the one-query
// kernel's, so how the pairs are grouped changes nothing.
struct grouped_rows {
    static constexpr int kMax = 32;
    const float* in[kMax];
    float* out[kMax];
    int n = 0, f = 0, l = -1;
    template <class Kernel>
    void add(int f_, int l_, const float* x, float* y, Kernel&& kernel) {
        if (n == kMax || (n > 0 && (f_ != f || l_ != l))) flush(kernel);
        f = f_, l = l_;
        in[n] = x;
        out[n++] = y;
    }
    template <class Kernel>
    void flush(Kernel&& kernel) {
        if (n > 0) kernel(*this);
        n = 0;
    }
};

// Causal attention of query rows [t0, t1) (positions sp[t], rising) and query heads [h0, h1) that share one
// kv head, over cache rows [0, n_kv) of keys K and values V. Keys and values pass in blocks of kKeyBlock
// rows that all the heads and rows read while they are in cache (each head streaming the whole range again
// measured slower at long contexts). Each output's sums run in an order fixed by its own row alone (the
// value sum continues block after block), so every caller and every grouping of heads and rows gives the
// same bits. scores: (h1 - h0) * (t1 - t0) * n_kv floats; sums: (h1 - h0) * (t1 - t0).
inline void attend_group(const float* q, int t0, int t1, int h0, int h1, const head_rows& K, const head_rows& V,
                         const int32_t* sp, int n_kv, const attention_params& p, float* scores, float* sums, float* out) {
    const int D = p.head_dim, nt = t1 - t0;
    auto last_of = [&](int t) { return std::min(int(sp[t]), n_kv - 1); };
    auto first_of = [&](int t) { return p.sliding_window > 0 ? std::max(0, int(sp[t]) - p.sliding_window + 1) : 0; };
    auto row_scores = [&](int h, int t) { return scores + (int64_t(h - h0) * nt + (t - t0)) * n_kv; };
    auto head_out = [&](int h, int t) { return out + (int64_t(t) * p.n_head + h) * D; };
    const int lo = first_of(t0), hi = last_of(t1 - 1);
    for (int b0 = lo; b0 <= hi; b0 += kKeyBlock) {
        const int b1 = std::min(hi, b0 + kKeyBlock - 1);
        const float* keys = K.block(b0, b1);
        grouped_rows queries;
        auto dots = [&](const grouped_rows& g) {
            vec::dot_rows_multi(g.in, g.n, keys + (g.f - b0) * K.step(), K.step(), g.l - g.f + 1, D, g.out);
        };
        for (int t = t0; t < t1; ++t) {
            const int f = std::max(first_of(t), b0), l = std::min(last_of(t), b1);
            if (f > l) continue;
            for (int h = h0; h < h1; ++h) queries.add(f, l, q + (int64_t(t) * p.n_head + h) * D, row_scores(h, t) + f, dots);
        }
        queries.flush(dots);
    }
    for (int h = h0; h < h1; ++h)
        for (int t = t0; t < t1; ++t) {
            float* s = row_scores(h, t);
            const int first = first_of(t), last = last_of(t);
            float max_s = -INFINITY;
            for (int j = first; j <= last; ++j) {
                float x = s[j] * p.scale;
                if (p.softcap > 0) x = p.softcap * std::tanh(x / p.softcap);
                s[j] = x;
                max_s = std::max(max_s, x);
            }
            sums[(h - h0) * nt + (t - t0)] = vec::exp_sub_sum(s + first, last - first + 1, max_s);
            std::fill(head_out(h, t), head_out(h, t) + D, 0.0f);
        }
    for (int b0 = lo; b0 <= hi; b0 += kKeyBlock) {
        const int b1 = std::min(hi, b0 + kKeyBlock - 1);
        const float* values = V.block(b0, b1);
        grouped_rows outputs;
        auto sum = [&](const grouped_rows& g) {
            vec::weighted_sum_rows_add_multi(g.in, g.n, values + (g.f - b0) * V.step(), V.step(), g.l - g.f + 1, D, g.out);
        };
        for (int t = t0; t < t1; ++t) {
            const int f = std::max(first_of(t), b0), l = std::min(last_of(t), b1);
            if (f > l) continue;
            for (int h = h0; h < h1; ++h) outputs.add(f, l, row_scores(h, t) + f, head_out(h, t), sum);
        }
        outputs.flush(sum);
    }
    for (int h = h0; h < h1; ++h)
        for (int t = t0; t < t1; ++t) {
            const float inv = 1.0f / sums[(h - h0) * nt + (t - t0)];
            float* o = head_out(h, t);
            for (int d = 0; d < D; ++d) o[d] *= inv;
        }
}

class cpu_backend final : public backend {
public:
    explicit cpu_backend(int n_threads)
        : pool_(n_threads), scores_(pool_.n_threads()), attn_k_tmp_(pool_.n_threads()), attn_v_tmp_(pool_.n_threads()) {}

    const char* name() const override { return "cpu"; }
    int n_threads() const override { return pool_.n_threads(); }
    void set_active_threads(int n) override { pool_.set_active_threads(n); }

    void matmul(const weight_view& W, const float* x, int n_tokens, float* y) override {
        float* const ys[1] = {y};
        matmul_shared_input(&W, ys, 1, x, n_tokens);
    }

    void matmul_shared_input(const weight_view* Ws, float* const* ys, int n_mats, const float* x,
                             int n_tokens) override {
        // x quantized once per activation format; chunks are whole 16-row groups (multi-row kernels
        // stay on their fast path) of all matrices, in one parallel region: fewer hand-offs per token.
        std::vector<const void*>& xq = xq_of_mat_;  // [n_mats] x in the format of matrix i
        xq.assign(n_mats, nullptr);
        group_end_.resize(n_mats);
        int64_t n_groups = 0;
        for (int i = 0; i < n_mats; ++i) {
            for (int j = 0; j < i && !xq[i]; ++j)
                if (same_activation_format(Ws[i], Ws[j])) xq[i] = xq[j];
            if (!xq[i]) xq[i] = quantize_activations(Ws[i], x, n_tokens, i);
            n_groups += (Ws[i].n_rows + kRowGroup - 1) / kRowGroup;
            group_end_[i] = n_groups;
        }
        packed_of_mat_.resize(n_mats);
        for (int i = 0; i < n_mats; ++i) packed_of_mat_[i] = packed(Ws[i]);
        pool_.parallel_for(n_groups, [&](int, int64_t g0, int64_t g1) {
            while (g0 < g1) {  // the chunk's part in each matrix it spans
                const int i = int(std::upper_bound(group_end_.begin(), group_end_.end(), g0) - group_end_.begin());
                const int64_t first = i ? group_end_[i - 1] : 0, end = std::min(g1, group_end_[i]);
                const weight_view& W = Ws[i];
                const int64_t r0 = (g0 - first) * kRowGroup, r1 = std::min(W.n_rows, (end - first) * kRowGroup);
                if (packed_of_mat_[i]) matmul_rows16(W.type, packed_of_mat_[i], W.n_cols, xq[i], n_tokens, ys[i], W.n_rows, r0, r1);
                else matmul_rows(W.type, W.data, W.n_cols, xq[i], n_tokens, ys[i], W.n_rows, r0, r1);
                g0 = end;
            }
        });
    }

    void prepare(const weight_view& W) override { packed(W); }

    void matmul_selected(const weight_view& W, const int32_t* rows, int64_t n_sel, const float* x,
                         int n_tokens, float* y) override {
        const void* xq = quantize_activations(W, x, n_tokens);
        const size_t x_row = ggml_row_size(ggml_traits(W.type).vec_dot_type, W.n_cols);
        const size_t w_row = W.row_bytes();
        const uint8_t* base = static_cast<const uint8_t*>(W.data);
        if (packed(W)) {  // the selected rows packed the same way, so each output equals matmul's
            selected_rows_.resize(size_t(n_sel) * w_row);
            for (int64_t k = 0; k < n_sel; ++k) {
                if (rows[k] < 0 || rows[k] >= W.n_rows)
                    throw invalid_argument_error("matmul_selected: row " + std::to_string(rows[k]) + " out of range");
                std::memcpy(&selected_rows_[size_t(k) * w_row], base + rows[k] * w_row, w_row);
            }
            selected_packed_.resize(rows16_bytes(W.type, n_sel, W.n_cols));
            rows16_pack(W.type, selected_rows_.data(), n_sel, W.n_cols, selected_packed_.data(), 0, (n_sel + kRows16 - 1) / kRows16);
            pool_.parallel_for((n_sel + kRows16 - 1) / kRows16, [&](int, int64_t c0, int64_t c1) {
                matmul_rows16(W.type, selected_packed_.data(), W.n_cols, xq, n_tokens, y, n_sel, c0 * kRows16,
                             std::min(n_sel, c1 * kRows16));
            });
            return;
        }
        pool_.parallel_for(n_sel, [&](int, int64_t k0, int64_t k1) {
            for (int t = 0; t < n_tokens; ++t) {
                const uint8_t* xr = static_cast<const uint8_t*>(xq) + t * x_row;
                for (int64_t k = k0; k < k1; ++k)
                    y[t * n_sel + k] = vec_dot(W.type, W.n_cols, base + rows[k] * w_row, xr);
            }
        });
    }

    void get_rows(const weight_view& W, const int32_t* ids, int n, float* y) override {
        const uint8_t* base = static_cast<const uint8_t*>(W.data);
        for (int t = 0; t < n; ++t) {
            if (ids[t] < 0 || ids[t] >= W.n_rows)
                throw invalid_argument_error("token id " + std::to_string(ids[t]) + " out of range [0, " +
                                             std::to_string(W.n_rows) + ")");
            dequantize_row(W.type, base + ids[t] * W.row_bytes(), y + int64_t(t) * W.n_cols, W.n_cols);
        }
    }

    void rms_norm(const float* x, const float* w, int n_rows, int n, float eps, float* y) override {
        for (int r = 0; r < n_rows; ++r) {
            const float* xr = x + int64_t(r) * n;
            float* yr = y + int64_t(r) * n;
            double ss = 0.0;
            for (int i = 0; i < n; ++i) ss += double(xr[i]) * xr[i];
            const float scale = float(1.0 / std::sqrt(ss / n + eps));
            if (w) for (int i = 0; i < n; ++i) yr[i] = xr[i] * scale * w[i];
            else for (int i = 0; i < n; ++i) yr[i] = xr[i] * scale;
        }
    }

    void rope(float* x, int n_tokens, int n_heads, int head_dim, const int32_t* pos, const rope_freqs& freqs,
              rope_style style) override {
        const int half = head_dim / 2;
        rope_table& tab = rope_table_for(freqs, half);
        int max_pos = -1;
        for (int t = 0; t < n_tokens; ++t) max_pos = std::max(max_pos, pos[t]);
        if (max_pos >= tab.n_pos && tab.n_pos < kRopeMaxCached) {
            const int n = std::min(max_pos + 1, kRopeMaxCached);
            tab.cos.resize(size_t(n) * half);
            tab.sin.resize(size_t(n) * half);
            for (int p = tab.n_pos; p < n; ++p)
                rope_angles(tab.inv_freq.data(), tab.mscale, half, p, &tab.cos[size_t(p) * half], &tab.sin[size_t(p) * half]);
            tab.n_pos = n;
        }
        for (int t = 0; t < n_tokens; ++t) {
            const float* cs;
            const float* sn;
            if (pos[t] >= 0 && pos[t] < tab.n_pos) {
                cs = &tab.cos[size_t(pos[t]) * half];
                sn = &tab.sin[size_t(pos[t]) * half];
            } else {  // negative, or past kRopeMaxCached
                cos_.resize(half);
                sin_.resize(half);
                rope_angles(tab.inv_freq.data(), tab.mscale, half, pos[t], cos_.data(), sin_.data());
                cs = cos_.data();
                sn = sin_.data();
            }
            for (int h = 0; h < n_heads; ++h) {
                float* v = x + (int64_t(t) * n_heads + h) * head_dim;
                for (int i = 0; i < half; ++i) {
                    const int a = style == rope_style::neox ? i : 2 * i;
                    const int b = style == rope_style::neox ? i + half : 2 * i + 1;
                    const float x0 = v[a], x1 = v[b];
                    v[a] = x0 * cs[i] - x1 * sn[i];
                    v[b] = x0 * sn[i] + x1 * cs[i];
                }
            }
        }
    }

    void attention(const float* q, const float* k_cache, const float* v_cache, int n_tokens, const int32_t* pos,
                   int n_kv, const attention_params& p, float* out) override {
        const int64_t kv_stride = int64_t(p.n_head_kv) * p.head_dim;
        for (auto& s : scores_) if (int(s.size()) < n_kv + 1) s.resize(n_kv + 1);
        pool_.parallel_for(int64_t(n_tokens) * p.n_head, [&](int thread, int64_t i0, int64_t i1) {
            for (int64_t i = i0; i < i1; ++i) {
                const int t = int(i / p.n_head), h = int(i % p.n_head), hk = h / (p.n_head / p.n_head_kv);
                float* sc = scores_[thread].data();  // the row's sum, then its scores
                attend_group(q, t, t + 1, h, h + 1, head_rows(k_cache + hk * p.head_dim, kv_stride, p.head_dim),
                             head_rows(v_cache + hk * p.head_dim, kv_stride, p.head_dim), pos, n_kv, p, sc + 1, sc, out);
            }
        });
    }

    void attention_batch(const float* q, const attention_seq* seqs, int n_seqs, const int32_t* pos,
                         const attention_params& p, float* out) override {
        // Work items: (sequence, chunk of up to kAttnChunk query rows, kv head, a slice of the query heads
        // that share it), in one parallel region. The heads of a kv head stay in one item (attend_group
        // reads each key and value block once for all of them) unless the threads would go idle: then
        // they are sliced until there is an item per thread. F16 / Q8_0 cache rows are converted a block at a
        // time into the thread's scratch (head_rows); the arithmetic is attention()'s.
        const int D = p.head_dim, group = p.n_head / p.n_head_kv;
        int max_kv = 0, n_chunks = 0;
        for (int s = 0; s < n_seqs; ++s) {
            max_kv = std::max(max_kv, seqs[s].n_kv);
            n_chunks += (seqs[s].n_rows + kAttnChunk - 1) / kAttnChunk;
        }
        const int base = std::max(1, n_chunks * p.n_head_kv);
        const int slices = std::clamp((pool_.n_threads() + base - 1) / base, 1, group);
        attn_items_.clear();
        for (int s = 0; s < n_seqs; ++s)
            for (int r = 0; r < seqs[s].n_rows; r += kAttnChunk)
                for (int hk = 0; hk < p.n_head_kv; ++hk)
                    for (int sl = 0; sl < slices; ++sl)
                        attn_items_.push_back({s, r, std::min(seqs[s].n_rows, r + kAttnChunk), hk * group + sl * group / slices,
                                               hk * group + (sl + 1) * group / slices});
        // Per thread: an item's sums (at most group * kAttnChunk), then its scores.
        const size_t sums = size_t(group) * kAttnChunk;
        const size_t need = sums + size_t((group + slices - 1) / slices) * kAttnChunk * size_t(max_kv);
        for (auto& sc : scores_) if (sc.size() < need) sc.resize(need);
        for (auto* tmp : {&attn_k_tmp_, &attn_v_tmp_})
            for (auto& t : *tmp) if (t.size() < size_t(kKeyBlock) * D) t.resize(size_t(kKeyBlock) * D);
        // A kv head's rows of one cache tensor, read in place (f32) or converted into `scratch`.
        auto rows_of = [&](const void* cache, ggml_type type, size_t row_bytes, size_t head_bytes, int hk, float* scratch) {
            return head_rows(static_cast<const uint8_t*>(cache) + size_t(hk) * head_bytes, type, row_bytes, D, scratch);
        };
        pool_.parallel_for(int64_t(attn_items_.size()), [&](int thread, int64_t i0, int64_t i1) {
            for (int64_t i = i0; i < i1; ++i) {
                const attn_item& it = attn_items_[i];
                const attention_seq& sq = seqs[it.seq];
                const int hk = it.h0 / group;
                const int32_t* sp = pos + sq.row0;
                const head_rows K = rows_of(sq.k, sq.type_k, sq.row_bytes_k, sq.head_bytes_k, hk, attn_k_tmp_[thread].data());
                const head_rows V = rows_of(sq.v, sq.type_v, sq.row_bytes_v, sq.head_bytes_v, hk, attn_v_tmp_[thread].data());
                float* sc = scores_[thread].data();
                attend_group(q + sq.row0 * int64_t(p.n_head) * D, it.r0, it.r1, it.h0, it.h1, K, V, sp, sq.n_kv, p, sc + sums,
                             sc, out + sq.row0 * int64_t(p.n_head) * D);
            }
        });
    }

    void gelu_mul(const float* gate, const float* up, int64_t n, float* out) override {
        // vec:: kernels give each element the same bits wherever a chunk boundary falls.
        pool_.parallel_for(n, [&](int, int64_t i0, int64_t i1) {
            vec::gelu_mul(gate + i0, up + i0, i1 - i0, out + i0);
        }, kElementwiseGrain);
    }

    void silu_mul(const float* gate, const float* up, int64_t n, float* out) override {
        pool_.parallel_for(n, [&](int, int64_t i0, int64_t i1) {
            vec::silu_mul(gate + i0, up + i0, i1 - i0, out + i0);
        }, kElementwiseGrain);
    }

    void add(const float* a, const float* b, int64_t n, float* out) override {
        for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
    }

    void scale(const float* x, float s, int64_t n, float* out) override {
        for (int64_t i = 0; i < n; ++i) out[i] = x[i] * s;
    }

private:
    // W's rows16 layout (quant/rows16.h) when the active ISA computes W packed, else nullptr. Packed
    // once per model, on the first call for W from any backend.
    const void* packed(const weight_view& W) {
        if (!W.repack || !rows16_available(W.type)) return nullptr;
        weight_repack& R = *W.repack;
        std::call_once(R.once, [&] {
            R.allocate(rows16_bytes(W.type, W.n_rows, W.n_cols));
            pool_.parallel_for((W.n_rows + kRows16 - 1) / kRows16, [&](int, int64_t g0, int64_t g1) {
                rows16_pack(W.type, W.data, W.n_rows, W.n_cols, R.data.get(), g0, g1);
            }, 64);
            R.n_rows = W.n_rows;
            if (R.release_source) R.release_source(W.data, ggml_row_size(W.type, W.n_cols) * size_t(W.n_rows));
        });
        return W.n_rows <= R.n_rows ? R.data.get() : nullptr;
    }

    // Found by contents, not by pointer: a model freed and another loaded at the same address must not
    // reuse stale angles.
    rope_table& rope_table_for(const rope_freqs& f, int half) {
        for (rope_table& t : rope_tables_)
            if (t.mscale == f.mscale && int(t.inv_freq.size()) == half &&
                std::memcmp(t.inv_freq.data(), f.inv_freq, sizeof(float) * half) == 0)
                return t;
        rope_tables_.push_back(rope_table{std::vector<float>(f.inv_freq, f.inv_freq + half), f.mscale, {}, {}, 0});
        return rope_tables_.back();
    }

    static bool same_activation_format(const weight_view& a, const weight_view& b) {
        return a.n_cols == b.n_cols && ggml_traits(a.type).vec_dot_type == ggml_traits(b.type).vec_dot_type;
    }

    // Quantizes the rows of x into the weight's vec_dot_type, into scratch buffer `slot` (one per
    // matrix of a shared-input call, grown on demand); rows in parallel when there are several.
    const void* quantize_activations(const weight_view& W, const float* x, int n_tokens, int slot = 0) {
        const ggml_type xt = ggml_traits(W.type).vec_dot_type;
        const size_t row = ggml_row_size(xt, W.n_cols);
        if (int(xq_.size()) <= slot) xq_.resize(slot + 1);
        std::vector<uint8_t>& buf = xq_[slot];
        if (buf.size() < row * n_tokens) buf.resize(row * n_tokens);
        uint8_t* out = buf.data();
        pool_.parallel_for(n_tokens, [&](int, int64_t t0, int64_t t1) {
            for (int64_t t = t0; t < t1; ++t) quantize_row(xt, x + t * W.n_cols, out + t * row, W.n_cols);
        });
        return out;
    }

    thread_pool pool_;
    std::vector<std::vector<float>> scores_;  // per-thread attention scratch
    struct attn_item { int seq, r0, r1, h0, h1; };  // query rows [r0, r1), query heads [h0, h1) of one kv head
    std::vector<attn_item> attn_items_;                   // attention_batch's work items
    std::vector<std::vector<float>> attn_k_tmp_, attn_v_tmp_;  // per thread: a converted block of K / V rows
    std::vector<std::vector<uint8_t>> xq_;  // quantized activations, one buffer per slot
    std::vector<const void*> xq_of_mat_;    // matmul_shared_input scratch
    std::vector<const void*> packed_of_mat_;  // matmul_shared_input: each matrix's rows16 layout or null
    std::vector<uint8_t> selected_rows_, selected_packed_;  // matmul_selected of a packed matrix
    std::vector<int64_t> group_end_;        // matmul_shared_input: cumulative 16-row groups per matrix
    std::vector<float> cos_, sin_;          // rope() of positions outside the table
    std::vector<rope_table> rope_tables_;   // one per set of frequencies
};

}  // namespace

std::unique_ptr<backend> make_cpu_backend(int n_threads) { return std::make_unique<cpu_backend>(n_threads); }

}  // namespace specgen
