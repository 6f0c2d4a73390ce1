"""draft="auto" with an EAGLE-3 head (docs/ALGORITHMS.md section 8.4): the head is one more candidate beside
plain decoding, n-gram lookup, the self drafter (and a draft model), priced by its calibrated rows and outputs.
The tiny random Llama target and heads of tests/test_eagle3.py keep every generation fast. What must hold:

1. Greedy output is token-for-token plain decoding's, with the policy free and with a method switch forced
   every k rounds (SPECGEN_AUTO_FORCE_SWITCH cycles self+nanospec, [draft model,] draft head, ngram, none).
2. The self drafter's hand-over rows bring the head's features: the same seeds with and without the
   hand-over (reuse_draft_hidden) give the same tokens and the same acceptance.
3. Sampling at temperature 1 with forced switches follows the target (chi-square on the joint of the first
   three tokens, some of them from head rounds after a self-drafter round).
4. The head is chosen when a named exact cost model makes it the best, and not when it makes it ruinous (no
   test here depends on this machine's speed); its costs are calibrated per head.
5. Every front-end takes auto together with a head.
"""
import json
import subprocess

import numpy as np
import pytest

import specgen
from specgen import _core
from specgen.errors import InvalidParameterError

from sampling_fit import goodness_of_fit
from test_eagle3 import PROMPTS, _head_weights, _target_weights, write_head, write_target

N = 32
HEAD_METHOD, MODEL_METHOD = 4, 3  # the auto_method stat of a head / draft model round (cost_model.h)
TARGET_COSTS = {"verify_seconds": [0.0127, 0.0136, 0.0145, 0.0165, 0.0193, 0.0210, 0.0281, 0.0281, 0.0299],
                "head_full_seconds": [0.0085, 0.0087, 0.0090, 0.0102, 0.0113, 0.0119, 0.0164, 0.0164, 0.0168],
                "head_per_id_seconds": 2.3e-7, "head_subset_base_seconds": 0.0}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("auto_head")
    tw = _target_weights()
    return {"dir": d, "target": write_target(d / "target.gguf", tw),
            "reduced": write_head(d / "head-reduced.gguf", _head_weights(11, True, tw["output.weight"])),
            "shared": write_head(d / "head-shared.gguf", _head_weights(12, False, tw["output.weight"]),
                                 norm_before_residual=True)}


@pytest.fixture(scope="module")
def plain(files):
    g = specgen.Generator(files["target"], n_ctx=256, n_threads=1)
    yield g
    g.close()


@pytest.fixture(scope="module")
def plain_tokens(plain):
    return [plain.generate(p, max_tokens=N, temperature=0, ignore_eos=True).tokens for p in PROMPTS]


def _auto(files, monkeypatch, head="shared", force=None, **kw):
    if force is None:
        monkeypatch.delenv("SPECGEN_AUTO_FORCE_SWITCH", raising=False)
    else:
        monkeypatch.setenv("SPECGEN_AUTO_FORCE_SWITCH", str(force))
    return specgen.Generator(files["target"], n_ctx=256, n_threads=1, draft="auto", draft_head=files[head], **kw)


def _exact_costs(tmp_path, monkeypatch, head_seconds, body_row_seconds=10.0):
    """A named cost model taken as exact (rounds timed by their predictions): the target's rows as measured on
    the reference 2-core machine, a self drafter too slow to choose (10 s a body row) unless body_row_seconds
    says otherwise, and the head's row and outputs at head_seconds (1e-6: a head round beats every other
    choice; 10: never)."""
    path = tmp_path / f"costs-{head_seconds:g}-{body_row_seconds:g}.json"
    path.write_text(json.dumps(dict(TARGET_COSTS, version=1, exact=1, body_row_seconds=body_row_seconds,
                                    eagle3_row_seconds=head_seconds, eagle3_output_full_seconds=head_seconds,
                                    eagle3_output_per_id_seconds=0.0, eagle3_output_subset_base_seconds=head_seconds)))
    monkeypatch.setenv("SPECGEN_CALIBRATION", str(path))
    return path


# ---------------------------------------------------------------------------------------------------
# 1. greedy identity
@pytest.mark.parametrize("head,nanospec", [("shared", False), ("reduced", True)])
def test_greedy_identity_policy(files, calibration, plain_tokens, monkeypatch, head, nanospec):
    with _auto(files, monkeypatch, head, nanospec=nanospec) as g:
        for prompt, want in zip(PROMPTS, plain_tokens):
            r = g.generate(prompt, max_tokens=N, temperature=0, ignore_eos=True)
            assert r.tokens == want, prompt
            assert r.stats["auto_method"] in (0, 1, 2, HEAD_METHOD)
    data = json.loads(calibration.read_text())  # measured at the first load: the head's row and outputs
    assert data["eagle3_row_seconds"] > 0 and data["eagle3_output_full_seconds"] > 0
    assert data["eagle3_output_per_id_seconds"] >= 0


@pytest.mark.parametrize("k,head,nanospec", [(1, "shared", False), (2, "reduced", True), (3, "shared", True)])
def test_greedy_identity_forced_switches(files, calibration, plain_tokens, monkeypatch, k, head, nanospec):
    cycle = [2, HEAD_METHOD, 1, 0]  # self+nanospec, draft head, ngram, none
    with _auto(files, monkeypatch, head, force=k, draft_max=3, nanospec=nanospec) as g:
        for prompt, want in zip(PROMPTS, plain_tokens):
            r = g.generate(prompt, max_tokens=N, temperature=0, ignore_eos=True)
            assert r.tokens == want, prompt
            s = r.stats
            assert s["auto_n_switches"] >= (s["n_rounds"] - 1) // k - 1 >= 3
            assert s["auto_method"] == cycle[(s["n_rounds"] - 1) // k % len(cycle)]
            assert s["n_drafted"] > 0 and s["n_accepted"] > 0


def test_greedy_identity_forced_switches_with_a_draft_model(files, calibration, plain_tokens, monkeypatch):
    """Both extra candidates at once (the target as its own draft model): the cycle has five methods."""
    cycle = [2, MODEL_METHOD, HEAD_METHOD, 1, 0]
    with _auto(files, monkeypatch, force=1, draft_max=2, draft_model=files["target"]) as g:
        for prompt, want in zip(PROMPTS, plain_tokens):
            r = g.generate(prompt, max_tokens=N, temperature=0, ignore_eos=True)
            assert r.tokens == want, prompt
            assert r.stats["auto_method"] == cycle[(r.stats["n_rounds"] - 1) % len(cycle)]


def test_greedy_identity_forced_switches_batched(files, calibration, plain_tokens, monkeypatch):
    """Three sequences in a step: auto drafts by n-gram only there (the head is not batched), and stays lossless."""
    with _auto(files, monkeypatch, force=1, n_parallel=3) as g:
        for prompt, r, want in zip(PROMPTS, g.generate(PROMPTS, max_tokens=N, temperature=0, ignore_eos=True),
                                   plain_tokens):
            assert r.tokens == want, prompt


# ---------------------------------------------------------------------------------------------------
# 2. the hand-over brings the head's features
def test_hand_over_rows_bring_the_heads_features(files, tmp_path, monkeypatch):
    """Forced switches at T=1 under an exact cost model (choices independent of the clock): with the self
    drafter's rows handed over (their features captured by the drafter) and with a full verification forward
    (features from the target's evaluator), the head's context rows are the same, so every seed gives the same
    tokens and the same drafted and accepted counts."""
    _exact_costs(tmp_path, monkeypatch, 1e-6, body_row_seconds=1e-6)
    runs = []
    for reuse in (True, False):
        with _auto(files, monkeypatch, force=1, draft_max=3, reuse_draft_hidden=reuse) as g:
            runs.append([(r.tokens, r.stats.n_drafted, r.stats.n_accepted, r.stats["drafted_at"], r.stats["accepted_at"])
                         for r in (g.generate(PROMPTS[seed % 3], max_tokens=24, temperature=1.0, seed=seed,
                                              ignore_eos=True) for seed in range(8))])
            assert sum(r[2] for r in runs[-1]) > 0
    assert runs[0] == runs[1]


# ---------------------------------------------------------------------------------------------------
# 3. sampling with forced switches
def _joint_three_tokens(oracle, prompt, top_k):
    """Exact (ids, probs) of the first three processed tokens at temperature 1, encoded (a * V + b) * V + c."""
    sp = _core.SamplingParams()
    sp.temperature, sp.top_k, sp.top_p, sp.min_p = 1.0, top_k, 1.0, 0.0

    def dist(ids):
        out_ids, probs = _core.process_logits(oracle.logits(ids)[-1], sp, np.array(ids, dtype=np.int32))
        return [(int(i), float(p)) for i, p in zip(out_ids, probs)]

    V, ids = oracle.n_vocab, oracle.tokenize(prompt)
    out_ids, out_p = [], []
    for a, pa in dist(ids):
        for b, pb in dist(ids + [a]):
            for c, pc in dist(ids + [a, b]):
                out_ids.append((a * V + b) * V + c)
                out_p.append(pa * pb * pc)
    return out_ids, out_p


@pytest.mark.parametrize("head,nanospec", [("shared", False), ("reduced", True)])
def test_sampling_with_forced_switches_matches_target(files, calibration, plain, monkeypatch, head, nanospec):
    """draft_max 1, four tokens, a switch every round: round 1 is the self drafter's (one token drafted at
    most, two emitted at most), round 2 the head's, which then always drafts one of the first three tokens.
    Their joint is the target's (lossless: the first three of four tokens are distributed as three are)."""
    prompt, top_k, n = PROMPTS[2], 5, 800  # the prompt where the shared head's drafts there agree most often
    samples, drafted, accepted = [], 0, 0
    with _auto(files, monkeypatch, head, force=1, draft_max=1, nanospec=nanospec) as g:
        for seed in range(n):
            r = g.generate(prompt, max_tokens=4, temperature=1.0, top_k=top_k, top_p=1.0, min_p=0.0, seed=seed,
                           ignore_eos=True)
            assert len(r.tokens) == 4
            samples.append((r.tokens[0] * plain.n_vocab + r.tokens[1]) * plain.n_vocab + r.tokens[2])
            assert r.stats.n_rounds >= 2 and r.stats.n_drafted >= 1  # the head's round drafted
            drafted += r.stats.n_drafted
            accepted += r.stats.n_accepted
    p = goodness_of_fit(samples, *_joint_three_tokens(plain, prompt, top_k))
    print(f"{head}{' nanospec' if nanospec else ''}: chi-square p = {p:.3f}, accepted {accepted}/{drafted}")
    # Both verdicts happen: acceptances and the residual's corrections.
    assert 10 < accepted < drafted - 10
    assert p > 1e-3


# ---------------------------------------------------------------------------------------------------
# 4. the choice follows the head's costs
def test_head_is_chosen_when_its_costs_make_it_best(files, plain_tokens, tmp_path, monkeypatch):
    _exact_costs(tmp_path, monkeypatch, 1e-6)
    with _auto(files, monkeypatch) as g:
        r = g.generate(PROMPTS[0], max_tokens=N, temperature=0, ignore_eos=True)
        assert r.tokens == plain_tokens[0]
        s = r.stats
        # A drafter's output ran: the self drafter is never chosen (10 s a body row) and n-gram lookup has
        # no head, so the head drafted (the last round may be a plain one: the budget's end).
        assert s["draft_head_seconds"] > 0 and s["n_accepted"] > 0, s


def test_head_is_not_chosen_when_its_costs_are_ruinous(files, plain_tokens, tmp_path, monkeypatch):
    path = _exact_costs(tmp_path, monkeypatch, 10.0)
    before = path.read_text()
    with _auto(files, monkeypatch) as g:
        for prompt, want in zip(PROMPTS, plain_tokens):
            r = g.generate(prompt, max_tokens=N, temperature=0, ignore_eos=True)
            assert r.tokens == want
            assert r.stats["draft_head_seconds"] == 0 and r.stats["auto_method"] != HEAD_METHOD
    assert path.read_text() == before  # a named file is read, never rewritten


@pytest.mark.parametrize("head,nanospec", [("shared", False), ("reduced", True)])
def test_a_head_auto_never_chooses_runs_no_forward(files, plain_tokens, tmp_path, monkeypatch, head, nanospec):
    """While auto drafts with other methods the head only keeps each verified row's g (fc): its decoder layer
    never runs and, with NanoSpec, the target's full head never seeds its S (the seed waits for the head's
    first round). A ruinous exact cost model never chooses the head, nor the self drafter (10 s a body row)."""
    _exact_costs(tmp_path, monkeypatch, 10.0)
    with _auto(files, monkeypatch, head, nanospec=nanospec) as g:
        for prompt, want in zip(PROMPTS, plain_tokens):
            r = g.generate(prompt, max_tokens=N, temperature=0, ignore_eos=True)
            assert r.tokens == want
            assert r.stats["n_draft_forwards"] == 0 and r.stats["nanospec_prefill_seconds"] == 0, r.stats


def test_a_head_chosen_after_other_methods_catches_up(files, plain_tokens, tmp_path, monkeypatch):
    """Chosen from the second round on (exact costs: the head nearly free), the head first writes the
    prompt's rows it deferred, then one forward per drafted token and per round's verified rows: forwards
    run, drafts are accepted, and the output is plain decoding's."""
    _exact_costs(tmp_path, monkeypatch, 1e-6)
    with _auto(files, monkeypatch, "reduced", nanospec=True) as g:
        for prompt, want in zip(PROMPTS, plain_tokens):
            r = g.generate(prompt, max_tokens=N, temperature=0, ignore_eos=True)
            assert r.tokens == want
            s = r.stats
            assert s["draft_head_seconds"] > 0 and s["n_accepted"] > 0
            # Per head round: its catch-up (one forward: <= 128 rows) and a forward per drafted token but
            # the last.
            assert 0 < s["n_draft_forwards"] <= s["n_rounds"] + s["n_drafted"], s


def test_prefix_reuse_keeps_the_heads_deferred_rows(files, plain, tmp_path, monkeypatch):
    """A request of one token runs one round, never the head's (the first round is plain or n-gram): the head
    only kept its prompt rows' g. The next request extends that prompt and reuses the slot's cached rows,
    those kept g rows among them; the head, chosen now (exact costs: nearly free), writes them and drafts,
    and the output is plain decoding's."""
    _exact_costs(tmp_path, monkeypatch, 1e-6)
    prompt, longer = PROMPTS[0], PROMPTS[0] + " and the sea"
    with _auto(files, monkeypatch, "reduced") as g:
        first = g.generate(prompt, max_tokens=1, temperature=0, ignore_eos=True)
        assert first.stats["n_draft_forwards"] == 0
        r = g.generate(longer, max_tokens=N, temperature=0, ignore_eos=True)
        assert r.stats["n_prompt_tokens_cached"] > 0 and r.stats["draft_head_seconds"] > 0 and r.stats["n_accepted"] > 0
        assert r.tokens == plain.generate(longer, max_tokens=N, temperature=0, ignore_eos=True).tokens


def test_named_file_without_the_head_is_completed_at_load(files, plain_tokens, tmp_path, monkeypatch):
    path = tmp_path / "target-only.json"
    path.write_text(json.dumps(dict(TARGET_COSTS, version=1, body_row_seconds=10.0)))
    before = path.read_text()
    monkeypatch.setenv("SPECGEN_CALIBRATION", str(path))
    with _auto(files, monkeypatch, force=1) as g:  # every method drafts in turn
        assert g.generate(PROMPTS[1], max_tokens=N, temperature=0, ignore_eos=True).tokens == plain_tokens[1]
    assert path.read_text() == before


def test_automatic_cache_is_per_head(files, tmp_path, monkeypatch):
    monkeypatch.delenv("SPECGEN_CALIBRATION", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    specgen.Generator(files["target"], n_ctx=64, n_threads=1, draft="auto").close()
    (alone,) = (tmp_path / "specgen").glob("calibration-*.json")
    assert "eagle3_row_seconds" not in json.loads(alone.read_text())
    _auto(files, monkeypatch).close()
    _auto(files, monkeypatch, "reduced").close()
    with_heads = [f for f in (tmp_path / "specgen").glob("calibration-*.json") if f != alone]
    assert len(with_heads) == 2
    assert all(json.loads(f.read_text())["eagle3_row_seconds"] > 0 for f in with_heads)


# ---------------------------------------------------------------------------------------------------
# 5. front-ends, parameters
def test_parameters(files, monkeypatch):
    monkeypatch.setenv("SPECGEN_CALIBRATION", "off")
    with _auto(files, monkeypatch, nanospec=True) as g:  # nanospec: the head candidate's S
        assert g.draft_kind == "auto" and g.draft_head == files["shared"]
    with pytest.raises(InvalidParameterError, match="draft_head drafts with an EAGLE-3 head"):
        specgen.Generator(files["target"], draft="self", draft_head=files["shared"])
    with pytest.raises(InvalidParameterError, match="auto"):
        specgen.Generator(files["target"], draft="auto", draft_head=files["shared"], ssd=True)


def test_cli_draft_auto_with_a_head(files, calibration, plain_tokens, plain, cli):
    base = [cli, "-m", files["target"], "-p", PROMPTS[0], "-n", str(N), "--temp", "0", "-t", "1", "--ignore-eos"]
    want = subprocess.run(base, capture_output=True, text=True, timeout=120)
    r = subprocess.run(base + ["--draft", "auto", "--draft-head", files["shared"]], capture_output=True, text=True,
                       timeout=120)
    assert want.returncode == 0 and r.returncode == 0, r.stderr
    assert r.stdout == want.stdout
    assert "auto (with EAGLE-3 head" in r.stderr


def test_serve_flags_take_auto_with_a_head():
    pytest.importorskip("fastapi")  # the server extra; the CLI test above covers the flag table itself
    from specgen.server import cli

    kw = cli.generator_kwargs(cli.build_parser().parse_args(["-m", "t.gguf", "--draft", "auto", "--draft-head", "h.gguf"]))
    assert kw["draft_kind"] == "auto" and kw["draft_head"] == "h.gguf"
