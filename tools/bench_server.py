#!/usr/bin/env python3
"""Load an OpenAI-compatible server (specgen serve, llama-server, ...) with N concurrent streaming
clients and report aggregate throughput and p50/p95 time-to-first-token and inter-token latency.

    python tools/bench_server.py --url http://127.0.0.1:8080 --clients 1,4,8,16 --requests 32 -n 64
    python tools/bench_server.py --url http://127.0.0.1:8080 --clients 4 --chat pair -n 128   # chat, code prompts

Each client sends greedy /v1/completions requests (stream: true) with the prompts of `specgen bench
--parallel`, one after another (with --chat: /v1/chat/completions with the messages of a chat prompt file,
"pair" for `specgen bench --preset pair`'s code prompts). TTFT: request sent -> first chunk with text; ITL: a request's (last -
first chunk time) / (completion tokens - 1), from the usage of its last chunk (or a count of chunks when
a server sends none); errors: requests whose connection the server dropped (each retried once on a new
connection, so throughput counts completed requests only). Several --url values are measured
interleaved, client count by client count, in one run.
"""
from __future__ import annotations

import argparse
import json
import threading
import time
from typing import Dict, List

import httpx

# The prompts of `specgen bench --parallel`: both batch benchmarks send the same requests.
from specgen.bench.pair import DEFAULT_PROMPTS as PAIR_PROMPTS, load_chat_prompts
from specgen.bench.parallel import PROMPTS
from specgen.bench.stats import percentile


def _one(client: httpx.Client, url: str, model: str, prompt, n: int) -> Dict[str, float]:
    """One streamed greedy request: prompt is a completion's text or a chat's messages (a list)."""
    chat = isinstance(prompt, list)
    body = {"messages" if chat else "prompt": prompt, "max_tokens": n, "temperature": 0, "stream": True}
    if model:
        body["model"] = model
    t0 = time.perf_counter()
    t_first = t_last = None
    n_chunks, n_tokens = 0, None
    with client.stream("POST", url + ("/v1/chat/completions" if chat else "/v1/completions"), json=body) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            obj = json.loads(line[6:])
            if obj.get("usage"):
                n_tokens = obj["usage"].get("completion_tokens")
            choice = obj["choices"][0] if obj.get("choices") else {}
            if choice.get("text") or (choice.get("delta") or {}).get("content"):
                now = time.perf_counter()
                t_first = t_first or now
                t_last = now
                n_chunks += 1
    n_tokens = n_tokens or n_chunks
    return {"ttft": (t_first or time.perf_counter()) - t0,
            "itl": (t_last - t_first) / (n_tokens - 1) if t_first and n_tokens > 1 else float("nan"),
            "tokens": n_tokens}


def run(url: str, model: str, clients: int, requests: int, n: int, prompts=PROMPTS) -> Dict[str, float]:
    results: List[Dict[str, float]] = []
    lock = threading.Lock()
    counter = iter(range(requests))

    errors = [0]

    def worker() -> None:
        c = httpx.Client(timeout=600)
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                break
            res = None
            for _ in range(2):
                try:
                    res = _one(c, url, model, prompts[i % len(prompts)], n)
                    break
                except httpx.TransportError:
                    # A server that closes a kept-alive connection: counted, then once more on a new one.
                    with lock:
                        errors[0] += 1
                    c.close()
                    c = httpx.Client(timeout=600)
            if res is not None:
                with lock:
                    results.append(res)
        c.close()

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    ttft = [r["ttft"] for r in results]
    itl = [r["itl"] for r in results if r["itl"] == r["itl"]]
    return {"errors": errors[0], "tok_s": sum(r["tokens"] for r in results) / wall, "ttft_p50": percentile(ttft, 0.5),
            "ttft_p95": percentile(ttft, 0.95), "itl_p50": percentile(itl, 0.5), "itl_p95": percentile(itl, 0.95)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", action="append", required=True, help="server base URL (repeatable)")
    ap.add_argument("--label", action="append", help="a name per --url")
    ap.add_argument("--model", default="", help="model id to send (default: none)")
    ap.add_argument("--clients", default="1,4,8,16")
    ap.add_argument("--requests", type=int, default=32, help="requests per (server, client count)")
    ap.add_argument("-n", type=int, default=64, help="max_tokens per request")
    ap.add_argument("--chat", help="chat prompt file (JSON lines with \"messages\"; \"pair\": the pair preset's)")
    args = ap.parse_args()
    prompts = PROMPTS
    if args.chat:
        prompts = [row["messages"] for row in load_chat_prompts(PAIR_PROMPTS if args.chat == "pair" else args.chat)]
    labels = args.label or args.url
    print(f"{'server':<28} {'clients':>7} {'tok/s':>8} {'TTFT p50':>9} {'TTFT p95':>9} {'ITL p50':>8} {'ITL p95':>8} {'errors':>6}")
    for k in (int(x) for x in args.clients.split(",")):
        for url, label in zip(args.url, labels):
            _one(httpx.Client(timeout=600), url, args.model, prompts[0], 4)  # warm-up
            r = run(url, args.model, k, max(args.requests, k), args.n, prompts)
            print(f"{label:<28} {k:>7} {r['tok_s']:>8.1f} {r['ttft_p50'] * 1e3:>7.0f}ms {r['ttft_p95'] * 1e3:>7.0f}ms "
                  f"{r['itl_p50'] * 1e3:>6.1f}ms {r['itl_p95'] * 1e3:>6.1f}ms {r['errors']:>6}", flush=True)


if __name__ == "__main__":
    main()
