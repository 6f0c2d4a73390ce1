"""llama-server as a benchmark peer: a process started and stopped inside its block of an interleaved
run (specgen.bench.pair), never alive beside specgen's block (docs/bench/pair-2026-12-03.md: with
llama-server processes alive, specgen decoded 8-15% slower in an earlier run).

The binary is the user's: ``--peer-server PATH`` or $SPECGEN_LLAMA_SERVER. specgen never builds,
downloads or ships llama.cpp. The server listens on 127.0.0.1 at a port the kernel picked free;
prompts go to its native ``/completion`` endpoint as token ids (the same ids specgen decodes from), with
the prompt cache off, and its ``timings`` (prompt and predicted tokens/s, drafted and accepted tokens)
come back as they are.
"""
from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from specgen.errors import SpecgenError

__all__ = ["PeerServerError", "ServerConfig", "LlamaServer", "resolve_server", "server_version", "server_help",
           "draft_n_max_flag", "default_draft_n_max", "free_port"]

ENV_SERVER = "SPECGEN_LLAMA_SERVER"


class PeerServerError(SpecgenError):
    """llama-server is not given, cannot start, or failed a request."""


def resolve_server(path: Optional[str] = None) -> str:
    """The llama-server executable: ``path``, else $SPECGEN_LLAMA_SERVER. PeerServerError when neither
    names an executable file."""
    given = path or os.environ.get(ENV_SERVER)
    if not given:
        raise PeerServerError(f"no llama-server: pass --peer-server PATH or set {ENV_SERVER} "
                              "(a llama-server binary you built; specgen does not build llama.cpp)")
    found = shutil.which(given) if os.sep not in given else given
    if not found or not os.path.isfile(found) or not os.access(found, os.X_OK):
        raise PeerServerError(f"llama-server {given!r} is not an executable file")
    return os.path.abspath(found)


def server_version(binary: str) -> str:
    """``llama-server --version``'s version line, e.g. "version: 1 (0c1e570)" ("?" if it says nothing)."""
    try:
        r = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise PeerServerError(f"{binary} --version failed: {e}") from None
    for line in (r.stdout + r.stderr).splitlines():
        if line.startswith("version:"):
            return line.strip()
    return "?"


def server_help(binary: str) -> str:
    try:
        r = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise PeerServerError(f"{binary} --help failed: {e}") from None
    return r.stdout + r.stderr


def draft_n_max_flag(help_text: str) -> str:
    """The name of the draft-length flag in this build (``--spec-draft-n-max`` in recent llama.cpp,
    ``--draft-max`` before)."""
    for flag in ("--spec-draft-n-max", "--draft-max"):
        if re.search(rf"(^|[\s,]){re.escape(flag)}([\s,]|$)", help_text, re.M):
            return flag
    raise PeerServerError("this llama-server has neither --spec-draft-n-max nor --draft-max")


def default_draft_n_max(help_text: str) -> Optional[int]:
    """The draft length llama-server uses when none is given, from its --help ("default: N")."""
    flag = draft_n_max_flag(help_text)
    lines = help_text.splitlines()
    for i, line in enumerate(lines):
        if re.search(rf"(^|[\s,]){re.escape(flag)}([\s,]|$)", line):
            m = re.search(r"default:\s*(\d+)", " ".join(lines[i:i + 2]))
            return int(m.group(1)) if m else None
    return None


def free_port() -> int:
    """A port on 127.0.0.1 that was free a moment ago (the kernel's pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class ServerConfig:
    """One llama-server process: the target, optionally a draft model with ``--spec-type draft-simple``
    (without it llama-server loads the draft and never drafts) at ``n_max`` (None: its default)."""

    model: str
    threads: int
    n_ctx: int = 4096
    draft: Optional[str] = None
    n_max: Optional[int] = None
    extra: List[str] = field(default_factory=list)

    def argv(self, binary: str, port: int, help_text: str = "") -> List[str]:
        a = [binary, "-m", self.model, "-t", str(self.threads), "-tb", str(self.threads), "-c", str(self.n_ctx),
             "-np", "1", "--host", "127.0.0.1", "--port", str(port), "--no-webui"]
        if self.draft:
            a += ["-md", self.draft, "--spec-type", "draft-simple", "-td", str(self.threads)]
            if self.n_max is not None:
                a += [draft_n_max_flag(help_text) if help_text else "--spec-draft-n-max", str(self.n_max)]
        return a + list(self.extra)


class LlamaServer:
    """A running llama-server (a context manager: stopped on exit, killed if it does not stop)."""

    def __init__(self, binary: str, config: ServerConfig, help_text: str = "", start_timeout: float = 300.0):
        self.binary, self.config = binary, config
        self.port = free_port()
        self._log = tempfile.NamedTemporaryFile(prefix="specgen-llama-server-", suffix=".log", delete=False)
        self.argv = config.argv(binary, self.port, help_text)
        try:
            self.proc = subprocess.Popen(self.argv, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        except OSError as e:
            self._log.close()
            raise PeerServerError(f"cannot start {binary}: {e}") from None
        try:
            self._wait_ready(start_timeout)
        except BaseException:
            self.stop()
            raise

    # -- lifetime ---------------------------------------------------------------------------------
    def log_tail(self, n: int = 5) -> str:
        try:
            lines = Path(self._log.name).read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return " | ".join(lines[-n:])

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise PeerServerError(f"llama-server exited with {self.proc.returncode} while starting: {self.log_tail()}")
            try:
                status, _ = self._request("GET", "/health", None, timeout=5)
                if status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise PeerServerError(f"llama-server was not ready after {timeout:.0f} s: {self.log_tail()}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=20)
        self._log.close()
        try:
            os.unlink(self._log.name)
        except OSError:
            pass

    def __enter__(self) -> "LlamaServer":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- requests ---------------------------------------------------------------------------------
    def _request(self, method: str, path: str, body: Optional[Dict[str, Any]], timeout: float):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            payload = None if body is None else json.dumps(body)
            conn.request(method, path, body=payload, headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            return r.status, r.read()
        finally:
            conn.close()

    def complete(self, token_ids: Sequence[int], n_predict: int, temperature: float, seed: int,
                 top_k: int = 40, top_p: float = 0.95, min_p: float = 0.05, timeout: float = 900.0) -> Dict[str, Any]:
        """One generation from ``token_ids`` (prompt cache off); returns {"tokens", "text", "timings",
        "stop_type"}. ``temperature`` 0 is greedy; the other samplers are specgen's defaults."""
        body = {"prompt": list(map(int, token_ids)), "n_predict": int(n_predict), "temperature": float(temperature),
                "top_k": top_k, "top_p": top_p, "min_p": min_p, "repeat_penalty": 1.0, "seed": int(seed),
                "cache_prompt": False, "stream": False, "return_tokens": True}
        try:
            status, raw = self._request("POST", "/completion", body, timeout)
        except OSError as e:
            raise PeerServerError(f"llama-server request failed: {e}; {self.log_tail()}") from None
        if status != 200:
            raise PeerServerError(f"llama-server answered {status}: {raw[:300]!r}")
        out = json.loads(raw)
        return {"tokens": out.get("tokens") or [], "text": out.get("content", ""), "timings": out.get("timings") or {},
                "stop_type": out.get("stop_type")}
