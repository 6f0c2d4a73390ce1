"""One Generator used from several Python threads (engine/generator.h, "Threads"): until concurrent
requests are batched, a blocking generate() waits for the one running, so every thread gets exactly
the output it would get alone; a stream is superseded by the next call and ends with finish_reason
"cancelled"; nothing crashes or hangs. The concurrent runs happen in a child process with a timeout,
so a deadlock fails the test instead of hanging the suite."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import pytest

import specgen

PROMPTS = ["The capital of France is", "def fibonacci(n):", "Once upon a time", "The printing press"]
N = 12
TIMEOUT = 300

CHILD = r"""
import json, sys, threading
import specgen
path, kind, n_threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
prompts = json.loads(sys.argv[4])
kw = {"plain": {}, "ngram": {"draft": "ngram"},
      "ssd": {"draft": "self", "self_layers": 6, "ssd": True, "n_threads_draft": 1, "draft_max": 3}}[kind]
g = specgen.Generator(path, n_threads=1, n_ctx=256, **kw)
def run(p):
    r = g.generate(p, max_tokens=%d, temperature=0)
    return [r.tokens, r.finish_reason]
serial = [run(p) for p in prompts]
got = [[None, None] for _ in range(n_threads)]
errors = []
def worker(i):
    try:
        got[i] = [run(prompts[(i + j) %% len(prompts)]) for j in range(2)]
    except BaseException as e:
        errors.append(repr(e))
threads = [threading.Thread(target=worker, args=(i,)) for i in range(n_threads)]
for t in threads:
    t.start()
for t in threads:
    t.join()
want = [[serial[(i + j) %% len(prompts)] for j in range(2)] for i in range(n_threads)]
print(json.dumps({"errors": errors, "equal": got == want}))
""" % N


@pytest.mark.parametrize("kind, n_threads", [("plain", 2), ("plain", 4), ("ngram", 2), ("ngram", 4), ("ssd", 2)])
def test_threads_share_one_generator(model_path, kind, n_threads):
    out = subprocess.run([sys.executable, "-c", CHILD, model_path, kind, str(n_threads), json.dumps(PROMPTS)],
                         capture_output=True, text=True, timeout=TIMEOUT)
    assert out.returncode == 0, out.stderr[-2000:]
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["errors"] == [] and res["equal"], res


def test_superseded_stream_ends_cancelled(model_path):
    g = specgen.Generator(model_path, n_threads=1, n_ctx=256, draft="ngram")
    try:
        it = g.generate("Once upon a time", max_tokens=60, temperature=0, stream=True)
        assert it.finish_reason is None
        next(it)
        r = g.generate("The capital of France is", max_tokens=4, temperature=0)  # same thread: supersedes
        assert len(r.tokens) == 4 and r.finish_reason == "length"
        assert list(it) == [] and it.finish_reason == "cancelled"
        # a stream that runs to the end reports why it ended
        it2 = g.generate("Hello", max_tokens=3, temperature=0, stream=True)
        "".join(it2)
        assert it2.finish_reason == "length" and len(it2.tokens) == 3
    finally:
        g.close()


def test_stream_superseded_from_another_thread(model_path):
    g = specgen.Generator(model_path, n_threads=1, n_ctx=512)
    started = threading.Event()
    result = {}

    def streamer():
        it = g.generate("Once upon a time", max_tokens=400, temperature=0, stream=True)
        next(it)
        started.set()
        result["rest"] = list(it)
        result["reason"] = it.finish_reason

    def caller():
        assert started.wait(TIMEOUT)
        result["other"] = g.generate("The capital of France is", max_tokens=3, temperature=0).tokens

    try:
        threads = [threading.Thread(target=streamer), threading.Thread(target=caller)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(TIMEOUT)
        assert not any(t.is_alive() for t in threads), "a thread hung"
        assert result["reason"] == "cancelled" and len(result["other"]) == 3
    finally:
        g.close()


def test_ssd_with_one_thread_runs_one_thread(model_path, gen):
    """n_threads=1 under SSD gives the drafter no thread of its own: it drafts on the caller's thread
    (engine/generator.cpp), so the process runs no extra thread, and greedy output is plain decoding's."""
    prompt = "The history of the printing press begins"
    want = gen.generate(prompt, max_tokens=N, temperature=0).tokens
    tasks = lambda: len(os.listdir("/proc/self/task"))  # noqa: E731
    with specgen.Generator(model_path, n_threads=1, n_ctx=256, draft="self", self_layers=6, ssd=True) as g:
        assert (g.n_threads, g.n_threads_draft) == (1, 0)
        before = tasks()
        it = g.generate(prompt, max_tokens=N, temperature=0, stream=True)
        next(it)
        assert tasks() == before
        it.close()
        r = g.generate(prompt, max_tokens=N, temperature=0)
        assert r.tokens == want and r.stats["ssd_hits"] == 0 and r.stats["n_drafted"] > 0
