"""A fake Hugging Face Hub at the HTTP layer, for tests of the code a user runs online.

huggingface_hub (1.0 on) sends every request through one httpx client (httpx2 in 2.x); ``install``
gives every client of that library a MockTransport that answers the Hub's routes from local files:
the repo tree listing (list_repo_files), and HEAD / GET of ``/<repo>/resolve/<rev>/<file>``
(hf_hub_download). Everything else is a 404, so nothing leaves the machine. huggingface_hub itself is
not touched: the resolution code runs exactly as for a user, lazily loaded submodules included.

``install_from_env()`` does the same in a child process (a sitecustomize on its PYTHONPATH) from
$SPECGEN_FAKE_HUB: JSON {"org/repo": {"file name": "/local/path"}}.
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import json
import os
from pathlib import Path
from typing import Dict, List, Union

COMMIT = "89abcdef0123456789abcdef0123456789abcdef"
ENV = "SPECGEN_FAKE_HUB"


def http_module_name() -> str:
    """The httpx-like module huggingface_hub's HTTP layer uses, read from its source without importing it
    (importing huggingface_hub's submodules here would hide the lazy-loading a user meets)."""
    spec = importlib.util.find_spec("huggingface_hub")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("huggingface_hub is not installed")
    source = (Path(list(spec.submodule_search_locations)[0]) / "utils" / "_http.py").read_text()
    for name in ("httpx2", "httpx"):
        if f"import {name}\n" in source:
            return name
    raise RuntimeError("this huggingface_hub sends requests without httpx (before 1.0); the fake Hub needs httpx")


class FakeHub:
    """Repos of files served from local paths (or bytes); ``requests`` logs "METHOD path" of each call."""

    def __init__(self, repos: Dict[str, Dict[str, Union[str, bytes, Path]]]) -> None:
        self.repos = repos
        self.requests: List[str] = []

    def _data(self, repo: str, name: str):
        item = self.repos[repo][name]
        return item if isinstance(item, bytes) else Path(item)

    def _size(self, data) -> int:
        return len(data) if isinstance(data, bytes) else data.stat().st_size

    def _etag(self, data) -> str:
        if isinstance(data, bytes):
            return hashlib.sha256(data).hexdigest()
        st = data.stat()  # a stand-in for the sha256: unique per file, cheap for a 250 MB model
        return hashlib.sha256(f"{data.resolve()}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()

    def handler(self, request):
        http = importlib.import_module(http_module_name())
        path = request.url.path
        self.requests.append(f"{request.method} {path}")
        for repo, files in self.repos.items():
            if path.startswith(f"/api/models/{repo}/tree/"):
                listing = [{"type": "file", "path": n, "size": self._size(self._data(repo, n)),
                            "oid": self._etag(self._data(repo, n))[:40]} for n in files]
                return http.Response(200, json=listing)
            prefix = f"/{repo}/resolve/"
            if path.startswith(prefix):
                name = path[len(prefix):].split("/", 1)[1]
                if name not in files:
                    return http.Response(404, headers={"X-Error-Code": "EntryNotFound"},
                                         json={"error": f"{name} does not exist"})
                data = self._data(repo, name)
                headers = {"X-Repo-Commit": COMMIT, "ETag": f'"{self._etag(data)}"',
                           "Content-Length": str(self._size(data))}
                if request.method == "HEAD":
                    return http.Response(200, headers=headers)
                body = data if isinstance(data, bytes) else _chunks(data)
                return http.Response(200, headers=headers, content=body)
        if path.startswith("/api/models/"):
            return http.Response(404, headers={"X-Error-Code": "RepoNotFound"},
                                 json={"error": "Repository not found"})
        return http.Response(404, json={"error": "not found"})


def _chunks(path: Path):
    with open(path, "rb") as f:
        while True:
            block = f.read(1 << 20)
            if not block:
                return
            yield block


def install(hub: FakeHub):
    """Every client of huggingface_hub's HTTP module answers from ``hub``; returns an undo function."""
    http = importlib.import_module(http_module_name())
    original = http.Client.__init__

    def init(self, *args, **kwargs):
        kwargs["transport"] = http.MockTransport(hub.handler)
        original(self, *args, **kwargs)

    http.Client.__init__ = init

    def undo():
        http.Client.__init__ = original

    return undo


def online_mode(monkeypatch) -> None:
    """Online mode in this process: huggingface_hub froze HF_HUB_OFFLINE when an earlier test imported it with
    the variable set, so its flag is reset too (a user's process reads the variable once, as it is)."""
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(importlib.import_module("huggingface_hub.constants"), "HF_HUB_OFFLINE", False)


@contextlib.contextmanager
def serving(hub: FakeHub):
    """``hub`` answers huggingface_hub in this process inside the block (the shared client is made again
    on both sides, so no client outlives its transport)."""
    import huggingface_hub

    undo = install(hub)
    huggingface_hub.close_session()
    try:
        yield hub
    finally:
        undo()
        huggingface_hub.close_session()


def install_from_env() -> None:
    spec = os.environ.get(ENV)
    if spec:
        install(FakeHub(json.loads(spec)))


def sitecustomize_dir(root: Path) -> Path:
    """A folder to put first on a child's PYTHONPATH: its sitecustomize installs the fake Hub."""
    d = root / "fake-hub-site"
    d.mkdir(exist_ok=True)
    here = Path(__file__).resolve().parent
    (d / "sitecustomize.py").write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(here)!r})\n"
        "import fake_hub\n"
        "fake_hub.install_from_env()\n")
    return d
