"""Two or more builds of the extension on the pair preset's chat prompts, interleaved per prompt: one
worker process per build holds a Generator per configuration (the pair preset's names: plain,
draft:nanospec, auto:nanospec, ...), and every prompt runs each (build, configuration) in turn, the
order rotated per prompt. Prints decode tok/s per build and configuration and the ratio to the first
build, over the whole set and per prompt.

    python tools/bench_builds.py --builds before=/tmp/before/python now=python -m T.gguf -md D.gguf \\
        -c auto:nanospec,draft:nanospec --temp 0 --n-prompts 8 --rounds 2

Each build is a directory holding the `specgen` package (tools/bench_rows.py takes the same)."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

WORKER = r"""
import json, sys
import specgen
from specgen.bench.pair import parse_configs, _generator_kwargs, load_chat_prompts
from specgen.chat_template import template_for
target, draft, configs, threads, n_prompts = json.loads(sys.argv[1])
gens = {c.name: specgen.Generator(target, **_generator_kwargs(c, draft, threads, 2048)) for c in parse_configs(configs)}
probe = next(iter(gens.values()))
template = template_for(probe)
ids = [probe.tokenize(template.render(p["messages"], add_generation_prompt=True), add_bos=True, special=True)
       for p in load_chat_prompts()[:n_prompts]]
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    name, prompt, max_tokens, temp, seed = json.loads(line)
    st = gens[name].generate(ids[prompt], max_tokens=max_tokens, temperature=temp, seed=seed).stats
    print(json.dumps({"tokens": st["n_generated"], "seconds": st["decode_seconds"]}), flush=True)
"""


def main() -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--builds", nargs="+", required=True, help="NAME=DIR, DIR holding the specgen package")
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("-md", "--draft-model", default="")
    ap.add_argument("-c", "--configs", default="plain")
    ap.add_argument("--temp", type=float, default=0.0)
    ap.add_argument("--n-prompts", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("-n", "--max-tokens", type=int, default=128)
    ap.add_argument("-t", "--threads", type=int, default=2)
    a = ap.parse_args()
    builds = [b.split("=", 1) for b in a.builds]
    if any(len(b) != 2 for b in builds):
        raise SystemExit("bench_builds: --builds takes NAME=DIR")
    configs = [c.split("@")[0] for c in a.configs.split(",")]
    workers = {}
    for name, path in builds:
        env = dict(os.environ, PYTHONPATH=os.path.abspath(path))
        arg = json.dumps([a.model, a.draft_model, a.configs, a.threads, a.n_prompts])
        workers[name] = subprocess.Popen([sys.executable, "-c", WORKER, arg], cwd=here, env=env, text=True,
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        if not json.loads(workers[name].stdout.readline()).get("ready"):
            raise SystemExit(f"bench_builds: worker {name} did not start")
    jobs = [(b, c) for b, _ in builds for c in configs]
    total = {j: [0.0, 0.0] for j in jobs}
    per_prompt = {j: [[0.0, 0.0] for _ in range(a.n_prompts)] for j in jobs}
    for r in range(a.rounds):
        for p in range(a.n_prompts):
            k = (p + r) % len(jobs)
            for b, c in jobs[k:] + jobs[:k]:
                w = workers[b]
                w.stdin.write(json.dumps([c, p, a.max_tokens, a.temp, 1 + r]) + "\n")
                w.stdin.flush()
                out = json.loads(w.stdout.readline())
                for acc in (total[(b, c)], per_prompt[(b, c)][p]):
                    acc[0] += out["tokens"]
                    acc[1] += out["seconds"]
    for w in workers.values():
        w.stdin.close()
        w.wait()
    first = builds[0][0]
    for c in configs:
        for b, _ in builds:
            tps = total[(b, c)][0] / total[(b, c)][1]
            ratio = tps / (total[(first, c)][0] / total[(first, c)][1])
            prompts = [(t[0] / t[1]) / (f[0] / f[1]) for t, f in zip(per_prompt[(b, c)], per_prompt[(first, c)])]
            print(f"{c:18s} {b:10s} {tps:6.1f} tok/s {ratio:5.2f}x  per prompt " + " ".join(f"{x:4.2f}" for x in prompts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
