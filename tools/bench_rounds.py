"""Where a speculative round's time goes: one Generator per configuration on the pair preset's chat
prompts, configurations interleaved per prompt (order alternating), and per configuration decode
tok/s, its ratio to the first, tokens and drafted tokens per round, acceptance, draft ms per drafted
token and the rest of a round (verification and bookkeeping) in ms.

    python tools/bench_rounds.py -m T.gguf -md D.gguf -c plain,draft,draft:g4 --temp 0 --n-prompts 4

Configurations: plain, draft (-md, NanoSpec head), draft:full (-md, its full head), suffixes :gN
(draft_max N) and :fixed (draft_adaptive off), e.g. draft:g4:fixed. The rounds of
docs/bench/priced-stop-2026-12-05.md.
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))


def config_kwargs(name: str, draft_model: str | None) -> dict:
    kind, *opts = name.split(":")
    if kind == "plain":
        if opts:
            raise SystemExit(f"bench_rounds: plain takes no options: {name}")
        return {}
    if kind != "draft":
        raise SystemExit(f"bench_rounds: unknown configuration {name!r} (plain, draft[:full][:gN][:fixed])")
    if not draft_model:
        raise SystemExit(f"bench_rounds: {name} needs -md")
    kw: dict = {"draft": draft_model, "nanospec": True}
    for o in opts:
        if o == "full":
            kw["nanospec"] = False
        elif o == "fixed":
            kw["draft_adaptive"] = False
        elif o.startswith("g") and o[1:].isdigit():
            kw["draft_max"] = int(o[1:])
        else:
            raise SystemExit(f"bench_rounds: unknown option {o!r} in {name}")
    return kw


def main() -> int:
    import specgen
    from specgen.bench.pair import load_chat_prompts
    from specgen.chat_template import template_for

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("-md", "--draft-model")
    ap.add_argument("-c", "--configs", default="plain,draft")
    ap.add_argument("--temp", type=float, default=0.0)
    ap.add_argument("--n-prompts", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("-n", "--max-tokens", type=int, default=128)
    ap.add_argument("-t", "--threads", type=int, default=2)
    args = ap.parse_args()
    names = args.configs.split(",")
    kwargs = {n: config_kwargs(n, args.draft_model) for n in names}
    gens = {n: specgen.Generator(args.model, n_threads=args.threads, n_ctx=2048, **kw) for n, kw in kwargs.items()}
    probe = gens[names[0]]
    template = template_for(probe)
    prompts = load_chat_prompts()[: args.n_prompts]
    ids = [probe.tokenize(template.render(p["messages"], add_generation_prompt=True), add_bos=True, special=True)
           for p in prompts]
    keys = ("decode_seconds", "n_generated", "n_rounds", "n_drafted", "n_accepted", "draft_seconds")
    total = {n: dict.fromkeys(keys, 0.0) for n in names}
    for r in range(args.rounds):
        for i, prompt in enumerate(ids):
            for n in names if (i + r) % 2 == 0 else names[::-1]:
                st = gens[n].generate(prompt, max_tokens=args.max_tokens, temperature=args.temp, seed=1 + r).stats
                for k in keys:
                    total[n][k] += st.get(k) or 0
    base = None
    for n in names:
        t = total[n]
        tps = t["n_generated"] / t["decode_seconds"]
        base = base or tps
        rounds = t["n_rounds"] or t["n_generated"]
        drafted = t["n_drafted"]
        print(f"{n:16s} {tps:6.1f} tok/s {tps / base:5.2f}x  tok/round {t['n_generated'] / rounds:4.2f}"
              f"  drafted/round {drafted / rounds:4.2f}  acceptance {t['n_accepted'] / max(drafted, 1):4.2f}"
              f"  draft ms/token {1e3 * t['draft_seconds'] / max(drafted, 1):5.1f}"
              f"  rest ms/round {1e3 * (t['decode_seconds'] - t['draft_seconds']) / rounds:5.1f}")
    for g in gens.values():
        g.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
