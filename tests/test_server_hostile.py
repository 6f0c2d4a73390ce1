"""The server against an attacker and a careless client (issue 36): each probe, bounded in count and
time, with the outcome it must get.

Servers run in this process on free loopback ports with the same uvicorn configuration as
`specgen serve` (specgen.server.http_limits.uvicorn_config), over one Generator with four slots. Normal
requests go through the real `openai` client; hostile ones through raw sockets or httpx.

- HTTP: a half-sent head and a silent connection are closed after --timeout; a body shorter than its
  Content-Length gets 408; connections past --max-connections get 503 with Retry-After, past twice it
  they are closed at once, and the server serves again when they go; a write the client never reads
  ends the response; TLS; a bad security flag is a one-line error before any model loads.
- Keys and docs: no key / a wrong key -> 401, either right key works, /health stays open;
  --disable-docs removes /docs, /redoc and /openapi.json. Every 503 carries Retry-After.
- Context: prompt + max_tokens past n_ctx -> 400 naming n_ctx and the numbers; without max_tokens a
  chat request stops at the context.
- Templates: nested loops, a huge string, a recursive macro -> a one-line 400 in bounded time, while
  completions keep being served; a GGUF's template takes the same path as a file's.
- Disconnects: a client gone while queued or running, streamed or not, or before its body arrived,
  leaves the gauges at 0 and is counted once (one test per path).
- Soak: 300 short requests, 32 in flight, a fifth of them abandoned: every completed response is
  whole (the greedy text), the gauges end at 0, RSS stays flat.
"""
from __future__ import annotations

import json
import random
import shutil
import socket
import ssl
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Optional

import pytest

from server_helpers import HOST, metric, missing

openai = pytest.importorskip("openai", reason="needs the test extra (pip install .[test])")
httpx = pytest.importorskip("httpx", reason="needs the test extra (pip install .[test])")
uvicorn = pytest.importorskip("uvicorn", reason="needs the server extra (pip install .[server])")
psutil = pytest.importorskip("psutil", reason="needs the test extra (pip install .[test])")

import specgen  # noqa: E402
from specgen.chat_template import ChatTemplateError, template_for  # noqa: E402
from specgen.server.app import create_app  # noqa: E402
from specgen.server.http_limits import HttpLimits, uvicorn_config  # noqa: E402

N_SLOTS = 4
N_CTX = 1024  # room for requests that cannot end by themselves during a probe
PROMPTS = ["The capital of France is", "Once upon a time", "def fibonacci(n):", "Water boils at"]
KEYS = ["key-one", "key-two"]
HOSTILE_TEMPLATES = {
    "nested loops": "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
    "huge string": "{{ 'x' * 10**9 }}",
    "recursive macro": "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
}


class InProcessServer:
    """uvicorn in a thread of this process, configured as `specgen serve` configures it."""

    def __init__(self, app, limits: HttpLimits = HttpLimits(), **tls) -> None:
        self.app = app
        self.server = uvicorn.Server(uvicorn_config(app, host=HOST, port=0, limits=limits, log_level="critical", **tls))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            assert self.thread.is_alive() and time.monotonic() < deadline, "the server did not start"
            time.sleep(0.01)
        self.port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"{'https' if tls else 'http'}://{HOST}:{self.port}"

    @property
    def open_connections(self) -> int:
        return len(self.server.server_state.connections)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(30)


def wait_until(cond: Callable[[], bool], timeout: float = 20.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def connect(port: int) -> socket.socket:
    s = socket.create_connection((HOST, port), timeout=30)
    return s


def request_bytes(method: str, path: str, body: Optional[dict] = None, headers: Optional[dict] = None) -> bytes:
    data = json.dumps(body).encode() if body is not None else b""
    lines = [f"{method} {path} HTTP/1.1", f"Host: {HOST}"]
    if body is not None:
        lines += ["Content-Type: application/json", f"Content-Length: {len(data)}"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + data


def read_all(s: socket.socket, timeout: float = 30.0) -> bytes:
    """Everything the server sends until it closes the connection (ConnectionReset counts as closed)."""
    s.settimeout(timeout)
    out = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return out
            out += chunk
    except ConnectionResetError:
        return out


def status_and_headers(raw: bytes) -> tuple:
    head = raw.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in head[1:])}
    return int(head[0].split()[1]), headers


def gauges(url: str) -> tuple:
    from server_helpers import scrape

    m = scrape(url)
    return metric(m, "specgen:num_requests_running"), metric(m, "specgen:num_requests_waiting"), m


# ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def gen(model_path):
    g = specgen.Generator(model_path, n_threads=2, n_ctx=N_CTX, n_parallel=N_SLOTS)
    yield g
    g.close()


@pytest.fixture(scope="module")
def reference(gen):
    return {p: gen.generate(p, max_tokens=2, temperature=0).text for p in PROMPTS}


@pytest.fixture(scope="module")
def srv(gen):
    s = InProcessServer(create_app(gen, n_slots=N_SLOTS, queue_size=64, chat_template="gemma3"))
    yield s
    s.stop()


@pytest.fixture(scope="module")
def slow_srv(gen):
    # A 1-second --timeout, so the probes stay short.
    s = InProcessServer(create_app(gen, n_slots=N_SLOTS, queue_size=4, timeout=1.0), HttpLimits(timeout=1.0, max_connections=8))
    yield s
    s.stop()


@pytest.fixture(scope="module")
def cap_srv(gen):
    # A cap of 2 connections; kept-alive ones stay open for the probe.
    s = InProcessServer(create_app(gen, n_slots=N_SLOTS, queue_size=4), HttpLimits(keep_alive=60.0, max_connections=2))
    yield s
    s.stop()


def _idle(srv_url: str) -> bool:
    running, waiting, _ = gauges(srv_url)
    return running == 0 and waiting == 0 and httpx.get(srv_url + "/health").json()["requests"] == 0


# -- HTTP ---------------------------------------------------------------------------------------------
def test_half_sent_head_and_silent_connection_are_closed(slow_srv):
    half = connect(slow_srv.port)
    half.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: appl")
    silent = connect(slow_srv.port)
    t0 = time.monotonic()
    assert read_all(half) == b"" and read_all(silent) == b""
    assert time.monotonic() - t0 < 20  # --timeout 1 s, with room for a loaded machine
    half.close()
    silent.close()
    assert httpx.get(slow_srv.url + "/health", timeout=30).status_code == 200


def test_body_shorter_than_its_length_gets_408(slow_srv):
    s = connect(slow_srv.port)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: 1000\r\n\r\n" + b'{"prompt": "x", "max_tokens": 1, "pad": "' + b"." * 8)
    raw = read_all(s)
    s.close()
    status, headers = status_and_headers(raw)
    assert status == 408 and headers.get("connection") == "close"
    assert json.loads(raw.split(b"\r\n\r\n", 1)[1])["error"]["code"] == "request_timeout"
    wait_until(lambda: _idle(slow_srv.url), what="an idle server")


def test_connections_past_the_cap_are_refused_then_served_again(cap_srv):
    wait_until(lambda: cap_srv.open_connections == 0, what="no open connections")
    held = []
    for _ in range(2):  # the cap: two kept-alive connections, each served once
        s = connect(cap_srv.port)
        s.sendall(request_bytes("GET", "/health"))
        assert s.recv(65536).startswith(b"HTTP/1.1 200")
        held.append(s)
    third = connect(cap_srv.port)  # past the cap: its request gets 503 + Retry-After
    fourth = connect(cap_srv.port)
    wait_until(lambda: cap_srv.open_connections >= 4, what="four accepted connections")
    fifth = connect(cap_srv.port)  # past twice the cap: closed at once, nothing read
    assert read_all(fifth, timeout=10) == b""
    third.sendall(request_bytes("GET", "/health"))
    raw = read_all(third)
    status, headers = status_and_headers(raw)
    assert status == 503 and headers["retry-after"] == "1" and headers["connection"] == "close"
    assert json.loads(raw.split(b"\r\n\r\n", 1)[1])["error"]["code"] == "too_many_connections"
    for s in held + [third, fourth, fifth]:
        s.close()
    wait_until(lambda: httpx.get(cap_srv.url + "/health", timeout=10).status_code == 200, what="service again")


def test_tls(gen, tmp_path):
    if shutil.which("openssl") is None:
        missing("openssl is needed to make a test certificate")
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=60)
    s = InProcessServer(create_app(gen, n_slots=N_SLOTS, queue_size=4), ssl_keyfile=str(key), ssl_certfile=str(cert))
    try:
        client = openai.OpenAI(base_url=s.url + "/v1", api_key="unused", max_retries=0, timeout=60,
                               http_client=httpx.Client(verify=ssl.create_default_context(cafile=str(cert))))
        r = client.completions.create(model=client.models.list().data[0].id, prompt=PROMPTS[0], max_tokens=2,
                                      temperature=0)
        assert r.usage.completion_tokens == 2
        with pytest.raises(httpx.HTTPError):  # plain HTTP to the TLS port
            httpx.get(f"http://{HOST}:{s.port}/health", timeout=10)
    finally:
        s.stop()


def test_a_write_the_client_never_reads_ends_the_response():
    # ResponseGuard (what --timeout does to writes): a send that waits past the timeout fails as an
    # OSError, which Starlette takes for the client going away (the route then cancels its request);
    # the 503 got its Retry-After on the way.
    import asyncio

    from specgen.server.http_limits import ResponseGuard

    failed, sent = [], []

    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 503, "headers": []})
        try:
            await send({"type": "http.response.body", "body": b"x"})
        except OSError as e:
            failed.append(type(e).__name__)
            raise

    async def send(message):
        sent.append(message)
        if message["type"] == "http.response.body":
            await asyncio.Event().wait()  # a client that never reads

    asyncio.run(asyncio.wait_for(ResponseGuard(app, timeout=0.05)({"type": "http"}, None, send), 30))
    assert failed == ["ClientTooSlow"]
    assert (b"retry-after", b"1") in sent[0]["headers"]


@pytest.mark.parametrize("flags, needle", [
    (["--ssl-key-file", "key.pem"], "--ssl-key-file and --ssl-cert-file go together"),
    (["--ssl-key-file", "missing.pem", "--ssl-cert-file", "missing.pem"], "no such file"),
    (["--api-key-file", "missing.txt"], "--api-key-file missing.txt"),
    (["--api-key", "a,,b"], "must not be empty"),
    (["--max-connections", "0"], "--max-connections must be >= 1"),
    (["--timeout", "0"], "--timeout must be > 0"),
])
def test_security_flag_errors_are_one_line(tmp_path, monkeypatch, capsys, flags, needle):
    from specgen.server import cli

    monkeypatch.chdir(tmp_path)
    (tmp_path / "key.pem").write_text("")
    assert cli.main(["--port", "0", *flags]) == 2  # before any model loads
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1 and err.startswith("specgen serve: error: ")


# -- keys, docs, Retry-After -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def key_srv(gen):
    s = InProcessServer(create_app(gen, n_slots=N_SLOTS, queue_size=4, api_keys=KEYS, disable_docs=True))
    yield s
    s.stop()


def test_api_key_missing_wrong_and_right(key_srv, reference):
    for key in ("key-three", "key-one-", "key-on", KEYS[0].upper()):
        c = openai.OpenAI(base_url=key_srv.url + "/v1", api_key=key, max_retries=0, timeout=60)
        with pytest.raises(openai.AuthenticationError):
            c.completions.create(model="m", prompt=PROMPTS[0], max_tokens=2)
    r = httpx.post(key_srv.url + "/v1/completions", json={"prompt": "x", "max_tokens": 1}, timeout=30)
    assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
    assert "Missing API key" in r.json()["error"]["message"] and r.headers["www-authenticate"] == "Bearer"
    assert httpx.get(key_srv.url + "/metrics", timeout=30).status_code == 401
    assert httpx.get(key_srv.url + "/health", timeout=30).status_code == 200  # open, as llama-server's
    for key in KEYS:
        c = openai.OpenAI(base_url=key_srv.url + "/v1", api_key=key, max_retries=0, timeout=60)
        model = c.models.list().data[0].id
        r = c.completions.create(model=model, prompt=PROMPTS[0], max_tokens=2, temperature=0)
        assert r.choices[0].text == reference[PROMPTS[0]]


def test_disable_docs(key_srv, gen):
    auth = {"Authorization": f"Bearer {KEYS[0]}"}
    for path in ("/docs", "/redoc", "/openapi.json"):
        assert httpx.get(key_srv.url + path, headers=auth, timeout=30).status_code == 404
    # ... while a server without the flag has them.
    transport = httpx.ASGITransport(app=create_app(gen, n_slots=1, queue_size=0))

    async def fetch():
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            return (await c.get("/openapi.json")).status_code

    import asyncio

    assert asyncio.run(fetch()) == 200


def test_queue_full_503_has_retry_after(gen):
    s = InProcessServer(create_app(gen, n_slots=1, queue_size=0))
    try:
        with httpx.Client(timeout=60) as c, c.stream("POST", s.url + "/v1/completions",
                                                     json={"prompt": PROMPTS[1], "max_tokens": 200, "stream": True}) as busy:
            lines = busy.iter_lines()
            next(lines)  # it holds the only admission (while `lines` lives: dropping it closes the response)
            r = httpx.post(s.url + "/v1/completions", json={"prompt": "x", "max_tokens": 1}, timeout=30)
            assert r.status_code == 503 and r.headers["retry-after"] == "1"
            assert r.json()["error"]["code"] == "queue_full"
        wait_until(lambda: _idle(s.url), what="an idle server")
    finally:
        s.stop()


# -- the context ------------------------------------------------------------------------------------
def test_prompt_plus_max_tokens_past_the_context_is_a_400(srv, gen):
    client = openai.OpenAI(base_url=srv.url + "/v1", api_key="unused", max_retries=0, timeout=60)
    model = client.models.list().data[0].id
    prompt = "word " * 950
    n_prompt = len(gen.tokenize(prompt))
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model=model, prompt=prompt, max_tokens=100)
    message = e.value.body["message"]
    assert f"maximum context length is {N_CTX}" in message and f"{n_prompt + 100} tokens" in message
    assert e.value.body["code"] == "context_length_exceeded"
    # Without max_tokens a chat request stops at the context instead of failing.
    messages = [{"role": "user", "content": "word " * 1000}]
    r = client.chat.completions.create(model=model, messages=messages, temperature=0)
    assert r.usage.prompt_tokens + r.usage.completion_tokens <= N_CTX
    assert r.usage.completion_tokens <= N_CTX - r.usage.prompt_tokens


# -- templates ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(HOSTILE_TEMPLATES))
def test_runaway_template_is_a_one_line_400_and_completions_go_on(gen, tmp_path, name):
    path = tmp_path / "t.jinja"
    path.write_text(HOSTILE_TEMPLATES[name])
    s = InProcessServer(create_app(gen, n_slots=N_SLOTS, queue_size=16, chat_template=str(path)))
    try:
        client = openai.OpenAI(base_url=s.url + "/v1", api_key="unused", max_retries=0, timeout=60)
        model = client.models.list().data[0].id

        def chat(_):
            try:
                client.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}], max_tokens=1)
            except openai.BadRequestError as e:
                return e.body["message"]
            return "served"

        with ThreadPoolExecutor(6) as pool:  # more runaway renders than the render threads
            chats = pool.map(chat, range(6))
            r = client.completions.create(model=model, prompt=PROMPTS[0], max_tokens=2, temperature=0)
            messages = list(chats)
        assert r.usage.completion_tokens == 2
        for m in messages:
            assert m.startswith("the chat template went over its budget") and "\n" not in m, m
            assert "RecursionError" not in m
    finally:
        s.stop()


def test_a_gguf_template_takes_the_same_path(gen):
    class WithTemplate:  # the Generator, with a hostile tokenizer.chat_template in its metadata
        metadata = {"tokenizer.chat_template": HOSTILE_TEMPLATES["nested loops"]}
        model_path = gen.model_path
        _g = gen._g

    with pytest.raises(ChatTemplateError, match="over its budget"):
        template_for(WithTemplate()).render([{"role": "user", "content": "hi"}])


# -- disconnects ----------------------------------------------------------------------------------------
def _hold_slots(url: str, n: int) -> list:
    """n streams that took a slot each (their first chunk came); close them to free the slots."""
    held = []
    for i in range(n):
        c = httpx.Client(timeout=60)
        cm = c.stream("POST", url + "/v1/completions",
                      json={"prompt": PROMPTS[i % len(PROMPTS)], "max_tokens": 1000, "stream": True, "temperature": 0})
        lines = cm.__enter__().iter_lines()
        next(lines)  # (dropping this iterator would close the response)
        held.append((c, cm, lines))
    return held


def _release(held: list) -> None:
    for c, cm, _ in held:
        cm.__exit__(None, None, None)
        c.close()


def _completion_request(stream: bool) -> bytes:
    return request_bytes("POST", "/v1/completions", {"prompt": PROMPTS[2], "max_tokens": 1000, "stream": stream})


@pytest.mark.parametrize("path", ["queued", "queued stream", "running", "running stream", "before its body"])
def test_a_client_gone_leaves_the_gauges_at_zero(srv, path):
    wait_until(lambda: _idle(srv.url), what="an idle server")
    before = gauges(srv.url)[2]
    held = _hold_slots(srv.url, N_SLOTS) if path.startswith("queued") else []
    s = connect(srv.port)
    if path == "before its body":
        s.sendall(_completion_request(False)[:-10])
        time.sleep(0.2)
    else:
        s.sendall(_completion_request(stream=path.endswith("stream")))
        if path.startswith("queued"):
            wait_until(lambda: gauges(srv.url)[1] == 1, what="the request queued")
        else:
            wait_until(lambda: gauges(srv.url)[0] == 1, what="the request running")
    s.close()
    if path.startswith("queued"):
        wait_until(lambda: gauges(srv.url)[1] == 0, what="the queued request gone")
        assert gauges(srv.url)[0] == N_SLOTS  # the requests holding the slots run on
    _release(held)
    wait_until(lambda: _idle(srv.url), what="gauges back to 0")
    after = gauges(srv.url)[2]
    n_cancelled = metric(after, "specgen:request_success_total", finished_reason="cancelled") - \
        metric(before, "specgen:request_success_total", finished_reason="cancelled")
    assert n_cancelled == (0 if path == "before its body" else 1) + len(held)
    assert metric(after, "specgen:requests_rejected_total") == metric(before, "specgen:requests_rejected_total")


# -- soak ------------------------------------------------------------------------------------------------
def test_soak_300_requests_32_in_flight_random_disconnects(srv, reference):
    rng = random.Random(36)
    plan = [(rng.choice(PROMPTS), rng.random() < 0.2, rng.random() < 0.5, rng.random() < 0.5) for _ in range(300)]
    client = openai.OpenAI(base_url=srv.url + "/v1", api_key="unused", max_retries=0, timeout=120)
    model = client.models.list().data[0].id
    proc = psutil.Process()

    def one(item) -> str:
        prompt, abandon, stream, wait_first = item
        if abandon:  # a client gone at a random point: before, at or after its first chunk
            s = connect(srv.port)
            s.sendall(request_bytes("POST", "/v1/completions", {"prompt": prompt, "max_tokens": 2, "stream": stream}))
            if wait_first:
                s.recv(1)
            s.close()
            return "abandoned"
        if stream:
            chunks = list(client.completions.create(model=model, prompt=prompt, max_tokens=2, temperature=0, stream=True))
            text, reason = "".join(c.choices[0].text for c in chunks), chunks[-1].choices[0].finish_reason
        else:
            r = client.completions.create(model=model, prompt=prompt, max_tokens=2, temperature=0)
            text, reason = r.choices[0].text, r.choices[0].finish_reason
        return "whole" if text == reference[prompt] and reason in ("length", "stop") else f"wrong: {text!r} {reason}"

    with ThreadPoolExecutor(32) as pool:
        warm = list(pool.map(one, plan[:60]))
        rss0 = proc.memory_info().rss
        rest = list(pool.map(one, plan[60:]))
    outcomes = warm + rest
    assert [o for o in outcomes if o not in ("whole", "abandoned")] == []
    assert outcomes.count("whole") == sum(not item[1] for item in plan)
    wait_until(lambda: _idle(srv.url), what="gauges back to 0")
    growth = (proc.memory_info().rss - rss0) / 2**20
    assert growth < 32, f"RSS grew by {growth:.1f} MiB over 240 requests"
