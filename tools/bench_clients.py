"""Concurrent clients on one in-process Generator per configuration: each of --clients threads sends
--requests chat requests (the pair preset's prompts in the target's chat template, --max-tokens tokens,
greedy), and the configurations alternate round by round, the order rotated. Prints tokens/s over each
round's wall time and each configuration's ratio to the first one's, per round and mean.

    python tools/bench_clients.py -m T.gguf -md D.gguf -c plain,draft --rounds 4

Configurations: plain, draft (-md, NanoSpec by default), draft:full (-md, nanospec off), auto (auto with -md).
The rounds of docs/bench/pair-batch-catchup-2026-12-04.md. With --turns N each request is a chat of N
turns: after the prompt, follow-up messages that re-send the history with the answers (as an OpenAI
client does), so prefix reuse acts (docs/bench/multi-turn-2026-12-06.md).
"""
from __future__ import annotations

import argparse
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))


def main() -> int:
    import specgen
    from specgen.bench.pair import load_chat_prompts
    from specgen.chat_template import template_for

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("-md", "--draft-model")
    ap.add_argument("-c", "--configs", default="plain,draft")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--requests", type=int, default=2, help="per client per round")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("-n", "--max-tokens", type=int, default=128)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--turns", type=int, default=1, help="turns per chat (follow-ups re-send the history)")
    args = ap.parse_args()
    kinds = {"plain": {}, "draft": {"draft": args.draft_model}, "draft:full": {"draft": args.draft_model, "nanospec": False},
             "auto": {"draft": "auto", "draft_model": args.draft_model}}
    names = args.configs.split(",")
    for name in names:
        if name not in kinds:
            ap.error(f"unknown configuration {name!r} (one of {', '.join(kinds)})")
        if name != "plain" and not args.draft_model:
            ap.error(f"{name} needs -md")
    gens = {k: specgen.Generator(args.model, n_threads=args.threads, n_ctx=2048, n_parallel=args.clients, **kinds[k])
            for k in names}
    template = template_for(gens[names[0]])
    chats = [r["messages"] for r in load_chat_prompts()]
    follow_ups = ["Now add type hints and a docstring.", "Write two unit tests for it.", "Make it shorter."]

    def ids(messages):
        return gens[names[0]].tokenize(template.render(messages, add_generation_prompt=True), add_bos=True, special=True)

    def chat(g, messages, record):
        messages = list(messages)
        for turn in range(args.turns):
            r = g.generate(ids(messages), max_tokens=args.max_tokens, temperature=0)
            record(r.stats)
            messages += [{"role": "assistant", "content": r.text},
                         {"role": "user", "content": follow_ups[turn % len(follow_ups)]}]

    for g in gens.values():
        g.generate(ids(chats[0]), max_tokens=4, temperature=0)  # warm-up
    ratios = {k: [] for k in names}
    for rnd in range(args.rounds):
        order = names[rnd % len(names):] + names[:rnd % len(names)]
        rate = {}
        for k in order:
            done = []
            lock = threading.Lock()

            def record(stats):
                with lock:
                    done.append(stats)

            def client(i, g=gens[k]):
                for j in range(args.requests):
                    chat(g, chats[(rnd + args.requests * i + j) % len(chats)], record)

            t0 = time.perf_counter()
            threads = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
            for th in threads:
                th.start()
            for th in threads:
                th.join()
            wall = time.perf_counter() - t0
            tokens = sum(s["n_generated"] for s in done)
            rate[k] = tokens / wall
            print(f"round {rnd} {k}: {rate[k]:.1f} tok/s, drafted {sum(s['n_drafted'] for s in done)} of {tokens}, "
                  f"draft forwards {sum(s['n_draft_forwards'] for s in done)}, "
                  f"draft {sum(s['draft_seconds'] for s in done):.2f} s, prompt rows reused "
                  f"{sum(s['n_prompt_tokens_cached'] for s in done)} of {sum(s['n_prompt_tokens'] for s in done)}",
                  flush=True)
        for k in names:
            ratios[k].append(rate[k] / rate[names[0]])
    for k in names[1:]:
        print(f"{k} / {names[0]}: " + ", ".join(f"{r:.2f}" for r in ratios[k]) + f"; mean {sum(ratios[k]) / len(ratios[k]):.2f}")
    for g in gens.values():
        g.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
