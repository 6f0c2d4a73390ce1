"""`specgen serve` as llama-server's users and clients meet it: its native routes (/completion with its
timings and SSE format, /tokenize, /detokenize, /props, /slots) over plain HTTP as llama-server's web UI
sends them, the OpenAI routes through the real `openai` client with any model name and no chat-template
flag (the architecture's built-in template, stated in a header), CORS with --allowed-origins (off
without), JSON bodies without Content-Type, llama.cpp's flags (-hf, -ngl, -fa, --jinja, --log-disable,
--no-perf) parsed without prefix surprises, and a port in use found before the model loads.

The Python SDK (plain greedy decoding) is the reference for every generated text.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from server_helpers import HOST, Server, child_env, cli_binary, free_port

openai = pytest.importorskip("openai", reason="needs the test extra (pip install .[test])")
httpx = pytest.importorskip("httpx", reason="needs the test extra (pip install .[test])")
pytest.importorskip("fastapi", reason="needs the server extra (pip install .[server])")

N_CTX = 512
ORIGIN = "http://ui.example"
PROMPT = "The capital of France is"


@pytest.fixture(scope="module")
def server(model_path):
    # No --chat-template and no --alias: the reference GGUF's own name, Gemma 3's built-in template.
    s = Server(str(model_path), "-c", str(N_CTX), "-t", "2", "-np", "2", "--draft", "none",
               "--allowed-origins", ORIGIN, "--jinja", "-fa", "--no-perf")
    yield s
    s.stop()


@pytest.fixture(scope="module")
def served_name(model_path):
    return os.path.basename(str(model_path))


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=120)


def _post(server, path, **kw):
    return httpx.post(server.url + path, timeout=120, **kw)


# -- llama-server's native routes ------------------------------------------------------------------------
def test_completion_as_the_web_ui_sends_it(server, gen, served_name):
    ref = gen.generate(PROMPT, max_tokens=8, temperature=0)
    r = _post(server, "/completion", json={"prompt": PROMPT, "n_predict": 8, "temperature": 0, "cache_prompt": True,
                                           "stream": False})
    assert r.status_code == 200, r.text
    d = r.json()
    assert d["content"] == ref.text and d["stop"] is True and d["stop_type"] == "limit"
    assert d["tokens_predicted"] == 8 and d["tokens_evaluated"] == len(gen.tokenize(PROMPT))
    assert d["model"] == served_name and d["generation_settings"]["n_ctx"] == N_CTX
    t = d["timings"]
    base = {"cache_n", "prompt_n", "prompt_ms", "prompt_per_token_ms", "prompt_per_second", "predicted_n",
            "predicted_ms", "predicted_per_token_ms", "predicted_per_second"}
    assert set(t) in (base, base | {"draft_n", "draft_n_accepted"})  # llama-server adds them when it drafted
    assert t["predicted_n"] == 8 and t["prompt_n"] + d["tokens_cached"] == d["tokens_evaluated"]
    assert t["cache_n"] == d["tokens_cached"]
    assert t.get("draft_n", 0) >= t.get("draft_n_accepted", 0) >= 0
    assert all(v >= 0 for v in t.values())
    assert t["predicted_per_second"] == pytest.approx(1e3 * t["predicted_n"] / t["predicted_ms"])


def test_completion_stream_is_llama_servers_sse(server, gen):
    ref = gen.generate(PROMPT, max_tokens=6, temperature=0)
    with httpx.stream("POST", server.url + "/completion", timeout=120,
                      json={"prompt": PROMPT, "n_predict": 6, "temperature": 0, "stream": True}) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in r.iter_lines() if line]
    assert all(line.startswith("data: ") for line in lines) and "data: [DONE]" not in lines
    events = [json.loads(line[6:]) for line in lines]
    assert all(e["stop"] is False for e in events[:-1]) and events[-1]["stop"] is True
    assert "".join(e["content"] for e in events) == ref.text
    assert events[-1]["tokens_predicted"] == 6 and events[-1]["timings"]["predicted_n"] == 6


def test_completion_stop_word_alias_and_tokens(server, gen):
    full = gen.generate(PROMPT, max_tokens=12, temperature=0).text
    word = full.split()[2]
    d = _post(server, "/completion", json={"prompt": PROMPT, "max_tokens": 12, "temperature": 0, "stop": [word],
                                           "return_tokens": True}).json()
    assert d["stop_type"] == "word" and d["stopping_word"] == word and d["content"] == full[: full.index(word)]
    assert d["tokens"] and len(d["tokens"]) == d["tokens_predicted"]
    d = _post(server, "/completion", json={"prompt": gen.tokenize(PROMPT), "n_predict": 3, "temperature": 0}).json()
    assert d["tokens_predicted"] == 3 and d["content"] == gen.generate(PROMPT, max_tokens=3, temperature=0).text


@pytest.mark.parametrize("body,needle", [
    ({"prompt": "x", "mirostat": 2}, "mirostat"), ({"prompt": "x", "n_probs": 5}, "n_probs"),
    ({"prompt": "x", "typical_p": 0.5}, "typical_p"), ({"prompt": "x", "n_predict": "five"}, "n_predict"),
    ({"n_predict": 3}, "prompt"), ({"prompt": "word " * 600}, str(N_CTX)),
])
def test_completion_bad_requests(server, body, needle):
    r = _post(server, "/completion", json=body)
    assert r.status_code == 400 and needle in r.json()["error"]["message"], r.text
    if needle == str(N_CTX):
        assert r.json()["error"]["param"] == "prompt"


def test_tokenize_and_detokenize(server, gen):
    ids = gen.tokenize("Hello, world!", add_bos=False)
    assert _post(server, "/tokenize", json={"content": "Hello, world!"}).json() == {"tokens": ids}
    assert _post(server, "/tokenize", json={"content": "Hello, world!", "add_special": True}).json()["tokens"] == \
        gen.tokenize("Hello, world!")
    pieces = _post(server, "/tokenize", json={"content": "Hello, world!", "with_pieces": True}).json()["tokens"]
    assert [p["id"] for p in pieces] == ids and "".join(p["piece"] for p in pieces) == "Hello, world!"
    assert _post(server, "/detokenize", json={"tokens": ids}).json() == {"content": "Hello, world!"}
    r = _post(server, "/detokenize", json={"tokens": [10**9]})
    assert r.status_code == 400 and "vocabulary" in r.json()["error"]["message"]


def test_props_and_slots(server, model_path, served_name):
    p = httpx.get(server.url + "/props", timeout=30).json()
    assert p["total_slots"] == 2 and p["model_path"] == str(model_path) and p["model_alias"] == served_name
    assert p["chat_template_source"] == "builtin:gemma3" and "<start_of_turn>" in p["chat_template"]
    settings = p["default_generation_settings"]
    assert settings["n_ctx"] == N_CTX and settings["params"]["temperature"] == 0.8 and settings["speculative"] is False
    assert p["bos_token"] == "<bos>"
    slots = httpx.get(server.url + "/slots", timeout=30).json()
    assert [s["id"] for s in slots] == [0, 1] and all(s["n_ctx"] == N_CTX and "is_processing" in s for s in slots)


# -- the OpenAI routes as llama-server serves them ---------------------------------------------------------
def test_any_model_name_and_the_builtin_chat_template(client, gen, served_name):
    msgs = [{"role": "user", "content": "Name three colours."}]
    ref = gen.create_chat_completion(msgs, max_tokens=8, temperature=0)
    raw = client.chat.completions.with_raw_response.create(model="gpt-4o", messages=msgs, max_tokens=8, temperature=0)
    assert raw.headers["x-specgen-chat-template"] == "builtin:gemma3"
    r = raw.parse()
    assert r.model == served_name and r.choices[0].message.content == ref["choices"][0]["message"]["content"]
    c = client.completions.create(model="some-fixed-name", prompt=PROMPT, max_tokens=4, temperature=0)
    assert c.model == served_name and c.choices[0].text == gen.generate(PROMPT, max_tokens=4, temperature=0).text


def test_completions_overflow_names_the_prompt(server, client):
    r = _post(server, "/v1/completions", json={"prompt": "word " * 600, "max_tokens": 1})
    assert r.status_code == 400 and r.json()["error"]["param"] == "prompt"
    with pytest.raises(openai.BadRequestError, match=str(N_CTX)):
        client.completions.create(model="x", prompt="word " * 600, max_tokens=1)


@pytest.mark.parametrize("headers,status", [
    ({}, 200), ({"content-type": "application/x-www-form-urlencoded"}, 200), ({"content-type": "text/plain"}, 200),
    ({"content-type": "multipart/form-data; boundary=x"}, 400),
])
def test_json_bodies_whatever_the_content_type(server, headers, status):
    r = _post(server, "/v1/completions", content=json.dumps({"prompt": "x", "max_tokens": 1}).encode(), headers=headers)
    assert r.status_code == status, r.text
    if status == 400:
        assert "Content-Type: application/json" in r.json()["error"]["message"]


def test_cors_with_allowed_origins(server):
    preflight = {"Origin": ORIGIN, "Access-Control-Request-Method": "POST",
                 "Access-Control-Request-Headers": "content-type,authorization"}
    r = httpx.options(server.url + "/v1/chat/completions", headers=preflight, timeout=30)
    assert r.status_code == 200 and r.headers["access-control-allow-origin"] == ORIGIN
    assert "POST" in r.headers["access-control-allow-methods"]
    r = httpx.options(server.url + "/v1/chat/completions", headers=dict(preflight, Origin="http://evil.example"), timeout=30)
    assert r.headers.get("access-control-allow-origin") != "http://evil.example"
    r = httpx.get(server.url + "/v1/models", headers={"Origin": ORIGIN}, timeout=30)
    assert r.status_code == 200 and r.headers["access-control-allow-origin"] == ORIGIN


def test_cors_is_off_and_names_strict_only_on_request(gen):
    """In process (the app `specgen serve` builds): without --allowed-origins no CORS header and OPTIONS is
    405; with strict_model (--strict-model) another model name is a 404."""
    import asyncio

    from specgen.server.app import create_app

    async def scenario(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://specgen.test", timeout=60) as c:
            pre = await c.options("/v1/models", headers={"Origin": ORIGIN, "Access-Control-Request-Method": "GET"})
            get = await c.get("/v1/models", headers={"Origin": ORIGIN})
            other = await c.post("/v1/completions", json={"model": "gpt-4o", "prompt": "x", "max_tokens": 1})
        return pre, get, other

    for strict in (False, True):
        app = create_app(gen, strict_model=strict)
        try:
            pre, get, other = asyncio.run(scenario(app))
        finally:
            app.state.specgen.engine.close()
        assert pre.status_code == 405 and "access-control-allow-origin" not in get.headers
        assert other.status_code == (404 if strict else 200), other.text
        if strict:
            assert other.json()["error"]["code"] == "model_not_found"


# -- the command line ----------------------------------------------------------------------------------------
def _parse(*argv):
    from specgen.server import cli

    return cli.build_parser().parse_args(list(argv))


def test_llama_cpp_flags_parse_as_written(capsys):
    from specgen import _core
    from specgen.server import cli

    ns = _parse("-ngl", "99", "-n16", "-hf", "org/repo:Q8_0", "-fa", "--jinja", "--log-disable", "--no-perf",
                "--allowed-origins", "http://a.example,http://b.example", "--allowed-origins", "*")
    assert ns.n_gpu_layers == 99 and ns.n_predict == 16 and ns.flash_attn == "on"
    notes = []
    kw = cli.generator_kwargs(ns, notes)
    assert kw["model"] == "org/repo:Q8_0"
    assert any("-fa is accepted and ignored" in n for n in notes)
    if _core.cuda_device_count() == 0:
        assert kw.get("device") in (None, "cpu") and any("-ngl 99" in n and "CPU" in n for n in notes)
    else:
        assert kw["device"] == "cuda"
    assert cli.app_kwargs(ns)["allowed_origins"] == ["http://a.example", "http://b.example", "*"]
    assert cli.app_kwargs(ns)["strict_model"] is False and cli.app_kwargs(_parse("--strict-model"))["strict_model"]
    with pytest.raises(SystemExit, match="either -m/--model or -hf"):
        cli.generator_kwargs(_parse("-m", "a.gguf", "-hf", "org/repo"), [])


@pytest.mark.parametrize("argv,needle", [
    (["-ngl", "x"], "-ngl"), (["-ng", "99"], "-ng"), (["-nx"], "-nx"), (["--n-pred", "5"], "--n-pred"),
    (["-hfx", "a"], "-hfx"),
])
def test_flags_never_match_by_prefix_or_glued_letters(capsys, argv, needle):
    with pytest.raises(SystemExit) as e:
        _parse(*argv)
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("specgen serve: error: ") and needle in err[0]


def test_a_port_in_use_is_found_before_the_model_loads(tmp_path):
    with socket.socket() as busy:
        busy.bind((HOST, 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        # A model that does not exist: the port check must answer first.
        r = subprocess.run([cli_binary(), "serve", "-m", str(tmp_path / "absent.gguf"), "--host", HOST, "--port", str(port)],
                           env=child_env(), capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "already in use" in lines[0] and str(port) in lines[0], r.stderr
    assert "absent.gguf" not in r.stderr and "Traceback" not in r.stderr


def test_serve_hf_loads_a_hub_reference(tmp_path, model_path):
    """`specgen serve -hf org/repo:QUANT` with the Hub faked at the HTTP layer in the server's process."""
    pytest.importorskip("huggingface_hub")
    import fake_hub

    env = child_env()
    env.pop("HF_HUB_OFFLINE", None)
    env["HF_HUB_CACHE"] = str(tmp_path / "hf-cache")
    env[fake_hub.ENV] = json.dumps({"someorg/gemma-3-270m-GGUF": {"gemma-3-270m-Q4_K_M.gguf": str(model_path)}})
    env["PYTHONPATH"] = os.pathsep.join([str(fake_hub.sitecustomize_dir(tmp_path)), env["PYTHONPATH"]])
    port = free_port()
    proc = subprocess.Popen([cli_binary(), "serve", "-hf", "someorg/gemma-3-270m-GGUF:Q4_K_M", "--host", HOST,
                             "--port", str(port), "-c", "128", "-t", "1", "--draft", "none", "--log-disable"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://{HOST}:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, proc.stdout.read()
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "the server did not come up"
            time.sleep(0.1)
        assert [m["id"] for m in httpx.get(url + "/v1/models").json()["data"]] == ["gemma-3-270m-Q4_K_M.gguf"]
        assert httpx.get(url + "/props").json()["model_path"].startswith(str(tmp_path / "hf-cache"))
    finally:
        proc.terminate()
        try:
            out, _ = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
    assert "specgen serve:" not in out  # --log-disable: no notes, no banner
