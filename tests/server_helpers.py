"""Starting `specgen serve` for the server tests: the CLI binary of the package under test (as
test_cli.py finds it), a free loopback port, and a wait for /health."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Optional

import pytest

import specgen

REPO = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"


def missing(reason: str):
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI is set: the test extra must provide it)")
    pytest.skip(reason)


def cli_binary() -> str:
    env = os.environ.get("SPECGEN_CLI")
    if env:
        return env
    dev = REPO / "build" / "dev" / "specgen"
    in_checkout = Path(specgen.__file__).resolve().is_relative_to(REPO / "python")
    if in_checkout and dev.is_file():
        return str(dev)
    found = shutil.which("specgen")
    if found:
        return found
    if dev.is_file():
        return str(dev)
    missing("the specgen binary is neither on PATH nor built in build/dev (run tools/dev_build.sh)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def child_env() -> dict:
    env = dict(os.environ)
    env["SPECGEN_PYTHON"] = sys.executable  # `specgen serve` runs this Python's specgen.server
    pkg_root = str(Path(specgen.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = pkg_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


class Server:
    """`specgen serve` on a free loopback port; .url is its base URL, .proc the process."""

    def __init__(self, model: str, *flags: str, startup_timeout: float = 120.0) -> None:
        self.port = free_port()
        self.url = f"http://{HOST}:{self.port}"
        args = [cli_binary(), "serve", "-m", model, "--host", HOST, "--port", str(self.port), *flags]
        self.proc = subprocess.Popen(args, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self._wait(startup_timeout)

    def _wait(self, timeout: float) -> None:
        import httpx

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                out = self.proc.stdout.read()
                raise RuntimeError(f"specgen serve exited with {self.proc.returncode}:\n{out}")
            try:
                if httpx.get(self.url + "/health", timeout=1.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError("specgen serve did not answer /health in time")

    def stop(self) -> str:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.stdout.read() if self.proc.stdout else ""


def scrape(url: str) -> dict:
    """/metrics as {(name, frozenset(labels)): value} (Prometheus text format)."""
    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    out = {}
    for fam in text_string_to_metric_families(httpx.get(url + "/metrics", timeout=10).text):
        for s in fam.samples:
            labels = {k: v for k, v in s.labels.items() if k != "model_name"}
            out[(s.name, frozenset(labels.items()))] = s.value
    return out


def metric(m: dict, name: str, **labels) -> float:
    return m.get((name, frozenset(labels.items())), 0.0)
