// Tiling driver shared by the SIMD matrix kernels (dot_avx2.cpp, dot_avx512.cpp). Include it only
// inside an anonymous namespace: each ISA file must get its own copy compiled with its own flags.
//
// A kernel K provides K::nr_decode (rows per tile when one token), K::nr_batch and K::nt_batch
// (rows x tokens per tile otherwise) and K::run<NR, NT>(n, W, w_stride, X, x_stride, Y, y_stride),
// which computes an NR x NT tile with one independent accumulator per output; every output goes
// through the same instruction sequence for any NR/NT, so tiling never changes a result.

// Weight matrices are streamed from memory once per call: each kernel requests the bytes it will
// reach kPrefetchBytes later. Per-row prefetch at 2 KB measured 13.0 -> 8.4 ms for the 262144 x 640
// Q8_0 head (one thread, one token) and 26.0 -> 11.7 ms for four tokens; the contiguous stream below
// (no gaps between tiles) raised 1024-column Q4_K from ~10 to ~26 GB/s (AVX-512, one thread).
constexpr int kPrefetchBytes = 2048;

// The rows of a tile are contiguous: [W, W + NR * ws). A kernel that reads them in n_steps steps
// calls step() once per step, which prefetches the next 1/n_steps of the tile's bytes
// kPrefetchBytes ahead.
class stream_prefetcher {
public:
    stream_prefetcher(const uint8_t* W, size_t tile_bytes, int64_t n_steps)
        : p_(W + kPrefetchBytes), step_((tile_bytes + n_steps - 1) / n_steps) {}
    void step() {
        const uint8_t* end = p_ + step_;
        for (const uint8_t* q = reinterpret_cast<const uint8_t*>(reinterpret_cast<uintptr_t>(p_) & ~uintptr_t(63));
             q < end; q += 64)
            _mm_prefetch(reinterpret_cast<const char*>(q), _MM_HINT_T0);
        p_ = end;
    }

private:
    const uint8_t* p_;
    size_t step_;
};

template <class K, int NT>
void rows_loop(int64_t n, const uint8_t* W, size_t ws, int n_rows, const uint8_t* X, size_t xs, float* Y,
               int64_t ys) {
    constexpr int NR = NT == 1 ? K::nr_decode : K::nr_batch;
    int r = 0;
    for (; r + NR <= n_rows; r += NR) K::template run<NR, NT>(n, W + r * ws, ws, X, xs, Y + r, ys);
    for (; r < n_rows; ++r) K::template run<1, NT>(n, W + r * ws, ws, X, xs, Y + r, ys);
}

// Signature of quant::gemm_fn; Y[t*ys + r] for t < n_tok, r < n_rows.
// Rows are walked in blocks that stay in cache while every token tile passes over them, so a batch
// of tokens (verification, prefill) reads the weights from memory once, not once per token tile.
template <class K>
void gemm_tiled(int64_t n, const void* Wv, size_t ws, int n_rows, const void* Xv, size_t xs, int n_tok, float* Y,
                int64_t ys) {
    const uint8_t* W = static_cast<const uint8_t*>(Wv);
    const uint8_t* X = static_cast<const uint8_t*>(Xv);
    constexpr int NTB = K::nt_batch;
    constexpr int kRowBlock = 32;
    for (int r0 = 0; r0 < n_rows; r0 += kRowBlock) {
        const int nr = n_rows - r0 < kRowBlock ? n_rows - r0 : kRowBlock;
        const uint8_t* Wb = W + r0 * ws;
        float* Yb = Y + r0;
        int t = 0;
        for (; t + NTB <= n_tok; t += NTB) rows_loop<K, NTB>(n, Wb, ws, nr, X + t * xs, xs, Yb + t * ys, ys);
        // The last n_tok % NTB tokens in one narrower tile, not one token at a time: 2 tokens took
        // 9.8 ms per Gemma 3 270M forward against 8.4 for 4 when each unpacked the weights alone.
        static_assert(NTB <= 4, "tails below handle up to 3 tokens");
        switch (n_tok - t) {
            case 3: rows_loop<K, 3>(n, Wb, ws, nr, X + t * xs, xs, Yb + t * ys, ys); break;
            case 2: rows_loop<K, 2>(n, Wb, ws, nr, X + t * xs, xs, Yb + t * ys, ys); break;
            case 1: rows_loop<K, 1>(n, Wb, ws, nr, X + t * xs, xs, Yb + t * ys, ys); break;
            default: break;
        }
    }
}

// For kernels whose per-token work can be done once per call (K::prepare into XP records,
// K::prepared_per_token(n) of them per token, K::run_prepared<NR, NT>(n, W, ws, P, per_token, Y, ys)):
// two or more tokens go through tiles of nr_batch rows x nt_prepared tokens that read the prepared
// tokens from memory, so wider token tiles fit the registers. One token keeps the plain kernel
// (memory-bound decode). Outputs are those of gemm_tiled: the prepared values are the ones the
// plain kernels compute inside each tile, and each output's operations are the same.
template <class K, class XP, int NT>
void rows_loop_prepared(int64_t n, const uint8_t* W, size_t ws, int n_rows, const XP* P, int64_t np, float* Y,
                        int64_t ys) {
    constexpr int NR = K::nr_batch;
    int r = 0;
    for (; r + NR <= n_rows; r += NR) K::template run_prepared<NR, NT>(n, W + r * ws, ws, P, np, Y + r, ys);
    for (; r < n_rows; ++r) K::template run_prepared<1, NT>(n, W + r * ws, ws, P, np, Y + r, ys);
}

template <class K, class XP>
void gemm_tiled_prepared(int64_t n, const void* Wv, size_t ws, int n_rows, const void* Xv, size_t xs, int n_tok,
                         float* Y, int64_t ys) {
    if (n_tok < 2) {
        gemm_tiled<K>(n, Wv, ws, n_rows, Xv, xs, n_tok, Y, ys);
        return;
    }
    const uint8_t* W = static_cast<const uint8_t*>(Wv);
    const uint8_t* X = static_cast<const uint8_t*>(Xv);
    constexpr int NTP = K::nt_prepared;
    static_assert(NTP <= 6, "tails below handle up to 5 tokens");
    constexpr int kRowBlock = 32;
    // Tokens prepared per pass over the rows: bounds the scratch (42 x 2048 columns: 504 KB, in L2).
    // A multiple of nt_prepared, so only a call's last chunk has a narrow tail tile: with 32 every
    // chunk of a 128-token prefill ended in a 2-token tile, which costs nearly a full one per row.
    constexpr int kTokenChunk = 7 * NTP;
    const int64_t np = K::prepared_per_token(n);
    thread_local std::vector<XP> prepared;
    for (int t0 = 0; t0 < n_tok; t0 += kTokenChunk) {
        const int nt = n_tok - t0 < kTokenChunk ? n_tok - t0 : kTokenChunk;
        if (prepared.size() < size_t(nt) * np) prepared.resize(size_t(nt) * np);
        const XP* P = prepared.data();
        K::prepare(n, X + t0 * xs, xs, nt, prepared.data());
        for (int r0 = 0; r0 < n_rows; r0 += kRowBlock) {
            const int nr = n_rows - r0 < kRowBlock ? n_rows - r0 : kRowBlock;
            const uint8_t* Wb = W + r0 * ws;
            float* Yb = Y + int64_t(t0) * ys + r0;
            int t = 0;
            for (; t + NTP <= nt; t += NTP) rows_loop_prepared<K, XP, NTP>(n, Wb, ws, nr, P + t * np, np, Yb + t * ys, ys);
            switch (nt - t) {
                case 5: rows_loop_prepared<K, XP, 5>(n, Wb, ws, nr, P + t * np, np, Yb + t * ys, ys); break;
                case 4: rows_loop_prepared<K, XP, 4>(n, Wb, ws, nr, P + t * np, np, Yb + t * ys, ys); break;
                case 3: rows_loop_prepared<K, XP, 3>(n, Wb, ws, nr, P + t * np, np, Yb + t * ys, ys); break;
                case 2: rows_loop_prepared<K, XP, 2>(n, Wb, ws, nr, P + t * np, np, Yb + t * ys, ys); break;
                case 1: rows_loop_prepared<K, XP, 1>(n, Wb, ws, nr, P + t * np, np, Yb + t * ys, ys); break;
                default: break;
            }
        }
    }
}
