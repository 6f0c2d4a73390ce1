#!/usr/bin/env python3
"""Block vs token-wise verification with a draft model: tokens per target call at a fixed gamma.

Run (appends; a (mode, prompt, seed) already in the output is skipped, so a run can be resumed or
extended with more seeds):

    python tools/hsd_pair.py run --target T.gguf --draft D.gguf --gamma 8 --seeds 0-3 --out runs/g8

decodes every prompt of a chat prompt file (rendered with the target's chat template) once per seed
and mode, block and token-wise alternating per (seed, prompt) with the same seed, at temperature 1
with top-k / top-p / min-p off, adaptive gamma off (draft_max = gamma, draft_min = 0), and keeps every
round's line of $SPECGEN_VERIFY_TRACE (engine/verify_trace.h) in <out>/rounds.jsonl, one record per
generation. Report:

    python tools/hsd_pair.py report runs/g8 [runs/g4 ...]

prints markdown tables per gamma over the rounds that drafted the full gamma (the last round of a
generation may draft fewer): the realised tokens per call (accepted + 1) with standard errors over
generations (rounds within one generation are not independent; stratified by prompt), the exact
expectation of both rules on the same rounds' drafts (verifier::acceptance_reach: no noise from the
verifier's coins, and a paired comparison), the per-position conditional acceptance
P(accept i | reached i) both ways, and where token-wise's rejections come from (p/q of the drafts).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path
from typing import Dict, List

MODES = ("block", "token")


def parse_seeds(text: str) -> List[int]:
    out: List[int] = []
    for part in text.split(","):
        a, _, b = part.partition("-")
        out += list(range(int(a), int(b) + 1)) if b else [int(a)]
    return out


# -- run ----------------------------------------------------------------------------------------
def run(args) -> None:
    import specgen
    from specgen.bench.pair import DEFAULT_PROMPTS, load_chat_prompts
    from specgen.chat_template import template_for

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    records = out / "rounds.jsonl"
    done = set()
    if records.exists():
        for line in records.read_text().splitlines():
            r = json.loads(line)
            done.add((r["mode"], r["prompt"], r["seed"]))
    rows = load_chat_prompts(args.prompts or DEFAULT_PROMPTS, args.n_prompts)
    gens: Dict[str, object] = {}
    traces: Dict[str, Path] = {}
    for mode in MODES:
        traces[mode] = out / f"trace-{mode}.jsonl"
        traces[mode].write_text("")  # this run's lines only; rounds.jsonl keeps them all
        os.environ["SPECGEN_VERIFY_TRACE"] = str(traces[mode])  # read when the Generator loads
        gens[mode] = specgen.Generator(args.target, draft_kind="model", draft_model=args.draft, n_ctx=args.n_ctx,
                                       n_threads=args.threads, verify=mode, draft_max=args.gamma, draft_min=0,
                                       draft_adaptive=False)
        del os.environ["SPECGEN_VERIFY_TRACE"]
    template = template_for(gens["block"])
    ids = {p["id"]: gens["block"].tokenize(template.render(p["messages"], add_generation_prompt=True),
                                            add_bos=True, special=True) for p in rows}
    offsets = {m: 0 for m in MODES}
    with records.open("a") as f:
        for seed in parse_seeds(args.seeds):
            for pi, p in enumerate(rows):
                order = MODES if (seed + pi) % 2 == 0 else MODES[::-1]
                for mode in order:
                    if (mode, p["id"], seed) in done:
                        continue
                    r = gens[mode].generate(ids[p["id"]], max_tokens=args.max_tokens, temperature=1.0, top_k=0,
                                            top_p=1.0, min_p=0.0, seed=seed)
                    text = traces[mode].read_text()
                    lines = text[offsets[mode]:].splitlines()
                    offsets[mode] = len(text)
                    s = r.stats
                    if len(lines) != s["n_rounds"]:
                        sys.exit(f"trace has {len(lines)} lines for {s['n_rounds']} rounds ({mode}, {p['id']}, {seed})")
                    f.write(json.dumps({"mode": mode, "gamma": args.gamma, "prompt": p["id"], "seed": seed,
                                        "n_generated": s["n_generated"], "n_rounds": s["n_rounds"],
                                        "n_accepted": s["n_accepted"],
                                        # text-level figures, equal in distribution under both rules (lossless)
                                        "n_emitted_rows": s["n_emitted_rows"], "sum_entropy": s["sum_entropy"],
                                        "n_alpha": s["n_alpha"], "sum_alpha": s["sum_alpha"],
                                        "rounds": [json.loads(x) for x in lines]}) + "\n")
                    f.flush()
                    print(f"{mode} g={args.gamma} {p['id']} seed={seed}: {s['n_generated']} tokens, "
                          f"{s['n_rounds']} rounds, {s['mean_accepted_length']:.2f} tokens/call", flush=True)
    for g in gens.values():
        g.close()


# -- report -------------------------------------------------------------------------------------
def ratio_and_se(ys: List[float], ns: List[int], strata: List[str]):
    """Ratio estimator sum(y) / sum(n) over independent clusters (generations), with its standard
    error from the clusters' linearised residuals e = (y - R n) / mean(n). The prompts are a fixed
    design (every mode decodes each prompt with the same seeds), so the variance is taken within each
    prompt's generations (stratified); the between-prompt spread is not sampling noise."""
    m = len(ys)
    Y, N = sum(ys), sum(ns)
    R = Y / N
    nbar = N / m
    e = [(y - R * n) / nbar for y, n in zip(ys, ns)]
    var = 0.0
    for h in set(strata):
        eh = [v for v, s in zip(e, strata) if s == h]
        if len(eh) < 2:
            return R, float("nan")
        mean = sum(eh) / len(eh)
        var += len(eh) / (len(eh) - 1) * sum((v - mean) ** 2 for v in eh)
    return R, math.sqrt(var) / m


def summarise(recs: List[dict], gamma: int, modes=MODES) -> dict:
    """Per mode, over the rounds that drafted the full gamma: estimates with their standard errors
    over generations (ratio_and_se)."""
    out = {}
    for mode in modes:
        gens = [r for r in recs if r["mode"] == mode and r["gamma"] == gamma]
        gens = [(r, [x for x in r["rounds"] if x["gamma"] == gamma]) for r in gens]
        gens = [(r, full) for r, full in gens if full]
        ns, strata = [len(full) for _, full in gens], [r["prompt"] for r, _ in gens]

        def est(per_round):  # the mean over rounds of per_round(x), with its SE
            return ratio_and_se([sum(per_round(x) for x in full) for _, full in gens], ns, strata)

        res = {"generations": len(gens), "rounds": sum(ns), "tokens": sum(r["n_generated"] for r, _ in gens)}
        res["realised"] = est(lambda x: x["accepted"] + 1)
        for rule in ("token", "block"):
            res[f"exact_{rule}"] = est(lambda x, rule=rule: 1 + sum(x[f"reach_{rule}"]))
        res["exact_gain"] = est(lambda x: sum(x["reach_block"]) - sum(x["reach_token"]))  # paired: same drafts
        # realised minus exact for the rule that ran: the engine's coins against the formula, paired
        res["realised_minus_exact"] = est(lambda x: x["accepted"] - sum(x[f"reach_{mode}"]))
        # P(accepted >= i), i = 0..gamma: realised and exact under both rules; the paired gain per i
        res["reach_realised"] = [est(lambda x, i=i: float(x["accepted"] >= i))[0] for i in range(gamma + 1)]
        for rule in ("token", "block"):
            res[f"reach_{rule}"] = [1.0] + [est(lambda x, i=i, rule=rule: x[f"reach_{rule}"][i])[0]
                                            for i in range(gamma)]
        res["reach_gain"] = [est(lambda x, i=i: x["reach_block"][i] - x["reach_token"][i]) for i in range(gamma)]
        res["ratios"] = [v for _, full in gens for x in full for v in x["ratio"]]
        out[mode] = res
    return out


def fmt(v, se=None, digits=3, rel=True):
    if se is None or math.isnan(se):
        return f"{v:.{digits}f}"
    return f"{v:.{digits}f} ± {se:.{digits}f}" + (f" ({100 * se / abs(v):.1f}%)" if rel else "")


def conditional(reach: List[float]) -> List[float]:
    """P(accept i | reached i) = P(accepted >= i) / P(accepted >= i - 1), i = 1..gamma."""
    return [reach[i] / reach[i - 1] if reach[i - 1] > 0 else float("nan") for i in range(1, len(reach))]


RATIO_BINS = [(0, 0.01), (0.01, 0.1), (0.1, 0.5), (0.5, 1), (1, 2), (2, math.inf)]


def report(args) -> None:
    recs = []
    for d in args.dirs:
        recs += [json.loads(x) for x in (Path(d) / "rounds.jsonl").read_text().splitlines()]
    for gamma in sorted({r["gamma"] for r in recs}):
        s = summarise(recs, gamma)
        b, t = s["block"], s["token"]
        (rb, sb), (rt, st) = b["realised"], t["realised"]
        q = rb / rt
        print(f"\n### gamma = {gamma}\n")
        print("Tokens per target call (accepted + 1) over the rounds that drafted all gamma tokens; ± one standard "
              "error over generations, stratified by prompt. \"exact\": the mean over the same rounds of "
              "1 + E[accepted | that round's draft] under each rule (verifier::acceptance_reach).\n")
        print("| verification that ran | generations | rounds | realised | exact, token-wise rule "
              "| exact, block rule | exact block / token-wise (paired gain) | realised - exact (rule that ran) |")
        print("|---|---|---|---|---|---|---|---|")
        for mode, r in s.items():
            et, eb = r["exact_token"][0], r["exact_block"][0]
            print(f"| {mode} | {r['generations']} | {r['rounds']} | {fmt(*r['realised'])} | {fmt(*r['exact_token'])} "
                  f"| {fmt(*r['exact_block'])} | {eb / et:.4f} (+{fmt(*r['exact_gain'])} tokens) "
                  f"| {fmt(*r['realised_minus_exact'], rel=False)} |")
        pooled = summarise([dict(r, mode="block") for r in recs], gamma, ("block",))["block"]  # both runs' drafts as one set
        (g_, sg), (et, _) = pooled["exact_gain"], pooled["exact_token"]
        print(f"\nRealised block / token-wise (two independent sets of runs): {q:.3f} ± {q * math.sqrt((sb / rb) ** 2 + (st / rt) ** 2):.3f}. "
              f"Exact, on the drafts of both sets ({pooled['rounds']} rounds): block / token-wise = "
              f"{1 + g_ / et:.4f} ± {sg / et:.4f}\n")
        print("P(accept position i | reached i) = P(accepted >= i) / P(accepted >= i-1): realised in each run, "
              "and exact under both rules on each run's drafts; the paired gain P_block(accepted >= i) - "
              "P_token(accepted >= i) on the same drafts (± SE)\n")
        print("| i | block run: realised | exact token-wise | exact block | gain in P(>= i) "
              "| token run: realised | exact token-wise | exact block | gain in P(>= i) |")
        print("|---" * 9 + "|")
        cols = []
        for r in (b, t):
            cols.append((conditional(r["reach_realised"]), conditional(r["reach_token"]),
                         conditional(r["reach_block"]), r["reach_gain"]))
        for i in range(gamma):
            cells = []
            for real, tok, blk, gain in cols:
                cells += [f"{real[i]:.3f}", f"{tok[i]:.3f}", f"{blk[i]:.3f}", fmt(*gain[i], digits=4, rel=False)]
            print(f"| {i + 1} | " + " | ".join(cells) + " |")
        ratios = b["ratios"] + t["ratios"]
        lost = [1 - min(1.0, v) for v in ratios]
        print(f"\np_i(x_i) / q_i(x_i) over the {len(ratios)} drafted positions of both runs: where token-wise's "
              f"rejection probability 1 - min(1, p/q) (mean {sum(lost) / len(lost):.3f}) comes from\n")
        print("| p/q in | share of positions | share of the rejection probability |")
        print("|---|---|---|")
        for lo, hi in RATIO_BINS:
            sel = [i for i, v in enumerate(ratios) if lo <= v < hi]
            share = sum(lost[i] for i in sel) / sum(lost) if sum(lost) else 0.0
            print(f"| [{lo:g}, {hi:g}) | {len(sel) / len(ratios):.3f} | {share:.3f} |")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--target", required=True)
    r.add_argument("--draft", required=True)
    r.add_argument("--gamma", type=int, required=True)
    r.add_argument("--seeds", default="0-3", help="e.g. 0-3 or 0,2,5")
    r.add_argument("--prompts", default=None, help="chat prompt file (default: specgen/prompts/code_chat.jsonl)")
    r.add_argument("--n-prompts", type=int, default=None)
    r.add_argument("--max-tokens", type=int, default=128)
    r.add_argument("--n-ctx", type=int, default=1024)
    r.add_argument("--threads", type=int, default=2)
    r.add_argument("--out", required=True)
    p = sub.add_parser("report")
    p.add_argument("dirs", nargs="+")
    args = ap.parse_args(argv)
    run(args) if args.cmd == "run" else report(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
