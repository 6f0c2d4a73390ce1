"""Core-runtime numbers: prefill and decode tokens/s of plain decoding, bytes read per decode token,
and the fraction of the machine's memory read bandwidth that decode reaches.

Decode is memory-bound (docs/DESIGN.md section 6): each token reads ``bytes_per_token`` bytes
of weights (the model's own count, the tied 262k-row LM head included for Gemma 3). Its speed limit
is read bandwidth / bytes_per_token. The bandwidth is measured in the same run by a probe that says
what it measures: numpy summing a large float32 array (default 1 GiB, far beyond the last-level
cache), split across k Python threads (numpy releases the GIL inside the reduction), best of 5.
That is a streaming read through one SIMD add per 4 bytes: close to what a weight-streaming gemv
can get, but not a STREAM-grade peak; the fraction is of this probe, not of the DIMM spec.
"""
from __future__ import annotations

import statistics
import threading
import time
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

__all__ = ["read_bandwidth", "run_core"]


def read_bandwidth(n_threads: int = 1, size_mb: int = 1024, trials: int = 5) -> float:
    """Bytes per second read by ``n_threads`` threads summing disjoint slices of one float32 array
    of ``size_mb`` MiB. Best of ``trials`` (the least disturbed by other processes)."""
    n = size_mb * (1 << 20) // 4
    a = np.ones(n, dtype=np.float32)  # touched: pages are resident before timing
    bounds = np.linspace(0, n, n_threads + 1).astype(np.int64)
    sink = [0.0] * n_threads

    def work(i: int) -> None:
        sink[i] = float(a[bounds[i]:bounds[i + 1]].sum())

    best = 0.0
    for _ in range(trials):
        threads = [threading.Thread(target=work, args=(i,)) for i in range(n_threads)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        dt = time.perf_counter() - t0
        best = max(best, a.nbytes / dt)
    if abs(sum(sink) - n) > 1e-3 * n:  # the sum really read the whole array
        raise RuntimeError("bandwidth probe: wrong sum")
    del a
    return best


def _prompt_tokens(g, n: int) -> List[int]:
    from specgen.bench.grammar import load_prompts

    text = "\n\n".join(p["prompt"] for p in load_prompts(["text", "edit"]))
    toks = g.tokenize(text)
    while len(toks) < n:
        toks = toks + toks[1:]
    return toks[:n]


def run_core(
    model=None,
    threads: Sequence[int] = (1, 2),
    max_tokens: int = 32,
    n_prompt: int = 128,
    repeats: int = 3,
    bandwidth_mb: int = 1024,
    progress: bool = True,
    command: Optional[str] = None,
) -> Dict[str, Any]:
    """Per thread count: median prefill tok/s over an ``n_prompt``-token prompt, median decode tok/s
    over ``max_tokens`` greedy tokens (``repeats`` runs after one warm-up), read bandwidth, and
    bytes_per_token x decode tok/s / bandwidth."""
    import sys

    from specgen import Generator
    from specgen.bench.runner import cpu_name

    rows = []
    model_path, bpt = None, None
    for t in threads:
        if progress:
            sys.stderr.write(f"core: {t} thread(s): bandwidth probe...\n")
        bw = read_bandwidth(t, bandwidth_mb)
        g = Generator(model, n_threads=t, n_ctx=max(512, n_prompt + max_tokens + 8))
        model_path, bpt = g.model_path, int(g._g.bytes_per_token)
        toks = _prompt_tokens(g, n_prompt)
        g.generate(toks, max_tokens=4, temperature=0.0)  # warm-up
        pre, dec = [], []
        for r in range(repeats):
            if progress:
                sys.stderr.write(f"core: {t} thread(s): run {r + 1}/{repeats}\n")
            # A different second token each run: the KV cache cannot reuse the last run's prompt.
            run_toks = toks[:1] + [1000 + r] + toks[1:-1]
            st = g.generate(run_toks, max_tokens=max_tokens, temperature=0.0).stats
            pre.append(st["prefill_tokens_per_second"])
            dec.append(st["decode_tokens_per_second"])
        g.close()
        d = statistics.median(dec)
        rows.append({
            "threads": t,
            "prefill_tps": statistics.median(pre),
            "decode_tps": d,
            "prefill_tps_runs": pre,
            "decode_tps_runs": dec,
            "bandwidth_gbs": bw / 1e9,
            "achieved_gbs": bpt * d / 1e9,
            "bandwidth_fraction": bpt * d / bw if bw else None,
            "bandwidth_limit_tps": bw / bpt if bpt else None,
        })
    return {
        "command": command,
        "model_path": model_path,
        "cpu": cpu_name(),
        "bytes_per_token": bpt,
        "n_prompt_tokens": n_prompt,
        "max_tokens": max_tokens,
        "repeats": repeats,
        "rows": rows,
        "bandwidth_note": (
            f"Read bandwidth: numpy summing a {bandwidth_mb} MiB float32 array split over the same number of "
            "threads, best of 5 (a streaming read, not a STREAM peak). % of BW = bytes/token x decode tok/s / that "
            "bandwidth; BW-limit tok/s = bandwidth / bytes per token."
        ),
    }
