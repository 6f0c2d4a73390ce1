"""`specgen bench` as a new user meets it: every bad input is one line `specgen bench: error: ...`
and a non-zero exit before anything runs (no traceback), through `python -m specgen.bench` and the
native `specgen bench`; --plot without matplotlib fails before the run, --markdown never needs it;
the presets are option sets of the one grammar."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import specgen
from specgen.bench import cli as bench_cli
from specgen.bench import grammar, presets


def _env(extra_path=None):
    """The environment of a child that imports the specgen this test imported (the checkout's
    python/ in a dev build, site-packages when installed)."""
    env = dict(os.environ)
    parts = ([str(extra_path)] if extra_path else []) + [str(Path(specgen.__file__).resolve().parent.parent)] + (
        [env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    env["PYTHONPATH"] = os.pathsep.join(parts)
    env["SPECGEN_PYTHON"] = sys.executable
    return env


def bench(*args, env=None, timeout=300):
    return subprocess.run([sys.executable, "-m", "specgen.bench", *args], capture_output=True, text=True,
                          env=env or _env(), timeout=timeout)


def assert_one_line_error(r, code, contains):
    assert r.returncode == code, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("specgen bench: error: ") and contains in lines[0], lines[0]
    assert "Traceback" not in r.stderr


@pytest.fixture
def no_matplotlib(tmp_path):
    """A PYTHONPATH entry whose sitecustomize makes `import matplotlib` fail, as without the extra."""
    d = tmp_path / "block"
    d.mkdir()
    (d / "sitecustomize.py").write_text(
        "import sys\n"
        "class _Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'matplotlib' or name.startswith('matplotlib.'):\n"
        "            raise ModuleNotFoundError(\"No module named 'matplotlib'\")\n"
        "        return None\n"
        "sys.meta_path.insert(0, _Block())\n")
    return d


def one_prompt(tmp_path):
    f = tmp_path / "one.jsonl"
    f.write_text(json.dumps({"id": "a", "prompt": "one two three one two three"}) + "\n")
    return str(f)


@pytest.mark.parametrize("args,code,contains", [
    (["-c", "foo"], 2, "unknown configuration 'foo'"),
    (["-p", "nosuchset"], 2, "nosuchset"),
    (["-m", "notagguf.gguf"], 1, "notagguf.gguf"),
    (["--bogus"], 2, "unrecognized arguments"),
    (["--draft-max", "0"], 2, "--draft-max"),
    (["--preset", "nope"], 2, "--preset"),
    (["-c", "ar,head:ns"], 2, "configuration head:ns:block drafts with an EAGLE-3 head: give --draft-head FILE"),
    (["-c", "head", "--draft-head", "no/such/head.gguf"], 2, "--draft-head no/such/head.gguf: no such file"),
])
def test_bad_input_is_one_line(args, code, contains):
    assert_one_line_error(bench(*args, "--no-peer", "-q"), code, contains)


def test_bad_input_through_native_cli(cli):
    r = subprocess.run([cli, "bench", "-c", "foo"], capture_output=True, text=True, env=_env(), timeout=120)
    assert_one_line_error(r, 2, "unknown configuration")


def test_plot_without_matplotlib_fails_before_the_run(no_matplotlib, tmp_path, model_path):
    md = tmp_path / "b.md"
    r = bench("-m", str(model_path), "-c", "ar", "-p", one_prompt(tmp_path), "-n", "2", "--no-peer", "-q",
              "--plot", str(tmp_path / "b.png"), "--markdown", str(md), env=_env(no_matplotlib))
    assert_one_line_error(r, 2, 'pip install "specgen[bench]"')
    assert r.stdout == ""  # nothing ran: no result table
    assert not md.exists()


def test_markdown_does_not_need_matplotlib(no_matplotlib, tmp_path, model_path):
    md = tmp_path / "b.md"
    r = bench("-m", str(model_path), "-c", "ar,ngram", "-p", one_prompt(tmp_path), "-n", "4", "-t", "1", "--no-peer",
              "-q", "--no-warmup", "--markdown", str(md), env=_env(no_matplotlib))
    assert r.returncode == 0, r.stderr
    text = md.read_text()
    assert text.startswith("# specgen bench report") and "ngram:block g8 t1 T0" in text
    assert f"specgen bench: wrote the Markdown report to {md.resolve()}" in r.stderr  # where the file went


def test_presets_are_grammar_option_sets():
    from specgen.bench import pair

    for name, p in presets.PRESETS.items():
        specs = grammar.parse_list(p["configs"], str)
        assert specs, name
        for s in specs:
            if p.get("study") == "pair":  # a study with its own names (two engines, two models)
                pair.parse_configs(s)
            else:
                grammar.parse_config(s)  # raises on anything outside the grammar
        args = bench_cli.parse(["--preset", name])
        assert args.configs == p["configs"]
    # A flag on the command line overrides the preset's value.
    assert bench_cli.parse(["--preset", "ssd", "-n", "5"]).max_tokens == 5
    c = grammar.parse_config("ssd:g3:f1:noreuse")
    assert not c.reuse_draft_hidden and c.ssd and c.name == "ssd:f1:noreuse:block:g3"
    c = grammar.parse_config("nanospec:k16:p0.4:g4")
    assert c.draft_p_min == 0.4 and c.nanospec_topk == 16
    for bad in ("ngram:noreuse", "ar:p0.5", "self:p2"):
        with pytest.raises(ValueError):
            grammar.parse_config(bad)


def test_ssd_table_in_the_report(tmp_path, model_path):
    from specgen import bench
    from specgen.bench import report

    res = bench.run(str(model_path), "ar,ssd:g2:f1", one_prompt(tmp_path), max_tokens=6, threads=[2], warmup=False,
                    peer=False, progress=False)
    p = res["cells"][1]["sets"]["all"]["pooled"]
    assert p["ssd_hits"] + p["ssd_misses"] > 0 and 0.0 <= p["ssd_hit_rate"] <= 1.0
    assert "ssd hit" in report.table(res) and "## SSD and draft head" in report.markdown(res)


def test_each_output_file_is_announced(tmp_path, model_path):
    pytest.importorskip("matplotlib")
    out = {"--json": tmp_path / "r.json", "--csv": tmp_path / "r.csv", "--plot": tmp_path / "r.png"}
    args = [a for flag, path in out.items() for a in (flag, str(path))]
    r = bench("-m", str(model_path), "-c", "ar", "-p", one_prompt(tmp_path), "-n", "2", "-t", "1", "--no-peer", "-q",
              "--no-warmup", *args)
    assert r.returncode == 0, r.stderr
    for what, path in (("JSON result", out["--json"]), ("CSV table", out["--csv"]), ("plot", out["--plot"])):
        assert path.is_file() and f"specgen bench: wrote the {what} to {path.resolve()}" in r.stderr
    assert "wrote" not in r.stdout  # stdout keeps the table only
