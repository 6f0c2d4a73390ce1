"""Multi-turn chats on the pair preset's chat prompts: each conversation runs three turns (the prompt,
then two follow-up requests that re-send the whole history with the answer rendered by the chat
template, as an OpenAI client does), per build and configuration (plain, draft: the draft model with its
defaults), interleaved per conversation with the order rotated. Prints per turn the wall time, prompt
rows reused by the target (cached) and by the draft model (dcached), rows drafted, prefill, decode and
draft seconds; then the sums over the follow-up turns, where prefix reuse acts.

    python tools/bench_turns.py --builds before=/tmp/before/python now=python -m T.gguf -md D.gguf \\
        --prompts 0,1,2,3

Each build is a directory holding the `specgen` package (as tools/bench_builds.py)."""
from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict

from bench_builds import start_workers

FOLLOW_UPS = ["Now add type hints and a docstring.", "Write two unit tests for it."]

WORKER = r"""
import json, sys, time
import specgen
from specgen.bench.pair import load_chat_prompts
from specgen.chat_template import template_for
target, draft, threads, max_tokens, follow_ups = json.loads(sys.argv[1])
gens = {"plain": specgen.Generator(target, n_threads=threads, n_ctx=4096),
        "draft": specgen.Generator(target, draft=draft, n_threads=threads, n_ctx=4096)}
template = template_for(gens["plain"])
prompts = load_chat_prompts()
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    name, p = json.loads(line)
    messages, turns = list(prompts[p]["messages"]), []
    for turn in range(1 + len(follow_ups)):
        ids = gens["plain"].tokenize(template.render(messages, add_generation_prompt=True), add_bos=True, special=True)
        t0 = time.perf_counter()
        r = gens[name].generate(ids, max_tokens=max_tokens, temperature=0)
        s = r.stats
        turns.append(dict(wall=time.perf_counter() - t0, n=s["n_generated"], prompt=s["n_prompt_tokens"],
                          cached=s["n_prompt_tokens_cached"], dcached=s.get("n_draft_prompt_tokens_cached", 0),
                          drafted=s["n_drafted"], prefill=s["prefill_seconds"], decode=s["decode_seconds"],
                          draft=s["draft_seconds"]))
        messages.append({"role": "assistant", "content": r.text})
        if turn < len(follow_ups):
            messages.append({"role": "user", "content": follow_ups[turn]})
    print(json.dumps(turns), flush=True)
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--builds", nargs="+", required=True, help="NAME=DIR, DIR holding the specgen package")
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("-md", "--draft-model", required=True)
    ap.add_argument("--prompts", default="0,1,2,3", help="indices into the pair preset's chat prompts")
    ap.add_argument("-n", "--max-tokens", type=int, default=96)
    ap.add_argument("-t", "--threads", type=int, default=2)
    a = ap.parse_args()
    arg = json.dumps([a.model, a.draft_model, a.threads, a.max_tokens, FOLLOW_UPS])
    workers = start_workers(a.builds, WORKER, arg, "bench_turns")
    jobs = [(b, c) for b in workers for c in ("plain", "draft")]
    sums = defaultdict(lambda: defaultdict(float))
    for i, p in enumerate(int(x) for x in a.prompts.split(",")):
        for b, c in jobs[i % len(jobs):] + jobs[:i % len(jobs)]:
            workers[b].stdin.write(json.dumps([c, p]) + "\n")
            workers[b].stdin.flush()
            turns = json.loads(workers[b].stdout.readline())
            print(f"{b} {c} prompt {p}: " + " | ".join(
                f"turn {k + 1} {t['wall']:.2f} s, {t['n']} tokens, prompt {t['prompt']} cached {t['cached']} "
                f"dcached {t['dcached']}, drafted {t['drafted']}, prefill {t['prefill']:.2f} decode {t['decode']:.2f} "
                f"draft {t['draft']:.2f}" for k, t in enumerate(turns)), flush=True)
            for t in turns[1:]:
                s = sums[(b, c)]
                for key in ("wall", "n", "prefill", "draft"):
                    s[key] += t[key]
                s["rows_prefilled"] += t["prompt"] - 1 - t["cached"]
    print("\nfollow-up turns, summed:")
    for (b, c), s in sums.items():
        print(f"  {b:>10} {c:<6} wall {s['wall']:.2f} s, {int(s['n'])} tokens, prefill {s['prefill']:.2f} s "
              f"({int(s['rows_prefilled'])} rows), draft {s['draft']:.2f} s")
    for w in workers.values():
        w.stdin.close()
        w.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
