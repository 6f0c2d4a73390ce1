"""The one stats field list (cpp/src/engine/stats.h): Python's GenerationStats (attributes,
to_dict(), dict-style access), the C struct specgen_stats (every field, per-position counts and the
speed-of-light inputs included) and docs/DESIGN.md section 7 publish the same names; the row counts
keep their documented relations."""
import re
import subprocess
from pathlib import Path

import pytest

import specgen
from specgen import GenerationStats

import c_programs

ROOT = Path(__file__).resolve().parent.parent
PROMPT = "one two three four one two three four one two three"


def field_names():
    return [name for name, _doc in GenerationStats.fields()]


def test_fields_are_documented_attributes(gen):
    s = gen.generate("Hi", max_tokens=3, temperature=0).stats
    assert isinstance(s, GenerationStats)
    d = s.to_dict()
    for name, doc in GenerationStats.fields():
        assert doc, name
        assert getattr(s, name) == d[name] == s[name], name
    assert d["seed"] == s.seed
    # The earlier dict keeps working: `in`, keys(), dict(stats), get().
    assert "n_rounds" in s and "nope" not in s and dict(s) == d and s.get("nope", 5) == 5
    with pytest.raises(KeyError):
        s["nope"]
    # Aliases of the renamed row counts.
    assert s["n_target_rows"] == s.n_emitted_rows and s["n_target_rows_reused"] == s.n_verify_rows_reused


def test_row_counts_relations(model_path):
    with specgen.Generator(model_path, n_threads=2, n_ctx=256, draft="self", draft_max=3) as g:
        s = g.generate(PROMPT, max_tokens=12, temperature=0).stats
    assert s.n_rounds > 0
    assert s.n_verify_rows == s.n_drafted + s.n_rounds
    assert 0 < s.n_verify_rows_reused <= s.n_verify_rows
    assert s.n_emitted_rows == s.n_accepted + s.n_rounds <= s.n_verify_rows
    # mean_accepted_length is tokens per target call.
    assert s.mean_accepted_length == pytest.approx(1 + s.n_accepted / s.n_rounds)
    assert sum(s.accepted_at) == s.n_accepted and sum(s.drafted_at) == s.n_drafted


def test_c_struct_has_every_field():
    header = (ROOT / "cpp" / "include" / "specgen" / "specgen.h").read_text()
    struct = header[header.index("typedef struct specgen_stats {"):header.index("} specgen_stats;")]
    members = set(re.findall(r"\b(\w+)(?:\[\w+\])?;", struct))
    missing = [n for n in field_names() if n not in members]
    assert missing == [], missing


def test_c_stats_equal_python_stats(model_path, tmp_path):
    exe = c_programs.build("stats_speculative.c", tmp_path / "stats")
    r = subprocess.run([exe, str(model_path), PROMPT, "12"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    c = dict(line.split("=", 1) for line in r.stdout.splitlines())
    with specgen.Generator(model_path, n_threads=1, n_ctx=256, draft="ngram", draft_max=4) as g:
        s = g.generate(PROMPT, max_tokens=12, temperature=0, seed=7).stats
    for key in ("n_prompt_tokens", "n_generated", "n_rounds", "n_drafted", "n_accepted", "n_verify_rows",
                "n_verify_rows_reused", "n_emitted_rows", "n_alpha", "vocab_set_size"):
        assert int(c[key]) == s[key], key
    for key in ("sum_alpha", "sum_entropy", "sum_entropy2", "mean_accepted_length"):
        assert float(c[key]) == pytest.approx(s[key], rel=1e-6, abs=1e-9), key
    assert [int(x) for x in c["drafted_at"].split(",") if x] == list(s.drafted_at)
    assert [int(x) for x in c["accepted_at"].split(",") if x] == list(s.accepted_at)
    assert s.n_rounds > 0 and s.n_accepted > 0  # the prompt repeats: the n-gram drafter is accepted
