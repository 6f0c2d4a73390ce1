"""One Generator used from several Python threads (engine/scheduler.h, "Threads"): a request that
finds every slot busy waits its turn, so every thread gets exactly the output it would get alone; a
stream is never ended by another caller's request (it runs on while the reader is busy elsewhere);
nothing crashes or hangs. The concurrent runs happen in a child process with a timeout,
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


def test_a_request_inside_a_stream_loop_waits_and_the_stream_runs_on(model_path):
    """One slot: a generate() inside an open stream's loop waits for the stream (the engine decodes
    it without its reader), then runs; the stream still returns its whole greedy text."""
    g = specgen.Generator(model_path, n_threads=1, n_ctx=256, draft="ngram")
    try:
        want_stream = g.generate("Once upon a time", max_tokens=40, temperature=0)
        want_inner = g.generate("The capital of France is", max_tokens=4, temperature=0)
        it = g.generate("Once upon a time", max_tokens=40, temperature=0, stream=True)
        assert it.finish_reason is None
        pieces = [next(it)]
        r = g.generate("The capital of France is", max_tokens=4, temperature=0)
        assert r.tokens == want_inner.tokens and r.finish_reason == "length"
        pieces += list(it)
        assert "".join(pieces) == want_stream.text and it.finish_reason == want_stream.finish_reason
        assert it.tokens == want_stream.tokens
    finally:
        g.close()


def test_a_stream_and_another_thread_both_finish(model_path):
    g = specgen.Generator(model_path, n_threads=1, n_ctx=512)
    started = threading.Event()
    result = {}

    def streamer():
        it = g.generate("Once upon a time", max_tokens=60, temperature=0, stream=True)
        first = next(it)
        started.set()
        result["text"] = first + "".join(it)
        result["reason"] = it.finish_reason

    def caller():
        assert started.wait(TIMEOUT)
        result["other"] = g.generate("The capital of France is", max_tokens=3, temperature=0).tokens

    try:
        want = g.generate("Once upon a time", max_tokens=60, temperature=0)
        threads = [threading.Thread(target=streamer), threading.Thread(target=caller)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(TIMEOUT)
        assert not any(t.is_alive() for t in threads), "a thread hung"
        assert result["reason"] == want.finish_reason and result["text"] == want.text
        assert len(result["other"]) == 3
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
