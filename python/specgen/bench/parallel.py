"""`specgen bench --parallel 1,2,4,8,16`: N concurrent requests on one Generator (n_parallel slots).

For each batch size N and each configuration (plain decoding; n-gram and draft="auto" speculation
under the batch policy), interleaved in one run: N client threads each run one greedy request at the
same time; reported are the aggregate tokens/s (all tokens / wall time from the first submission to the last end), p50 / p95
per-token latency (the time between a request's successive tokens, a step's tokens sharing it) and
p50 time to first token. The Generators are loaded once per configuration with n_parallel = max N.
"""
from __future__ import annotations

import statistics
import threading
import time
from typing import Any, Dict, List, Optional, Sequence

from specgen.bench.stats import percentile

PROMPTS = [
    "The three laws of robotics are",
    "Write a Python function that returns the n-th Fibonacci number.\n\ndef fibonacci(n):",
    "Once upon a time, in a small village by the sea,",
    "The capital of France is Paris. The capital of Germany is Berlin. The capital of Italy is",
    "List the planets of the solar system in order from the sun:",
    "def quicksort(xs):\n    if len(xs) <= 1:\n        return xs\n",
    "Photosynthesis is the process by which",
    "A short history of the printing press:",
]

CONFIGS = {"plain": {}, "ngram": {"draft": "ngram"}, "auto": {"draft": "auto"}}


def _one_batch(g, n: int, max_tokens: int, base: int) -> Dict[str, Any]:
    gaps: List[float] = []
    ttft: List[float] = []
    counts = [0] * n
    lock = threading.Lock()
    t0 = time.perf_counter()

    def client(i: int) -> None:
        prompt = PROMPTS[(base + i) % len(PROMPTS)]
        t_sub = time.perf_counter()
        request = g._start(prompt, max_tokens=max_tokens, temperature=0.0, ignore_eos=True)
        seen, last = 0, None
        mine = []
        for ev in request.events():
            k = seen + len(ev.tokens)
            if k > seen:
                now = time.perf_counter()
                if last is None:
                    ttft_i = now - t_sub
                    mine.extend([0.0] * (k - seen - 1))
                else:
                    mine.extend([(now - last) / (k - seen)] * (k - seen))
                last, seen = now, k
        counts[i] = seen
        with lock:
            gaps.extend(mine)
            ttft.append(ttft_i)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    return {"tokens": sum(counts), "wall_s": wall, "tok_s": sum(counts) / wall,
            "p50_ms": 1e3 * percentile(gaps, 0.5), "p95_ms": 1e3 * percentile(gaps, 0.95),
            "ttft_ms": 1e3 * percentile(ttft, 0.5)}


def run_parallel(model: Optional[str], sizes: Sequence[int], *, max_tokens: int = 64, threads: Optional[int] = 2,
                 n_ctx: int = 1024, repeats: int = 1, configs: Sequence[str] = ("plain", "ngram", "auto"),
                 progress: bool = True) -> Dict[str, Any]:
    from specgen import Generator

    gens = {name: Generator(model, n_threads=threads, n_ctx=n_ctx, n_parallel=max(sizes), **CONFIGS[name])
            for name in configs}
    try:
        for g in gens.values():  # warm-up: the step cost table and the scratch buffers
            _one_batch(g, max(sizes), 8, 0)
        rows: List[Dict[str, Any]] = []
        for n in sizes:
            for rep in range(repeats):
                for name, g in gens.items():  # interleaved: the machine's noise hits both alike
                    r = _one_batch(g, n, max_tokens, rep)
                    r.update(config=name, parallel=n, repeat=rep)
                    rows.append(r)
                    if progress:
                        print(f"  N={n:<3} {name:<6} {r['tok_s']:8.1f} tok/s", flush=True)
        return {"rows": rows, "max_tokens": max_tokens, "threads": threads}
    finally:
        for g in gens.values():
            g.close()


def table(res: Dict[str, Any]) -> str:
    best: Dict[tuple, Dict[str, Any]] = {}
    for r in res["rows"]:
        key = (r["parallel"], r["config"])
        if key not in best or r["tok_s"] > best[key]["tok_s"]:
            best[key] = r
    single = best.get((1, "plain"), {}).get("tok_s")
    out = ["| N | config | aggregate tok/s | x single plain | p50 ms/token | p95 ms/token | TTFT p50 ms |",
           "|---|---|---|---|---|---|---|"]
    for (n, name), r in sorted(best.items()):
        ratio = f"{r['tok_s'] / single:.2f}" if single else "-"
        out.append(f"| {n} | {name} | {r['tok_s']:.1f} | {ratio} | {r['p50_ms']:.1f} | {r['p95_ms']:.1f} | {r['ttft_ms']:.0f} |")
    return "\n".join(out)
