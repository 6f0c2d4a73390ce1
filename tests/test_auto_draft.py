"""draft="auto" with a draft model (docs/ALGORITHMS.md section 8.3): the draft model is one more
candidate beside plain decoding, n-gram lookup and the self drafter, priced by its calibrated rows and
heads. The reference model serves as its own draft model here (same vocabulary, no download). What
must hold:

1. Greedy output is token-for-token plain decoding's, with the policy free and with a method switch
   forced every k rounds (SPECGEN_AUTO_FORCE_SWITCH cycles self+nanospec, draft model, ngram, none).
2. Sampling at temperature 1 with forced switches follows the target (chi-square on the joint of the
   first two tokens, the second one often from a draft model round after a self-drafter round).
3. The draft model is chosen when a named cost model makes it the best, and not when it makes it
   ruinous (no test here depends on this machine's speed); its costs are calibrated per pair.
4. Every front-end takes auto together with a draft model (the draft weights are loaded once per
   generator: tests/cpp/test_draft_sharing.cpp).
"""
import json
import subprocess

import pytest

import specgen
from sampling_fit import goodness_of_fit, joint_two_tokens

PROMPTS = [
    "The history of the printing press begins",
    "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n\ndef mul(a, b):\n",
]
N = 40
DRAFT_METHOD = 3  # the auto_method stat of a draft model round (cost_model.h)


@pytest.fixture(scope="module")
def plain_tokens(gen):
    return [gen.generate(p, max_tokens=N, temperature=0).tokens for p in PROMPTS]


def _auto(model_path, monkeypatch, force=None, **kw):
    if force is None:
        monkeypatch.delenv("SPECGEN_AUTO_FORCE_SWITCH", raising=False)
    else:
        monkeypatch.setenv("SPECGEN_AUTO_FORCE_SWITCH", str(force))
    return specgen.Generator(model_path, n_ctx=512, n_threads=2, draft="auto", draft_model=model_path, **kw)


def _costs(tmp_path, monkeypatch, draft_row_seconds):
    """A named cost model, taken as exact (no correction by measured round times): the target's rows as
    measured on the reference 2-core machine, a self drafter too slow to choose (10 s a body row) and the
    draft model's rows and heads at draft_row_seconds (1e-6: a draft model round beats every other
    choice; 10: never)."""
    path = tmp_path / f"costs-{draft_row_seconds:g}.json"
    path.write_text(json.dumps({"version": 1, "exact": 1,
                                "verify_seconds": [0.0127, 0.0136, 0.0145, 0.0165, 0.0193, 0.0210, 0.0281, 0.0281, 0.0299],
                                "head_full_seconds": [0.0085, 0.0087, 0.0090, 0.0102, 0.0113, 0.0119, 0.0164, 0.0164, 0.0168],
                                "body_row_seconds": 10.0, "head_per_id_seconds": 2.3e-7,
                                "head_subset_base_seconds": 0.0,
                                "draft_forward_seconds": [draft_row_seconds] * 9,
                                "draft_head_full_seconds": draft_row_seconds,
                                "draft_head_per_id_seconds": 0.0,
                                "draft_head_subset_base_seconds": draft_row_seconds}))
    monkeypatch.setenv("SPECGEN_CALIBRATION", str(path))
    return path


# ---------------------------------------------------------------------------------------------------
# 1. greedy identity
@pytest.mark.parametrize("nanospec", [False, True])
def test_greedy_identity_policy(model_path, calibration, plain_tokens, monkeypatch, nanospec):
    g = _auto(model_path, monkeypatch, nanospec=nanospec)
    try:
        for prompt, want in zip(PROMPTS, plain_tokens):
            r = g.generate(prompt, max_tokens=N, temperature=0)
            assert r.tokens == want
            assert r.stats["auto_method"] in (0, 1, 2, 3)
    finally:
        g.close()
    data = json.loads(calibration.read_text())  # measured at the first load: the pair's rows and heads
    assert len(data["draft_forward_seconds"]) == 9 and all(t > 0 for t in data["draft_forward_seconds"])
    assert data["draft_head_full_seconds"] > 0


@pytest.mark.parametrize("k,nanospec", [(1, False), (2, True), (3, False)])
def test_greedy_identity_forced_switches(model_path, calibration, plain_tokens, monkeypatch, k, nanospec):
    g = _auto(model_path, monkeypatch, force=k, draft_max=2, nanospec=nanospec)
    cycle = [2, DRAFT_METHOD, 1, 0]  # self+nanospec, draft model, ngram, none
    try:
        for prompt, want in zip(PROMPTS, plain_tokens):
            r = g.generate(prompt, max_tokens=N, temperature=0)
            assert r.tokens == want
            s = r.stats
            assert s["auto_n_switches"] >= (s["n_rounds"] - 1) // k - 1 >= 3
            # the cycle has four methods, the draft model among them: the last round's is where it says
            assert s["auto_method"] == cycle[(s["n_rounds"] - 1) // k % 4]
            assert s["n_drafted"] > 0
    finally:
        g.close()


def test_forced_switches_every_round_with_token_verification(model_path, calibration, plain_tokens, monkeypatch):
    g = _auto(model_path, monkeypatch, force=1, verify="token", draft_adaptive=False)
    try:
        assert g.generate(PROMPTS[1], max_tokens=N, temperature=0).tokens == plain_tokens[1]
    finally:
        g.close()


# ---------------------------------------------------------------------------------------------------
# 2. sampling with forced switches
def test_sampling_with_forced_switches_matches_target(model_path, calibration, gen, monkeypatch):
    """The draft model drafts over its NanoSpec head (q_S differs from the target's p), so its
    rejections and residual samples are exercised, not only acceptances of an identical proposal."""
    prompt = "My favourite colour is"
    top_k = 6
    g = _auto(model_path, monkeypatch, force=1, draft_max=2, nanospec=True)
    samples, by_model = [], 0
    try:
        for seed in range(400):
            r = g.generate(prompt, max_tokens=2, temperature=1.0, top_k=top_k, top_p=1.0, min_p=0.0, seed=seed)
            assert len(r.tokens) == 2
            samples.append(r.tokens[0] * gen.n_vocab + r.tokens[1])
            # the second token came from a draft model round, after the self drafter's first round
            by_model += r.stats["auto_n_switches"] > 0 and r.stats["auto_method"] == DRAFT_METHOD
    finally:
        g.close()
    assert by_model > 50, by_model
    ids, probs = joint_two_tokens(gen, prompt, top_k)
    assert abs(sum(probs) - 1.0) < 1e-4
    assert goodness_of_fit(samples, ids, probs) > 1e-3


# ---------------------------------------------------------------------------------------------------
# 3. the choice follows the draft model's costs
def test_draft_model_is_chosen_when_its_costs_make_it_best(model_path, plain_tokens, tmp_path, monkeypatch):
    _costs(tmp_path, monkeypatch, 1e-6)
    g = _auto(model_path, monkeypatch)
    try:
        r = g.generate(PROMPTS[0], max_tokens=N, temperature=0)
        assert r.tokens == plain_tokens[0]
        s = r.stats
        # A drafter's LM head ran: the self drafter is never chosen (10 s a body row) and n-gram lookup
        # has no head, so the draft model drafted (the last round may be a plain one: the budget's end).
        assert s["draft_head_seconds"] > 0 and s["n_accepted"] > 0, s
        assert s["vocab_set_size"] > 0  # the stat stays the self candidate's S
    finally:
        g.close()


def test_draft_model_is_not_chosen_when_its_costs_are_ruinous(model_path, plain_tokens, tmp_path, monkeypatch):
    path = _costs(tmp_path, monkeypatch, 10.0)
    before = path.read_text()
    g = _auto(model_path, monkeypatch)
    try:
        for prompt, want in zip(PROMPTS, plain_tokens):
            r = g.generate(prompt, max_tokens=N, temperature=0)
            assert r.tokens == want
            assert r.stats["draft_head_seconds"] == 0 and r.stats["auto_method"] != DRAFT_METHOD  # no neural round
    finally:
        g.close()
    assert path.read_text() == before  # a named file is read, never rewritten


def test_named_file_without_the_draft_model_is_completed_at_load(model_path, plain_tokens, tmp_path, monkeypatch):
    """An older file (the target's costs only) is taken for the target; the draft model's costs are
    measured at load, and the file stays as it was."""
    path = tmp_path / "target-only.json"
    path.write_text(json.dumps({"version": 1, "verify_seconds": [0.0127] * 9, "head_full_seconds": [0.0085] * 9,
                                "body_row_seconds": 10.0, "head_per_id_seconds": 0.0, "head_subset_base_seconds": 0.0}))
    before = path.read_text()
    monkeypatch.setenv("SPECGEN_CALIBRATION", str(path))
    g = _auto(model_path, monkeypatch, force=1)  # every method drafts in turn
    try:
        assert g.generate(PROMPTS[1], max_tokens=N, temperature=0).tokens == plain_tokens[1]
    finally:
        g.close()
    assert path.read_text() == before


def test_automatic_cache_is_per_pair(model_path, tmp_path, monkeypatch):
    monkeypatch.delenv("SPECGEN_CALIBRATION", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    specgen.Generator(model_path, n_ctx=256, n_threads=2, draft="auto").close()
    (alone,) = (tmp_path / "specgen").glob("calibration-*.json")
    assert "draft_forward_seconds" not in json.loads(alone.read_text())
    _auto(model_path, monkeypatch).close()
    files = sorted((tmp_path / "specgen").glob("calibration-*.json"))
    assert len(files) == 2
    (pair,) = [f for f in files if f != alone]
    assert json.loads(pair.read_text())["draft_forward_seconds"][0] > 0


# ---------------------------------------------------------------------------------------------------
# 4. front-ends, parameters, shared weights
def test_parameters(model_path, monkeypatch):
    from specgen import _core
    from specgen.errors import InvalidParameterError

    monkeypatch.setenv("SPECGEN_CALIBRATION", "off")
    with specgen.Generator(model_path, n_ctx=128, n_threads=1, draft_kind="auto", draft_model=model_path) as g:
        assert g.draft_kind == "auto" and g.draft == "auto"
    for kw in (dict(draft="ngram", draft_model=model_path), dict(draft_kind="self", draft_model=model_path)):
        with pytest.raises(InvalidParameterError, match="draft_model"):
            specgen.Generator(model_path, **kw)
    with pytest.raises(InvalidParameterError, match="auto"):  # nanospec picks the draft model's head: none given
        specgen.Generator(model_path, draft="auto", nanospec=True)
    with pytest.raises(InvalidParameterError, match="auto"):
        specgen.Generator(model_path, draft="auto", draft_model=model_path, ssd=True)
    p = _core.GeneratorParams()
    p.model_path = str(model_path)
    p.set_draft(_core.DraftKind.auto, str(model_path))
    p.validate()
    assert p.draft == "auto" and p.draft_model == str(model_path)


def test_cli_draft_auto_with_draft_model(model_path, calibration, cli):
    m = str(model_path)
    r = subprocess.run([cli, "-m", m, "--draft", "auto", "-md", m, "-p", "Hello", "-n", "8", "--temp", "0", "-t", "2"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([cli, "-m", m, "--draft", "ngram", "-md", m, "-p", "Hello", "-n", "8"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "not both" in r.stderr


def test_serve_flags_take_auto_with_a_draft_model():
    pytest.importorskip("fastapi")  # the server extra; the CLI test above covers the flag table itself
    from specgen.server import cli

    kw = cli.generator_kwargs(cli.build_parser().parse_args(["-m", "t.gguf", "--draft", "auto", "-md", "d.gguf"]))
    assert kw["draft_kind"] == "auto" and kw["draft_model"] == "d.gguf"
    with pytest.raises(SystemExit, match="not both"):
        cli.generator_kwargs(cli.build_parser().parse_args(["-m", "t.gguf", "--draft", "ngram", "-md", "d.gguf"]))


def test_the_draft_models_rows_stay_for_a_chats_next_turn(model_path, gen, tmp_path, monkeypatch):
    """auto's draft model candidate keeps its cache's rows for the slot's next request, as the draft model
    alone does: a second turn that extends the first forwards only its new rows through the draft, and its
    tokens stay plain decoding's. The cost model makes every round a draft model round."""
    _costs(tmp_path, monkeypatch, 1e-6)
    g = _auto(model_path, monkeypatch)
    try:
        first = g.tokenize(PROMPTS[0])
        r1 = g.generate(first, max_tokens=16, temperature=0, ignore_eos=True)
        assert r1.stats["auto_method"] == DRAFT_METHOD and r1.stats["n_draft_prompt_tokens_cached"] == 0
        second = first + r1.tokens + g.tokenize(" Later,", add_bos=False)
        r2 = g.generate(second, max_tokens=16, temperature=0, ignore_eos=True)
        assert len(first) <= r2.stats["n_draft_prompt_tokens_cached"] < len(second)
        assert r2.tokens == gen.generate(second, max_tokens=16, temperature=0, ignore_eos=True).tokens
    finally:
        g.close()
