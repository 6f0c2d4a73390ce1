"""Building the tests/c programs against the public C API: specgen.h and libspecgen found through
specgen.paths (the installed wheel's specgen/include and specgen/lib, or cpp/include and build/dev in a
checkout). A missing header, library or compiler skips locally and fails in CI (the wheel must ship
them)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Tuple

from server_helpers import missing
from specgen import paths

C_DIR = Path(__file__).resolve().parent / "c"


def api_dirs() -> Tuple[str, str]:
    try:
        return paths.include_dir(), paths.lib_dir()
    except FileNotFoundError as e:
        missing(str(e))


def compiler() -> str:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        missing("no C compiler (cc) on PATH")
    return cc


def build(source: str, exe: Path, *libs: str) -> str:
    """tests/c/<source> compiled warning-free (C99) and linked with libspecgen (+ libs); returns the path."""
    inc, lib = api_dirs()
    cmd = [compiler(), "-std=c99", "-Wall", "-Wextra", "-pedantic", "-Werror", "-O1", str(C_DIR / source),
           "-I", inc, "-L", lib, "-lspecgen", f"-Wl,-rpath,{lib}", *libs, "-o", str(exe)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, f"{' '.join(cmd)}\n{r.stderr}"
    return str(exe)


def loader_env() -> dict:
    """The environment with libspecgen's folder on the dynamic loader's path."""
    env = dict(os.environ)
    var = "DYLD_LIBRARY_PATH" if sys.platform == "darwin" else "LD_LIBRARY_PATH"
    lib = api_dirs()[1]
    env[var] = lib + (os.pathsep + env[var] if env.get(var) else "")
    return env
