"""$SPECGEN_VERIFY_TRACE (engine/verify_trace.h): one JSON line per speculative round, with the exact
acceptance of that round's draft under both verification rules (what docs/bench/hsd-pair-*.md measures
the rules by). The lines agree with the round counters and with the rule's own definition."""
import json

import numpy as np
import pytest

import specgen
from specgen.errors import SpecgenError


@pytest.mark.parametrize("verify", ["token", "block"])
def test_trace_has_one_consistent_line_per_round(model_path, tmp_path, monkeypatch, verify):
    path = tmp_path / "trace.jsonl"
    monkeypatch.setenv("SPECGEN_VERIFY_TRACE", str(path))
    # A 6-layer self drafter: its q differs from the target's p, so both rules have work to do.
    g = specgen.Generator(model_path, n_threads=2, n_ctx=512, draft="self", self_layers=6, verify=verify,
                          draft_max=4, draft_adaptive=False)
    try:
        r = g.generate("The history of the printing press begins", max_tokens=40, temperature=1.0,
                       top_k=0, top_p=1.0, min_p=0.0, seed=3)
    finally:
        g.close()
    rounds = [json.loads(line) for line in path.read_text().splitlines()]
    s = r.stats
    assert len(rounds) == s["n_rounds"] > 0
    assert sum(x["accepted"] for x in rounds) == s["n_accepted"]
    assert sum(x["gamma"] for x in rounds) == s["n_drafted"]
    fell_short = 0
    for x in rounds:
        assert x["method"] == verify
        g_ = x["gamma"]
        ratio, tok, blk = (np.array(x[k]) for k in ("ratio", "reach_token", "reach_block"))
        assert ratio.shape == tok.shape == blk.shape == (g_,)
        assert np.all(ratio >= 0)
        # token-wise: position i is reached and passed with prod_{j<=i} min(1, p/q)
        assert tok == pytest.approx(np.cumprod(np.minimum(1.0, ratio)), rel=1e-6)
        for reach in (tok, blk):
            assert np.all((reach >= 0) & (reach <= 1 + 1e-12))
            assert np.all(np.diff(reach) <= 1e-12)  # P(n_accepted >= i) cannot grow with i
        assert x["p_next"] > 0  # the emitted token was drawn from a distribution over p's support
        if x["accepted"] == g_:
            assert x["q_next"] == -1  # a bonus: no proposal row
        else:  # a correction, from (rho p - q)+ with rho <= 1 (rho = 1 token-wise): p > q there
            assert x["p_next"] > x["q_next"] >= 0
        if g_ == 0:  # the budget left no room to draft: a line with empty lists
            continue
        # the whole draft: block's min(1, r_g / M_{g-1}) is never below the product of the clipped ratios
        assert blk[-1] >= tok[-1] - 1e-9
        fell_short += tok[-1] < 1 - 1e-6
    assert fell_short > 0  # some draft was not certain to pass: the check above was not vacuous


def test_trace_file_that_cannot_be_opened_fails_the_load(model_path, tmp_path, monkeypatch):
    monkeypatch.setenv("SPECGEN_VERIFY_TRACE", str(tmp_path / "no_such_dir" / "trace.jsonl"))
    with pytest.raises(SpecgenError, match="SPECGEN_VERIFY_TRACE"):
        specgen.Generator(model_path, n_threads=2, n_ctx=256, draft="ngram")
