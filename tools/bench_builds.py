"""Configurations of one or more builds of the extension on the pair preset's chat prompts, interleaved
per prompt: one worker process per build holds a Generator per configuration (the pair preset's names:
plain, draft:nanospec, draft:nanospec:g4, auto:nanospec, ...), and every prompt runs each (build,
configuration) in turn, the order rotated per prompt. Prints per build and configuration decode tok/s,
its ratio to the build's first configuration and to the first build's same configuration (with its
per-prompt ratios), and where a speculative round's time goes: tokens and drafted tokens per round,
acceptance, draft ms per drafted token and the rest of a round (verification and bookkeeping) in ms.

    python tools/bench_builds.py --builds now=python -m T.gguf -md D.gguf \\
        -c plain,draft:nanospec,draft:nanospec:g4 --temp 0 --n-prompts 8
    python tools/bench_builds.py --builds before=/tmp/before/python now=python -m T.gguf -md D.gguf \\
        -c auto:nanospec,draft:nanospec --temp 0 --n-prompts 8 --rounds 2

Each build is a directory holding the `specgen` package (tools/bench_rows.py takes the same)."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

KEYS = ("decode_seconds", "n_generated", "n_rounds", "n_drafted", "n_accepted", "draft_seconds")

WORKER = r"""
import json, sys
import specgen
from specgen.bench.pair import parse_configs, _generator_kwargs, load_chat_prompts
from specgen.chat_template import template_for
target, draft, configs, threads, n_prompts, keys = json.loads(sys.argv[1])
def kwargs(c):
    kw = _generator_kwargs(c, draft, threads, 2048)
    if not draft and kw.pop("draft_kind", None) == "auto":  # no -md: auto over the target's own drafters
        kw.pop("draft_model", None)
        kw["draft"] = "auto"
    return kw
gens = {c.name: specgen.Generator(target, **kwargs(c)) for c in parse_configs(configs)}
probe = next(iter(gens.values()))
template = template_for(probe)
ids = [probe.tokenize(template.render(p["messages"], add_generation_prompt=True), add_bos=True, special=True)
       for p in load_chat_prompts()[:n_prompts]]
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    name, prompt, max_tokens, temp, seed = json.loads(line)
    st = gens[name].generate(ids[prompt], max_tokens=max_tokens, temperature=temp, seed=seed).stats
    print(json.dumps({k: st.get(k) or 0 for k in keys}), flush=True)
"""


def start_workers(build_args, worker: str, arg: str, tool: str) -> dict:
    """One worker process per NAME=DIR of --builds, running `worker` (Python source) with `arg` and
    PYTHONPATH=DIR; each prints {"ready": true} once loaded. Returns {name: Popen}, in --builds order."""
    builds = [b.split("=", 1) for b in build_args]
    if any(len(b) != 2 for b in builds):
        raise SystemExit(f"{tool}: --builds takes NAME=DIR")
    here = os.path.dirname(os.path.abspath(__file__))
    workers = {}
    for name, path in builds:
        env = dict(os.environ, PYTHONPATH=os.path.abspath(path))
        workers[name] = subprocess.Popen([sys.executable, "-c", worker, arg], cwd=here, env=env, text=True,
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        if not json.loads(workers[name].stdout.readline()).get("ready"):
            raise SystemExit(f"{tool}: worker {name} did not start")
    return workers


def main() -> int:
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
    configs = [c.split("@")[0] for c in a.configs.split(",")]
    arg = json.dumps([a.model, a.draft_model, a.configs, a.threads, a.n_prompts, KEYS])
    workers = start_workers(a.builds, WORKER, arg, "bench_builds")
    builds = list(workers)
    jobs = [(b, c) for b in builds for c in configs]
    total = {j: dict.fromkeys(KEYS, 0.0) for j in jobs}
    per_prompt = {j: [[0.0, 0.0] for _ in range(a.n_prompts)] for j in jobs}  # tokens, seconds
    for r in range(a.rounds):
        for p in range(a.n_prompts):
            k = (p + r) % len(jobs)
            for job in jobs[k:] + jobs[:k]:
                w = workers[job[0]]
                w.stdin.write(json.dumps([job[1], p, a.max_tokens, a.temp, 1 + r]) + "\n")
                w.stdin.flush()
                out = json.loads(w.stdout.readline())
                for key in KEYS:
                    total[job][key] += out[key]
                per_prompt[job][p][0] += out["n_generated"]
                per_prompt[job][p][1] += out["decode_seconds"]
    for w in workers.values():
        w.stdin.close()
        w.wait()

    def tps(job):
        return total[job]["n_generated"] / total[job]["decode_seconds"]

    first_build, first_config = builds[0], configs[0]
    for b in builds:
        for c in configs:
            t = total[(b, c)]
            rounds = t["n_rounds"] or t["n_generated"]
            drafted = t["n_drafted"]
            line = (f"{b:8s} {c:20s} {tps((b, c)):6.1f} tok/s {tps((b, c)) / tps((b, first_config)):5.2f}x"
                    f"  tok/round {t['n_generated'] / rounds:4.2f}  drafted/round {drafted / rounds:4.2f}"
                    f"  acceptance {t['n_accepted'] / max(drafted, 1):4.2f}"
                    f"  draft ms/token {1e3 * t['draft_seconds'] / max(drafted, 1):5.1f}"
                    f"  rest ms/round {1e3 * (t['decode_seconds'] - t['draft_seconds']) / rounds:5.1f}")
            if b != first_build:
                ratios = [(x[0] / x[1]) / (f[0] / f[1]) for x, f in zip(per_prompt[(b, c)], per_prompt[(first_build, c)])]
                line += f"  vs {first_build} {tps((b, c)) / tps((first_build, c)):5.2f}x, per prompt " + \
                    " ".join(f"{x:4.2f}" for x in ratios)
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
