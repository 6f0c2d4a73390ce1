"""The pair study (specgen.bench.pair) and llama-server as a peer (specgen.bench.peer_server), without
the 1.6 GB pair or a real llama-server: the configuration names, the interleaved schedule, the summary
arithmetic, and a whole run on the tiny model of tests/hostile_gguf.py against a stand-in llama-server
(a Python script that speaks its /health and /completion and logs when it starts and stops)."""
from __future__ import annotations

import json
import math
import os
import stat
import sys
import textwrap

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from specgen.bench import pair, peer_server  # noqa: E402
from specgen.bench.peer_server import LlamaServer, PeerServerError, ServerConfig  # noqa: E402

from hostile_gguf import tiny_model  # noqa: E402


# -- configuration names -------------------------------------------------------------------------
def test_configs_parse():
    cs = pair.parse_configs("plain,draft,draft:token,draft:nanospec:g4:fixed,ngram@0,auto@0/1,llama,llama:draft:n5,"
                            "llama:draft:best@0")
    by = {c.name: c for c in cs}
    assert list(by) == ["plain", "draft", "draft:token", "draft:nanospec:g4:fixed", "ngram", "auto", "llama",
                        "llama:draft:n5", "llama:draft:best"]
    assert (by["draft"].engine, by["draft"].verify, by["draft:token"].verify) == ("specgen", "block", "token")
    d = by["draft:nanospec:g4:fixed"]
    assert (d.nanospec, d.draft_max, d.adaptive) == (True, 4, False)
    assert by["ngram"].temps == (0.0,) and by["ngram"].runs_at(0.0) and not by["ngram"].runs_at(1.0)
    assert by["auto"].temps == (0.0, 1.0)
    assert (by["llama"].engine, by["llama"].kind) == ("llama", "plain")
    assert (by["llama:draft:n5"].kind, by["llama:draft:n5"].n_max) == ("draft", 5)
    assert by["llama:draft:best"].best and by["llama:draft:best"].temps == (0.0,)


def test_auto_nanospec_gives_the_draft_model_candidate_its_nanospec_head():
    (c,) = pair.parse_configs("auto:nanospec")
    kw = pair._generator_kwargs(c, "d.gguf", 2, 512)
    assert (kw["draft_kind"], kw["draft_model"], kw["nanospec"]) == ("auto", "d.gguf", True)
    assert pair._generator_kwargs(pair.parse_configs("auto")[0], "d.gguf", 2, 512)["nanospec"] is False  # full head
    with pytest.raises(ValueError, match="unknown option"):
        pair.parse_configs("ngram:nanospec")


def test_draft_ssd_and_nochain_options():
    (c,) = pair.parse_configs("draft:ssd")
    kw = pair._generator_kwargs(c, "d.gguf", 2, 512)
    assert (kw["draft"], kw["ssd"]) == ("d.gguf", True)
    assert "ssd" not in pair._generator_kwargs(pair.parse_configs("draft")[0], "d.gguf", 2, 512)
    (c,) = pair.parse_configs("draft:nochain")
    assert pair._generator_kwargs(c, "d.gguf", 2, 512)["ngram_chain"] == 0
    assert "ngram_chain" not in pair._generator_kwargs(pair.parse_configs("draft")[0], "d.gguf", 2, 512)
    for bad in ("ngram:ssd", "auto:ssd", "ngram:nochain"):
        with pytest.raises(ValueError, match="unknown option"):
            pair.parse_configs(bad)


@pytest.mark.parametrize("bad, why", [
    ("bogus", "unknown pair config"), ("plain:token", "plain takes no options"), ("draft:zz", "unknown option"),
    ("llama:fast", "llama takes :draft"), ("llama:draft:n0", "unknown llama option"),
    ("llama:draft:best:n3", "exclude"), ("ngram@x", "temperatures"), ("draft,draft", "twice"), ("", "no pair"),
])
def test_bad_configs_are_refused(bad, why):
    with pytest.raises(ValueError, match=why):
        pair.parse_configs(bad)


# -- the schedule --------------------------------------------------------------------------------
def test_schedule_blocks_rotation_and_coverage():
    cs = pair.parse_configs("plain,draft,draft:token,ngram@0,llama,llama:draft,llama:draft:n8@0")
    temps, n_prompts, rounds = [0.0, 1.0], 3, 2
    blocks = pair.schedule(cs, n_prompts, rounds, temps)
    # one block per engine per round, their order alternating between rounds
    assert [(b["round"], b["engine"]) for b in blocks] == [(0, "specgen"), (0, "llama"), (1, "llama"), (1, "specgen")]
    for b in blocks:
        jobs = [(t, pi, c.name) for t, pi, c in b["jobs"]]
        want = {(t, pi, c.name) for c in cs if c.engine == b["engine"] for t in temps if c.runs_at(t)
                for pi in range(n_prompts)}
        assert len(jobs) == len(set(jobs)) and set(jobs) == want  # every job once per round
        if b["engine"] == "specgen":
            t0 = [name for t, pi, name in jobs if t == 0.0]
            firsts = [t0[i] for i in range(0, len(t0), 4)]  # 4 configurations run at T=0
            assert len(firsts) == n_prompts and len(set(firsts)) == n_prompts  # another one leads each prompt
        else:
            names = [j[2] for j in jobs]
            starts = [n for i, n in enumerate(names) if i == 0 or names[i - 1] != n]
            assert len(starts) == len(set(starts))  # configuration-major: one server at a time
    ll0 = [c.name for t, pi, c in blocks[1]["jobs"]]
    ll1 = [c.name for t, pi, c in blocks[2]["jobs"]]
    assert ll0[0] != ll1[0]  # server order rotated per round


def test_schedule_without_llama_configs_has_no_llama_block():
    blocks = pair.schedule(pair.parse_configs("plain,draft"), 2, 3, [0.0])
    assert [b["engine"] for b in blocks] == ["specgen"] * 3


# -- the summary ---------------------------------------------------------------------------------
def _run(config, engine, t, prompt, tokens, seconds, tpc=1.0, drafted=0, accepted=0, n_rounds=None):
    n = int(tokens)
    return {"engine": engine, "config": config, "temperature": t, "prompt": prompt, "round": 0,
            "decode_tps": tokens / seconds, "decode_tokens": tokens, "decode_seconds": seconds, "prefill_tps": 100.0,
            "n_generated": n, "n_drafted": drafted, "n_accepted": accepted,
            "n_rounds": n_rounds if n_rounds is not None else round(n / tpc), "tokens_per_call": tpc}


def test_summary_pools_tokens_over_seconds_and_takes_ratios_at_the_same_temperature():
    runs = [_run("plain", "specgen", 0.0, "a", 100, 5.0), _run("plain", "specgen", 0.0, "b", 100, 5.0),
            _run("draft", "specgen", 0.0, "a", 120, 2.0, tpc=3.0, drafted=80, accepted=60),
            _run("draft", "specgen", 0.0, "b", 60, 3.0, tpc=2.0, drafted=40, accepted=20),
            _run("llama", "llama", 0.0, "a", 100, 10.0), _run("llama", "llama", 0.0, "b", 100, 10.0),
            _run("plain", "specgen", 1.0, "a", 100, 4.0)]
    rows = pair.summarise_pair(runs, ["plain", "draft", "llama"])
    by = {(r["config"], r["temperature"]): r for r in rows}
    assert by[("plain", 0.0)]["decode_tps"] == pytest.approx(20.0)
    assert by[("draft", 0.0)]["decode_tps"] == pytest.approx(180 / 5.0)  # pooled, not the mean of 60 and 20
    assert by[("draft", 0.0)]["vs_specgen_plain"] == pytest.approx(36 / 20)
    assert by[("draft", 0.0)]["vs_llama_plain"] == pytest.approx(36 / 10)
    assert by[("plain", 1.0)]["vs_specgen_plain"] == pytest.approx(1.0)  # its own temperature's baseline
    assert by[("plain", 1.0)]["vs_llama_plain"] is None  # no llama run at T=1
    assert by[("draft", 0.0)]["acceptance"] == pytest.approx(80 / 120)
    assert by[("draft", 0.0)]["tokens_per_call"] == pytest.approx(180 / (40 + 30))
    assert by[("draft", 0.0)]["tokens_per_call_mean"] == pytest.approx(2.5)
    assert by[("draft", 0.0)]["tokens_per_call_se"] == pytest.approx(0.5)  # sd 0.707 / sqrt(2)
    assert by[("draft", 0.0)]["per_prompt_tps"] == {"a": pytest.approx(60.0), "b": pytest.approx(20.0)}
    assert [r["config"] for r in rows][:3] == ["plain", "draft", "llama"]


def test_block_vs_token_ratio_and_its_standard_error():
    runs = [_run("draft", "specgen", 1.0, p, 100, 2.0, tpc=x) for p, x in zip("abcd", (4.0, 5.0, 6.0, 5.0))]
    runs += [_run("draft:token", "specgen", 1.0, p, 100, 2.0, tpc=x) for p, x in zip("abcd", (4.0, 4.0, 5.0, 3.0))]
    bt = pair.block_vs_token(pair.summarise_pair(runs))
    assert bt["block"] == pytest.approx(5.0) and bt["token"] == pytest.approx(4.0)
    assert bt["ratio"] == pytest.approx(1.25)
    se_b, se_t = math.sqrt(2 / 3 / 4), math.sqrt(2 / 3 / 4)
    assert bt["ratio_se"] == pytest.approx(1.25 * math.sqrt((se_b / 5) ** 2 + (se_t / 4) ** 2))
    assert pair.block_vs_token(pair.summarise_pair(runs), temperature=0.0) is None


def test_chat_prompt_file_is_checked(tmp_path):
    rows = pair.load_chat_prompts()
    assert len(rows) >= 8 and {r["kind"] for r in rows} == {"write", "edit", "explain"}
    assert all(r["messages"][-1]["role"] == "user" for r in rows)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x", "prompt": "not chat"}\n')
    with pytest.raises(ValueError, match="messages"):
        pair.load_chat_prompts(str(bad))


# -- llama-server as a peer ----------------------------------------------------------------------
FAKE_SERVER = textwrap.dedent('''\
    import json, os, signal, sys, time
    from http.server import BaseHTTPRequestHandler, HTTPServer
    argv = sys.argv[1:]
    if argv == ["--version"]:
        print("version: 1 (fake000)"); sys.exit(0)
    if argv == ["--help"]:
        print("-md,    --spec-draft-model FNAME   draft model\\n--spec-draft-n-max N   number of tokens to draft "
              "for speculative decoding (default: 3)\\n--spec-type [none,draft-simple]"); sys.exit(0)
    log = os.environ["FAKE_LLAMA_LOG"]
    if os.environ.get("FAKE_LLAMA_FAIL"):
        print("error: failed to load model"); sys.exit(1)
    def note(event):
        with open(log, "a") as f:
            f.write(json.dumps({"event": event, "t": time.time(), "argv": argv}) + "\\n")
    def stop(*_):
        note("stop"); os._exit(0)
    signal.signal(signal.SIGTERM, stop)
    port = int(argv[argv.index("--port") + 1])
    draft = "-md" in argv
    n_max = int(argv[argv.index("--spec-draft-n-max") + 1]) if "--spec-draft-n-max" in argv else 3
    class H(BaseHTTPRequestHandler):
        def log_message(self, *a): pass
        def _send(self, obj):
            b = json.dumps(obj).encode()
            self.send_response(200); self.send_header("Content-Length", str(len(b))); self.end_headers(); self.wfile.write(b)
        def do_GET(self):
            self._send({"status": "ok"})
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            assert isinstance(body["prompt"], list) and body["cache_prompt"] is False
            n = body["n_predict"]
            t = {"prompt_n": len(body["prompt"]), "prompt_per_second": 100.0, "predicted_n": n,
                 "predicted_ms": 100.0 * n / (10 + n_max if draft else 10), "predicted_per_second": (10 + n_max if draft else 10) * 10.0}
            if draft:
                t.update(draft_n=n, draft_n_accepted=n // 2)
            self._send({"content": "x" * n, "tokens": list(range(n)), "timings": t, "stop_type": "limit"})
    note("start")
    HTTPServer(("127.0.0.1", port), H).serve_forever()
''')


@pytest.fixture
def fake_server(tmp_path, monkeypatch):
    path = tmp_path / "llama-server"
    path.write_text(f"#!{sys.executable}\n" + FAKE_SERVER)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    log = tmp_path / "events.jsonl"
    monkeypatch.setenv("FAKE_LLAMA_LOG", str(log))

    def events():
        return [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []
    return str(path), events


def test_resolve_server(tmp_path, monkeypatch, fake_server):
    monkeypatch.delenv(peer_server.ENV_SERVER, raising=False)
    with pytest.raises(PeerServerError, match="--peer-server PATH or set SPECGEN_LLAMA_SERVER"):
        peer_server.resolve_server(None)
    with pytest.raises(PeerServerError, match="not an executable file"):
        peer_server.resolve_server(str(tmp_path / "missing"))
    plain = tmp_path / "not-executable"
    plain.write_text("")
    with pytest.raises(PeerServerError, match="not an executable file"):
        peer_server.resolve_server(str(plain))
    monkeypatch.setenv(peer_server.ENV_SERVER, fake_server[0])
    assert peer_server.resolve_server(None) == fake_server[0]
    help_text = peer_server.server_help(fake_server[0])
    assert peer_server.draft_n_max_flag(help_text) == "--spec-draft-n-max"
    assert peer_server.default_draft_n_max(help_text) == 3
    assert peer_server.server_version(fake_server[0]) == "version: 1 (fake000)"
    with pytest.raises(PeerServerError, match="neither"):
        peer_server.draft_n_max_flag("--draft-n N")


def test_server_starts_serves_and_stops(fake_server):
    binary, events = fake_server
    cfg = ServerConfig(model="t.gguf", threads=2, draft="d.gguf", n_max=5)
    with LlamaServer(binary, cfg, peer_server.server_help(binary)) as s:
        out = s.complete([1, 2, 3], 16, 0.0, seed=1)
        assert out["timings"]["predicted_n"] == 16 and out["timings"]["draft_n_accepted"] == 8
        pid = s.proc.pid
    assert s.proc.poll() is not None  # stopped on exit
    ev = events()
    assert [e["event"] for e in ev] == ["start", "stop"]
    argv = ev[0]["argv"]
    assert argv[argv.index("--host") + 1] == "127.0.0.1"
    assert argv[argv.index("--spec-type") + 1] == "draft-simple"  # without it llama-server never drafts
    assert argv[argv.index("--spec-draft-n-max") + 1] == "5" and argv[argv.index("-md") + 1] == "d.gguf"
    assert pid > 0


def test_server_that_dies_while_starting_is_one_clear_error(fake_server, monkeypatch):
    monkeypatch.setenv("FAKE_LLAMA_FAIL", "1")
    with pytest.raises(PeerServerError, match="exited with 1 while starting: error: failed to load model"):
        LlamaServer(fake_server[0], ServerConfig(model="t.gguf", threads=1))


# -- a whole run: tiny model, stand-in llama-server ----------------------------------------------
def test_pair_run_interleaves_and_never_overlaps_the_engines(tmp_path, fake_server):
    binary, events = fake_server
    model = tiny_model().write(str(tmp_path / "tiny.gguf"))
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps({"id": f"p{i}", "kind": "write", "messages": [{"role": "user", "content": w}]}) + "\n"
                               for i, w in enumerate(["the cat", "a hat is on"])))
    res = pair.run_pair(model, model, configs="plain,draft,draft:token,ngram@0,auto,llama,llama:draft,llama:draft:best@0",
                        prompts=str(prompts), max_tokens=4, temperatures=(0.0, 1.0), threads=1, rounds=2, n_ctx=256,
                        peer_server=binary, peer_sweep=[2, 5], sweep_prompts=1, sweep_tokens=4, extras=False,
                        progress=False, command="test")
    # the sweep picked n-max 5 (the fake decodes faster with a longer draft); it is not the default 3
    assert res["sweep"]["best"] == 5 and "llama:draft:n5 (best)" in res["meta"]["configs"]
    rows = {(r["config"], r["temperature"]): r for r in res["rows"]}
    assert ("ngram", 1.0) not in rows and ("ngram", 0.0) in rows and ("llama:draft:n5 (best)", 1.0) not in rows
    assert rows[("llama:draft", 0.0)]["vs_llama_plain"] == pytest.approx(1.3)
    assert rows[("llama:draft:n5 (best)", 0.0)]["vs_llama_plain"] == pytest.approx(1.5)
    assert rows[("plain", 0.0)]["vs_specgen_plain"] == pytest.approx(1.0)
    assert all(r["n_runs"] == 4 for r in res["rows"])  # 2 prompts x 2 rounds
    assert len(res["blocks"]) == 4 and all("other_cores" in b for b in res["blocks"])
    assert any(n.lower().startswith("auto: auto with") for n in res["notes"])  # with the draft model, or WITHOUT and why
    # every llama-server was started and stopped inside a llama block: none alive during a specgen run
    ev = events()
    spans, open_at = [], None
    for e in ev:
        if e["event"] == "start":
            open_at = e["t"]
        else:
            spans.append((open_at, e["t"]))
    assert len(spans) == 2 + 2 * 3  # the sweep (2), then per round: plain, draft, best (T=0 only, still a server)
    for r in res["runs"]:
        if r["engine"] == "specgen":
            assert not any(a < r["t_start"] < b or a < r["t_end"] < b for a, b in spans)
    md = pair.markdown(res)
    assert "| draft:token | 1 |" in md and "n-max sweep" in md and "CPU load per block" in md


# -- the command line ----------------------------------------------------------------------------
def test_cli_pair_preset_fails_in_one_line(tmp_path, monkeypatch, capsys):
    from specgen.bench import cli

    assert cli.main(["--preset", "pair", "-c", "plain,bogus"]) == 2
    assert "unknown pair config 'bogus'" in capsys.readouterr().err
    monkeypatch.setenv("SPECGEN_CACHE", str(tmp_path / "empty-cache"))  # the pair is not fetched there
    assert cli.main(["--preset", "pair", "-q"]) == 1
    err = capsys.readouterr().err.strip()
    assert "python -m specgen.bench.models fetch qwen2.5-coder-pair" in err and "\n" not in err
    monkeypatch.delenv(peer_server.ENV_SERVER, raising=False)
    model = tiny_model().write(str(tmp_path / "tiny.gguf"))
    assert cli.main(["--preset", "pair", "-q", "-m", model, "-md", model]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("specgen bench: error: no llama-server: pass --peer-server PATH") and "\n" not in err
