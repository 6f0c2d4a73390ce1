// What the SIMD kernels of the rows16 layout (rows16.h; rows16_avx2.cpp, rows16_avx512.cpp) share: the
// per-token part of a block and the tiling driver. Include it only inside an anonymous namespace,
// after <immintrin.h> and gemm_tiles.h: each ISA file gets its own copy compiled with its own flags
// (it needs AVX2).
//
// A kernel policy K provides block_elems (elements per block), record_bytes (one record: a block of 16
// rows), prep and prepare (below), max_tile (tokens per full tile); the ISA file defines
// groups_loop<K, NT>, which computes rows [0, n_rows) of W for NT tokens group by group.

// Q8_0 / Q5_0 / Q4_0 x Q8_0: the activation scale and, for kernels that multiply the weights as
// stored (unsigned, + OFFSET), the correction -OFFSET * the block's sum of x (OFFSET 0: none, 0).
struct rows16_prep_legacy {
    int32_t corr;
    float d;
};

template <int OFFSET>
void rows16_prepare_legacy(int64_t nb, const uint8_t* X, size_t xs, int n_tok, rows16_prep_legacy* P) {
    const __m256i bias = _mm256_set1_epi8(static_cast<char>(0x80)), zero = _mm256_setzero_si256();
    for (int t = 0; t < n_tok; ++t)
        for (int64_t b = 0; b < nb; ++b) {
            const block_q8_0& xb = reinterpret_cast<const block_q8_0*>(X + t * xs)[b];
            if constexpr (OFFSET == 0) {
                P[t * nb + b] = {0, _cvtsh_ss(xb.d)};
                continue;
            }
            // sum of x = sum of (x + 128) - 32 * 128, the former by sums of absolute differences
            const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs));
            const __m256i s = _mm256_sad_epu8(_mm256_xor_si256(v, bias), zero);
            const __m128i h = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
            const int32_t sum = int32_t(_mm_cvtsi128_si64(h) + _mm_extract_epi64(h, 1)) - 32 * 128;
            P[t * nb + b] = {-OFFSET * sum, _cvtsh_ss(xb.d)};
        }
}

// Q4_K x Q8_K: the activation scale and the sub-block sums of x in int16 pairs
// (bs_2i | bs_2i+1 << 16, bs_s = bsums[2s] + bsums[2s + 1]), the operand of a pairwise multiply-add
// with the record's interleaved mins.
struct rows16_prep_q4_k {
    float d;
    int32_t bs_pairs[4];
};

inline void rows16_prepare_q4_k(int64_t nb, const uint8_t* X, size_t xs, int n_tok, rows16_prep_q4_k* P) {
    for (int t = 0; t < n_tok; ++t)
        for (int64_t b = 0; b < nb; ++b) {
            const block_q8_k& xb = reinterpret_cast<const block_q8_k*>(X + t * xs)[b];
            rows16_prep_q4_k& p = P[t * nb + b];
            p.d = xb.d;
            for (int i = 0; i < 4; ++i) {
                const int lo = xb.bsums[4 * i] + xb.bsums[4 * i + 1];
                const int hi = xb.bsums[4 * i + 2] + xb.bsums[4 * i + 3];
                p.bs_pairs[i] = int32_t(uint32_t(uint16_t(lo)) | uint32_t(uint16_t(hi)) << 16);
            }
        }
}

// Q6_K x Q8_K: the activation scale and the offset correction (weights are stored + 32) in two forms:
// corr_s = -32 * (sub-block s's sum of x), the starting value of the sub-block's integer dot product
// (AVX-512), and the sums in int16 pairs (bs_2i | bs_2i+1 << 16), the operand of a pairwise multiply-add
// with the rows' scales (AVX2).
struct rows16_prep_q6_k {
    float d;
    int32_t corr[16];
    int32_t bs_pairs[8];
};

inline void rows16_prepare_q6_k(int64_t nb, const uint8_t* X, size_t xs, int n_tok, rows16_prep_q6_k* P) {
    for (int t = 0; t < n_tok; ++t)
        for (int64_t b = 0; b < nb; ++b) {
            const block_q8_k& xb = reinterpret_cast<const block_q8_k*>(X + t * xs)[b];
            rows16_prep_q6_k& p = P[t * nb + b];
            p.d = xb.d;
            for (int s = 0; s < 16; ++s) p.corr[s] = -32 * xb.bsums[s];
            for (int i = 0; i < 8; ++i)
                p.bs_pairs[i] = int32_t(uint32_t(uint16_t(xb.bsums[2 * i])) | uint32_t(uint16_t(xb.bsums[2 * i + 1])) << 16);
        }
}

// The K-quant records are 36-53 cache lines. Requested all at once at a block's start (stream_prefetcher),
// they fill the core's miss buffers, and a multi-token tile's arithmetic waits behind them (Qwen2.5 1.5B's
// Q6_K head, 9 tokens, one thread: 60 GMAC/s from memory against 132 from cache). So from
// kSlicedPrefetchTokens tokens on, a kernel with K::prefetches_records requests the record AHEAD records
// on itself, one slice per sub-block, and run_tile skips its burst. Fewer tokens keep the burst: they are
// bound by the stream, and the burst measured faster there. The AVX-512 legacy kernels (records of 6-9
// lines) slice theirs over the tokens, 4 records ahead.
constexpr int kSlicedPrefetchTokens = 3;
constexpr int kPrefetchRecords = 2;

// Whether a tile of NT tokens of kernel K prefetches by slices (and not by run_tile's burst).
template <class K, int NT>
constexpr bool sliced_prefetch = K::prefetches_records && NT >= kSlicedPrefetchTokens;

// Slice `slice` of N_SLICES of the record AHEAD records after rec; nothing for a tile of fewer tokens.
template <int NT, size_t RECORD_BYTES, int N_SLICES, int AHEAD = kPrefetchRecords>
inline void prefetch_record_slice(const uint8_t* rec, int slice) {
    if constexpr (NT >= kSlicedPrefetchTokens) {
        constexpr size_t lines = (RECORD_BYTES + 63) / 64 + 1;  // + 1: a record need not start on a line
        constexpr size_t per_slice = (lines + N_SLICES - 1) / N_SLICES;
        const uint8_t* p = rec + AHEAD * RECORD_BYTES + 64 * per_slice * slice;
        for (size_t k = 0; k < per_slice; ++k) _mm_prefetch(reinterpret_cast<const char*>(p + 64 * k), _MM_HINT_T0);
    }
}

template <class K, int NT>
void groups_loop(int64_t nb, const uint8_t* W, size_t ws, int n_rows, const uint8_t* X, size_t xs,
                 const typename K::prep* P, float* Y, int64_t ys);

// The last n_tok < K::max_tile tokens: one tile of exactly n_tok (NT counts down to it).
template <class K, int NT = K::max_tile - 1>
void groups_loop_tail(int n_tok, int64_t nb, const uint8_t* W, size_t ws, int n_rows, const uint8_t* X, size_t xs,
                      const typename K::prep* P, float* Y, int64_t ys) {
    if constexpr (NT > 0) {
        if (n_tok == NT) return groups_loop<K, NT>(nb, W, ws, n_rows, X, xs, P, Y, ys);
        groups_loop_tail<K, NT - 1>(n_tok, nb, W, ws, n_rows, X, xs, P, Y, ys);
    }
}

// gemm_fn over a packed matrix: W is the group of row 0, ws the size of one original row.
template <class K>
void gemm_rows16(int64_t n, const void* Wv, size_t ws, int n_rows, const void* Xv, size_t xs, int n_tok, float* Y,
                 int64_t ys) {
    const uint8_t* W = static_cast<const uint8_t*>(Wv);
    const uint8_t* X = static_cast<const uint8_t*>(Xv);
    const int64_t nb = n / K::block_elems;
    constexpr int kRowBlock = 2 * kRows16;  // rows that stay in cache while every token tile passes
    thread_local std::vector<typename K::prep> prepared;
    if (prepared.size() < size_t(n_tok) * nb) prepared.resize(size_t(n_tok) * nb);
    K::prepare(nb, X, xs, n_tok, prepared.data());
    const typename K::prep* P = prepared.data();
    for (int r0 = 0; r0 < n_rows; r0 += kRowBlock) {
        const int nr = n_rows - r0 < kRowBlock ? n_rows - r0 : kRowBlock;
        const uint8_t* Wb = W + r0 * ws;
        float* Yb = Y + r0;
        // As few tiles as max_tile allows, of even sizes: 9 tokens under a max of 8 are 5 + 4, not 8 + 1,
        // whose lone token would unpack every record again for one token's work.
        const int n_tiles = (n_tok + K::max_tile - 1) / K::max_tile;
        for (int i = 0, t = 0; i < n_tiles; ++i) {
            const int nt = (n_tok - t + (n_tiles - i) - 1) / (n_tiles - i);
            if (nt == K::max_tile) groups_loop<K, K::max_tile>(nb, Wb, ws, nr, X + t * xs, xs, P + t * nb, Yb + t * ys, ys);
            else groups_loop_tail<K>(nt, nb, Wb, ws, nr, X + t * xs, xs, P + t * nb, Yb + t * ys, ys);
            t += nt;
        }
    }
}
