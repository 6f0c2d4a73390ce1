"""The one parameter table (cpp/src/engine/params.cpp) and the meanings every front-end shares:
0 / None = automatic threads, -1 / None = a random seed, draft as a kind plus a path, one version,
and validation messages that come from the table (the same text in Python and the CLI)."""
import re
import subprocess
from pathlib import Path

import pytest

import specgen
from specgen import _core
from specgen.errors import InvalidParameterError, ModelLoadError

import c_programs

ROOT = Path(__file__).resolve().parent.parent


def specs():
    return {s["name"]: s for s in _core.param_specs()}


def test_table_defaults_are_the_struct_defaults():
    gp, rp, sp = _core.GeneratorParams(), _core.GenerateParams(), _core.SamplingParams()
    for name, s in specs().items():
        if s["type"] in ("integer", "number") and name != "seed":
            obj = gp if s["scope"] == "generator" else (rp if hasattr(rp, name) else sp)
            assert float(getattr(obj, name)) == pytest.approx(float(s["default"])), name
        elif s["type"] == "flag":
            obj = gp if s["scope"] == "generator" else rp
            assert getattr(obj, name) == (s["default"] == "true"), name
        elif s["type"] == "toggle":
            assert s["choices"] == ["off", "on", "auto"], name
            assert getattr(gp, name) == getattr(_core.Toggle, s["default"]), name
        assert s["doc"], name


def test_every_table_knob_is_a_python_keyword():
    import inspect

    keywords = set(inspect.signature(specgen.Generator.__init__).parameters) | set(
        inspect.signature(specgen.Generator.generate).parameters)
    missing = [n for n in specs() if n not in keywords]
    assert missing == [], missing
    for name in ("repeat_last_n", "ignore_eos", "add_bos"):
        assert name in keywords


def test_python_messages_are_the_tables(model_path):
    with pytest.raises(InvalidParameterError) as e:
        specgen.Generator(model_path, n_ctx=0)
    assert str(e.value) == "n_ctx must be in [1, 1048576], got 0"
    with pytest.raises(InvalidParameterError) as e:
        specgen.Generator(model_path, draft="self", ssd_fanout=65)
    assert str(e.value) == "ssd_fanout must be in [1, 64], got 65"


def test_cli_messages_are_the_tables(cli):
    r = subprocess.run([cli, "-c", "0"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.strip() == "specgen: error: -c must be in [1, 1048576], got 0"
    r = subprocess.run([cli, "--ssd-fanout", "65"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--ssd-fanout must be in [1, 64], got 65" in r.stderr


def test_zero_threads_is_automatic_everywhere(model_path, cli):
    with specgen.Generator(model_path, n_ctx=64) as auto, specgen.Generator(model_path, n_ctx=64, n_threads=0) as zero:
        assert auto.n_threads == zero.n_threads >= 1
    r = subprocess.run([cli, "-m", str(model_path), "-p", "Hi", "-n", "1", "--temp", "0", "-t", "0"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert re.search(r"threads [1-9]", r.stderr)


def test_minus_one_seed_is_random_everywhere(gen, cli, model_path):
    seeds = {gen.generate("Hi", max_tokens=1, seed=-1).stats.seed for _ in range(3)}
    assert len(seeds) == 3 and all(0 <= s < 2**63 for s in seeds)
    r = gen.generate("Hi", max_tokens=1, seed=5)
    assert r.stats.seed == 5 and r.stats["seed"] == 5
    out = [subprocess.run([cli, "-m", str(model_path), "-p", "Hi", "-n", "1", "-t", "1", "-s", "-1"],
                          capture_output=True, text=True, timeout=120) for _ in range(2)]
    drawn = [re.search(r"seed = (\d+)", o.stderr).group(1) for o in out]
    assert drawn[0] != drawn[1]


def test_one_version():
    cmake = (ROOT / "CMakeLists.txt").read_text()
    version = re.search(r"project\(specgen VERSION ([0-9.]+)", cmake).group(1)
    assert specgen.__version__ == _core.version() == version
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert not re.search(r'^version\s*=', pyproject, re.M), "pyproject.toml takes the version from CMakeLists.txt"
    for src in ("cpp/tools/main.cpp", "cpp/src/api/specgen_api.cpp", "python/specgen/__init__.py"):
        assert version not in (ROOT / src).read_text(), src


def test_draft_kind_and_model(model_path):
    with specgen.Generator(model_path, n_ctx=64, n_threads=1, draft_kind="ngram") as g:
        assert g.draft_kind == "ngram"
        assert g.generate("a b a b a b", max_tokens=4, temperature=0).stats.n_rounds > 0
    with specgen.Generator(model_path, n_ctx=64, n_threads=1, draft_kind="model", draft_model=str(model_path)) as g:
        assert g.draft_kind == "model" and g.generate("Hi", max_tokens=2, temperature=0).stats.n_rounds > 0
    with specgen.Generator(model_path, n_ctx=64, n_threads=1, draft=str(model_path)) as g:  # the older form
        assert g.draft_kind == "model"
    with pytest.raises(InvalidParameterError, match="none, ngram, self, model"):
        specgen.Generator(model_path, draft_kind="eagle")
    with pytest.raises(InvalidParameterError, match="draft_model"):
        specgen.Generator(model_path, draft_kind="model")
    with pytest.raises(InvalidParameterError, match="either draft or draft_kind"):
        specgen.Generator(model_path, draft="self", draft_kind="self")


def test_unknown_draft_word_names_the_kinds(model_path, tmp_path):
    with pytest.raises(InvalidParameterError) as e:
        specgen.Generator(model_path, draft="foo")
    assert "ngram" in str(e.value) and "self" in str(e.value) and "'foo'" in str(e.value)
    with pytest.raises(ModelLoadError) as e:
        specgen.Generator(model_path, draft=str(tmp_path / "nope.gguf"))
    assert "not found" in str(e.value) and "ngram" in str(e.value)


def test_device_parsed_once():
    for bad in ("gpu", "cuda:", "cuda:x", "cuda:12345"):
        with pytest.raises(InvalidParameterError, match="'cpu', 'cuda' or 'cuda:N'"):
            _core.parse_device(bad)
    _core.parse_device("cpu")
    _core.parse_device("cuda:3")


def test_new_generate_knobs(gen):
    # add_bos=False: the prompt is one token shorter on a model that adds BOS.
    with_bos = gen.generate("Hi there", max_tokens=1, temperature=0).stats.n_prompt_tokens
    without = gen.generate("Hi there", max_tokens=1, temperature=0, add_bos=False).stats.n_prompt_tokens
    assert without == with_bos - 1
    for name, bad in (("repeat_last_n", -2), ("ignore_eos", 1), ("add_bos", "yes")):
        with pytest.raises(InvalidParameterError, match=name):
            gen.generate("Hi", max_tokens=1, **{name: bad})
    # repeat_last_n changes what the penalty sees: 0 turns it off, so it equals repeat_penalty=1.
    base = gen.generate("a a a a a a a a", max_tokens=6, temperature=0).tokens
    off = gen.generate("a a a a a a a a", max_tokens=6, temperature=0, repeat_penalty=5.0, repeat_last_n=0).tokens
    on = gen.generate("a a a a a a a a", max_tokens=6, temperature=0, repeat_penalty=5.0, repeat_last_n=-1).tokens
    assert off == base and on != base



def test_constructor_seed(model_path):
    with specgen.Generator(model_path, n_ctx=64, n_threads=1, seed=-1) as g:
        assert len({g.generate("Hi", max_tokens=1).stats.seed for _ in range(3)}) == 3  # fresh per call
    with specgen.Generator(model_path, n_ctx=64, n_threads=1, seed=5) as g:
        assert [g.generate("Hi", max_tokens=1).stats.seed for _ in range(2)] == [5, 5]
        assert g.generate("Hi", max_tokens=1, seed=6).stats.seed == 6
    with pytest.raises(InvalidParameterError, match="seed"):
        specgen.Generator(model_path, n_ctx=64, seed=-2)


def test_nanospec_is_a_toggle_everywhere(model_path, cli):
    """nanospec is True / "on", False / "off", or the default "auto": on for a draft model's head (S has ids),
    off for the self drafter's. The CLI spells it --nanospec [on|off|auto] and --no-nanospec."""
    def set_size(**kw):
        with specgen.Generator(model_path, n_ctx=128, n_threads=2, **kw) as g:
            return g.generate("The capital of France is", max_tokens=4, temperature=0).stats.vocab_set_size

    assert set_size(draft=model_path) > 0  # auto, with the model as its own draft model
    assert set_size(draft=model_path, nanospec=False) == 0 == set_size(draft=model_path, nanospec="off")
    assert set_size(draft="self") == 0 == set_size(draft="self", nanospec="auto")
    assert set_size(draft="self", nanospec="on") == set_size(draft="self", nanospec=True) > 0
    with pytest.raises(InvalidParameterError, match="'off', 'on' or 'auto'"):
        specgen.Generator(model_path, draft="self", nanospec="maybe")
    with pytest.raises(InvalidParameterError, match="nanospec/frspec choose a draft LM head"):
        specgen.Generator(model_path, nanospec=True)  # asked for, with nothing to cut: an error; auto never is

    def described(*args):
        r = subprocess.run([cli, "-m", str(model_path), "-p", "Hi", "-n", "1", "--temp", "0", "-t", "1", *args],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        return re.search(r"speculation: (.*)", r.stderr).group(1)

    assert ", nanospec (auto)" in described("-md", str(model_path))
    for off in (["--no-nanospec"], ["--nanospec", "off"], ["--nanospec=off"]):
        assert "nanospec" not in described("-md", str(model_path), *off), off
    assert "nanospec" not in described("--draft", "self")
    assert described("--draft", "self", "--nanospec").endswith(", nanospec")
    assert described("--draft", "self", "--nanospec") == described("--draft", "self", "--nanospec", "on")

    # The Python front-ends' flags (serve, chat) from the same table: a toggle and a plain flag.
    import argparse

    from specgen import flags

    parser = argparse.ArgumentParser()
    flags.add_engine_flags(parser)
    for argv, nanospec, ssd in ((["--nanospec"], "on", None), (["--nanospec", "auto"], "auto", None),
                                (["--no-nanospec", "--ssd"], "off", True), (["--no-ssd"], None, False)):
        ns = parser.parse_args(argv)
        assert (ns.nanospec, ns.ssd) == (nanospec, ssd), argv


def test_c_api_shares_the_table(model_path, tmp_path):
    exe = c_programs.build("params.c", tmp_path / "params")
    r = subprocess.run([exe, str(model_path)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "ALL CHECKS PASSED" in r.stderr, r.stderr
    assert f"version={specgen.__version__}" in r.stdout
