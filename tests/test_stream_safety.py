"""No request ends another caller's (issue 36; engine/scheduler.h): eight threads on one Generator mix
fully read streams and blocking generate() calls, some with a generate() inside their stream loop;
every stream returns its whole greedy text (as the same request alone gives it) and ends as that
request ends alone, never "cancelled", with four slots and with one. The threads run in a child
process with a timeout, so a deadlock fails the test instead of hanging the suite."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

TIMEOUT = 300

CHILD = r"""
import json, sys, threading
import specgen

path, n_parallel = sys.argv[1], int(sys.argv[2])
prompts = ["The capital of France is", "def fibonacci(n):", "Once upon a time", "The printing press",
           "Water boils at", "List the planets:"]
N = 10
g = specgen.Generator(path, n_threads=2, n_ctx=256, n_parallel=n_parallel, draft="ngram")
alone = {p: g.generate(p, max_tokens=N, temperature=0) for p in prompts}
got, errors = [], []
lock = threading.Lock()

def stream(p, inner):
    it = g.generate(p, max_tokens=N, temperature=0, stream=True)
    pieces = []
    for k, piece in enumerate(it):
        pieces.append(piece)
        if inner is not None and k == 0:  # a blocking request while this stream is open
            r = g.generate(inner, max_tokens=N, temperature=0)
            with lock:
                got.append(("inner", inner, r.text, r.finish_reason))
    with lock:
        got.append(("stream", p, "".join(pieces), it.finish_reason))

def blocking(p):
    r = g.generate(p, max_tokens=N, temperature=0)
    with lock:
        got.append(("blocking", p, r.text, r.finish_reason))

def worker(i):
    try:
        for j in range(2):
            p = prompts[(i + j) % len(prompts)]
            if (i + j) % 2 == 0:
                stream(p, prompts[(i + 3) % len(prompts)] if i % 4 == 0 else None)
            else:
                blocking(p)
    except BaseException as e:
        errors.append(repr(e))

threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
wrong = [(kind, p, text, reason) for kind, p, text, reason in got
         if (text, reason) != (alone[p].text, alone[p].finish_reason)]
print(json.dumps({"errors": errors, "n": len(got), "n_streams": sum(k == "stream" for k, *_ in got),
                  "wrong": wrong}))
"""


@pytest.mark.parametrize("n_parallel", [4, 1])
def test_eight_threads_mixing_streams_and_blocking_calls_lose_nothing(model_path, n_parallel):
    out = subprocess.run([sys.executable, "-c", CHILD, model_path, str(n_parallel)],
                         capture_output=True, text=True, timeout=TIMEOUT)
    assert out.returncode == 0, out.stderr[-3000:]
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["errors"] == []
    # 8 threads x 2 requests, half of them streams; threads 0 and 4 add one inner request each.
    assert res["n"] == 18 and res["n_streams"] == 8
    assert res["wrong"] == [], res["wrong"]
