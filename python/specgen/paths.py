"""Where the C API lives, for programs compiled against it (like ``nanobind.cmake_dir()``).

    cc app.c -I"$(python -c 'import specgen.paths as p; print(p.include_dir())')" \\
             -L"$(python -c 'import specgen.paths as p; print(p.lib_dir())')" -lspecgen

At run time the loader must find libspecgen too: add ``-Wl,-rpath,<lib_dir>`` when linking, or set
LD_LIBRARY_PATH (DYLD_LIBRARY_PATH on macOS).

An installed wheel ships the header in ``specgen/include/specgen/specgen.h`` and the library in
``specgen/lib``. In a source checkout built with tools/dev_build.sh they are ``cpp/include`` and
``build/dev``.
"""
from __future__ import annotations

from pathlib import Path
from typing import List

__all__ = ["include_dir", "lib_dir", "library_names"]

_PKG = Path(__file__).resolve().parent
_REPO = _PKG.parent.parent  # python/specgen -> the repository root in a source checkout


def library_names() -> List[str]:
    """File names the shared library may have on this platform, most specific last."""
    return ["libspecgen.so", "libspecgen.so.0", "libspecgen.dylib", "specgen.dll"]


def _has_library(d: Path) -> bool:
    return any((d / name).is_file() for name in library_names())


def include_dir() -> str:
    """The directory to pass with -I: it holds ``specgen/specgen.h``.
    Raises FileNotFoundError when neither an installed nor a source-checkout header exists."""
    for d in (_PKG / "include", _REPO / "cpp" / "include"):
        if (d / "specgen" / "specgen.h").is_file():
            return str(d)
    raise FileNotFoundError("specgen/specgen.h not found: specgen is neither installed from a wheel nor built in a checkout")


def lib_dir() -> str:
    """The directory to pass with -L (and to the run-time loader): it holds libspecgen.
    Raises FileNotFoundError when the library is not installed or built (tools/dev_build.sh)."""
    for d in (_PKG / "lib", _REPO / "build" / "dev"):
        if _has_library(d):
            return str(d)
    raise FileNotFoundError("libspecgen not found: install the specgen wheel or run tools/dev_build.sh")
