"""Single-thread micro-benchmark of the quantized matrix kernels: GB/s of weight bytes streamed by
matmul_rows (and vec_dot per row) for each weight type and ISA this machine supports.

    PYTHONPATH=python python tools/bench_quant.py [--quick]
"""
import argparse
import time

import numpy as np

from specgen import _testing

Q8_0, Q4_0, Q5_0, Q4_K, Q6_K, Q8_K, F16 = 8, 2, 6, 12, 14, 15, 1
VEC_DOT = {Q8_0: Q8_0, Q4_0: Q8_0, Q5_0: Q8_0, Q4_K: Q8_K, Q6_K: Q8_K}
NAMES = {Q8_0: "Q8_0", Q4_0: "Q4_0", Q5_0: "Q5_0", Q4_K: "Q4_K", Q6_K: "Q6_K"}


def make_matrix(t, n_rows, n_cols, rng):
    # Quantize a few distinct rows and tile them: realistic bytes without quantizing 168M floats.
    base = np.concatenate([_testing.quantize_row(t, rng.standard_normal(n_cols).astype(np.float32)) for _ in range(64)])
    reps = -(-n_rows // 64)
    return np.tile(base, reps)[: n_rows * (len(base) // 64)]


def bench(t, n_rows, n_cols, n_tokens, isa, reps):
    rng = np.random.default_rng(0)
    W = make_matrix(t, n_rows, n_cols, rng)
    X = np.concatenate([_testing.quantize_row(VEC_DOT[t], rng.standard_normal(n_cols).astype(np.float32))
                        for _ in range(n_tokens)])
    _testing.set_cpu_isa(isa)
    _testing.matmul_rows(t, W, n_rows, n_cols, X, n_tokens)  # warm up
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        _testing.matmul_rows(t, W, n_rows, n_cols, X, n_tokens)
        best = min(best, time.perf_counter() - t0)
    return W.nbytes / best / 1e9, best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    isas = ["scalar", "avx2", "avx512"][: ["scalar", "avx2", "avx512"].index(_testing.best_cpu_isa()) + 1]
    shapes = [(Q8_0, 262144, 640), (Q4_K, 2048, 640 * 4), (Q6_K, 2048, 2048), (Q5_0, 2048, 640),
              (Q4_0, 2048, 640), (Q8_0, 2048, 640)]
    reps = 3 if args.quick else 10
    for t, rows, cols in shapes:
        if t in (Q4_K, Q6_K) and cols % 256:
            continue
        for n_tok in (1, 4):
            for isa in isas:
                if isa == "scalar" and rows > 100000:
                    continue
                gbs, sec = bench(t, rows, cols, n_tok, isa, reps)
                print(f"{NAMES[t]:5s} {rows:6d}x{cols:<5d} tokens={n_tok} {isa:7s} {gbs:7.2f} GB/s  {sec*1e3:8.2f} ms")
    _testing.set_cpu_isa(_testing.best_cpu_isa())


if __name__ == "__main__":
    main()
