"""$SPECGEN_AUTO_TRACE (speculative/auto/auto_trace.h): one JSON line per round of draft="auto", with
every candidate's prediction at the choice and the round's outcome. The lines agree with the round
counters, the chosen method is one of the candidates and no round drafts more than its chosen g."""
import json

import pytest

import specgen
from specgen.errors import SpecgenError

PROMPT = "List the planets: Mercury, Venus, Earth, Mars, Jupiter, Saturn, Uranus, Neptune. Again: Mercury,"


@pytest.mark.parametrize("force", [None, 2])
def test_trace_has_one_consistent_line_per_round(model_path, calibration, tmp_path, monkeypatch, force):
    path = tmp_path / "auto.jsonl"
    monkeypatch.setenv("SPECGEN_AUTO_TRACE", str(path))
    if force is None:
        monkeypatch.delenv("SPECGEN_AUTO_FORCE_SWITCH", raising=False)
    else:  # self+nanospec, ngram, none in turn, two rounds each
        monkeypatch.setenv("SPECGEN_AUTO_FORCE_SWITCH", str(force))
    with specgen.Generator(model_path, n_ctx=512, n_threads=2, draft="auto") as g:
        s = g.generate(PROMPT, max_tokens=40, temperature=0).stats
    rounds = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(rounds) == s["n_rounds"] > 0
    assert sum(r["drafted"] for r in rounds) == s["n_drafted"]
    assert sum(r["accepted"] for r in rounds) == s["n_accepted"]
    for r in rounds:
        assert r["method"] in r["candidates"], r
        assert "none" in r["candidates"]
        assert 0 <= r["accepted"] <= r["drafted"] <= r["chosen"]["g"], r
        assert r["seconds"] > 0 and r["predicted_seconds"] >= 0
        for c in r["candidates"].values():
            assert c["tokens"] >= 1 and c["seconds"] > 0
    methods = {r["method"] for r in rounds}
    if force is not None:
        assert {"self+nanospec", "ngram", "none"} <= methods, methods
    assert methods != {"none"}  # the planets repeat: some round drafted


def test_trace_file_that_cannot_be_opened_fails_the_load(model_path, tmp_path, monkeypatch):
    monkeypatch.setenv("SPECGEN_AUTO_TRACE", str(tmp_path / "no_such_dir" / "auto.jsonl"))
    with pytest.raises(SpecgenError, match="SPECGEN_AUTO_TRACE"):
        specgen.Generator(model_path, n_threads=2, n_ctx=256, draft="auto")
