"""ngram_chain (docs/ALGORITHMS.md section 6.1): where the n-gram lookup matches the history, a draft
model's proposal starts with the match's tokens (point masses) and the draft model drafts on after them,
its first draft forward taking their rows. What must hold, with token-wise and block verification:

1. Greedy output is plain decoding's token for token, alone, batched with several sequences (one draft
   forward per position for all of them) and under draft="auto" with the draft model's rounds forced.
2. Samples at T=1 follow the target: the chi-square on the first two tokens of a prompt whose first
   proposal is one chained token followed by one draft-model token (a one-hot q, then the model's q).
3. The knob is the table's (on by default: matches of 4+ tokens; the Python keyword, the CLI's
   --ngram-chain N and llama.cpp's --spec-type draft-simple,ngram-simple); 0 turns it off, and drafters
   other than a draft model ignore it.

The tests chain matches of 1+ tokens (ngram_chain=1): the tiny models' text has few longer ones.

Tiny random Gemma 3 models made here (test_draft_batch's pair: the draft is the target with one layer
re-drawn, so drafts are partly accepted)."""
from __future__ import annotations

import subprocess

import pytest

import specgen
from sampling_fit import goodness_of_fit, joint_two_tokens
from test_draft_batch import _tiny

# Repeated words: the lookup matches in the prompts and in what the tiny model generates.
PROMPTS = ["the cat the cat the", "a hat is on a hat", "on the mat on the", "cat hat cat hat cat", "is a cat is a"]
N = 24
DRAFT_METHOD = 3  # auto_method of a draft model round (cost_model.h)


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    d = tmp_path_factory.mktemp("ngram_chain")
    return _tiny(d / "target.gguf"), _tiny(d / "draft.gguf", redraw="blk.1.ffn_down.weight")


@pytest.fixture(scope="module")
def oracle(pair):
    with specgen.Generator(pair[0], n_threads=2, n_ctx=256) as g:
        yield g


@pytest.fixture(scope="module")
def solo(oracle):
    return [oracle.generate(p, max_tokens=N, temperature=0, ignore_eos=True).tokens for p in PROMPTS]


def _sum(results, key):
    return sum(r.stats[key] for r in results)


def _assert_chained(results):
    chained = _sum(results, "n_ngram_chained")
    assert chained > 0  # matches started proposals ...
    assert _sum(results, "n_drafted") > chained  # ... and the draft model drafted tokens of its own
    assert 0 < _sum(results, "n_ngram_chained_accepted") <= chained
    assert _sum(results, "n_draft_forwards") > 0


# ---------------------------------------------------------------------------------------------------
# 1. greedy identity
@pytest.mark.parametrize("verify", ["token", "block"])
def test_greedy_identity_alone(pair, solo, verify):
    with specgen.Generator(pair[0], draft=pair[1], ngram_chain=1, verify=verify, n_threads=2, n_ctx=256,
                           draft_p_min=0.0) as g:
        results = [g.generate(p, max_tokens=N, temperature=0, ignore_eos=True) for p in PROMPTS]
    for p, r, want in zip(PROMPTS, results, solo):
        assert r.tokens == want, p
    _assert_chained(results)


def test_off_and_other_drafters_chain_nothing(pair, solo):
    # The full head (NanoSpec's draft_p_min of 0.5 would stop the random draft's unconfident drafts).
    with specgen.Generator(pair[0], draft=pair[1], ngram_chain=0, nanospec=False, n_threads=2, n_ctx=256) as g:
        r = g.generate(PROMPTS[0], max_tokens=N, temperature=0, ignore_eos=True)
    assert r.tokens == solo[0] and r.stats["n_drafted"] > 0 and r.stats["n_ngram_chained"] == 0
    with specgen.Generator(pair[0], draft="ngram", ngram_chain=1, n_threads=2, n_ctx=256) as g:
        r = g.generate(PROMPTS[0], max_tokens=N, temperature=0, ignore_eos=True)
    assert r.tokens == solo[0] and r.stats["n_drafted"] > 0 and r.stats["n_ngram_chained"] == 0


@pytest.mark.parametrize("verify", ["token", "block"])
def test_batched_greedy_identity_and_batched_equals_alone(pair, solo, verify):
    """Several sequences draft in one draft forward per position (a chained sequence's first forward
    takes its match's rows); each proposes what it proposes alone: a fixed seed's sample and its
    per-position counts are the same alone and batched (the batch policy off, as test_draft_batch)."""
    kw = dict(n_threads=2, n_ctx=256, n_parallel=4, batch_draft_policy=False, draft_p_min=0.0, verify=verify)
    with specgen.Generator(pair[0], draft=pair[1], ngram_chain=1, **kw) as g:
        together = g.generate(PROMPTS[:4], max_tokens=N, temperature=0, ignore_eos=True)
        for p, r, want in zip(PROMPTS, together, solo):
            assert r.tokens == want, p
        _assert_chained(together)
        assert _sum(together, "n_draft_batch_sequences") > _sum(together, "n_draft_forwards")  # shared forwards
        sample = dict(max_tokens=N, temperature=0.9, top_k=40, ignore_eos=True)
        seeds = [7, 8, 9, 10]
        alone = [g.generate(p, seed=s, **sample) for p, s in zip(PROMPTS[:4], seeds)]
        batched = g.generate(PROMPTS[:4], seed=seeds, **sample)
    for a, b in zip(alone, batched):
        assert b.tokens == a.tokens
        for key in ("drafted_at", "accepted_at", "n_ngram_chained", "n_ngram_chained_accepted"):
            assert b.stats[key] == a.stats[key], key
    assert _sum(batched, "n_ngram_chained") > 0


def test_auto_with_forced_draft_model_rounds_chains(pair, solo, calibration, monkeypatch):
    # Every round switches: self+nanospec, draft model, ngram, none, ...; the draft model's rounds chain.
    monkeypatch.setenv("SPECGEN_AUTO_FORCE_SWITCH", "1")
    with specgen.Generator(pair[0], draft="auto", draft_model=pair[1], ngram_chain=1, n_threads=2, n_ctx=256,
                           draft_max=4) as g:
        results = [g.generate(p, max_tokens=N, temperature=0, ignore_eos=True) for p in PROMPTS]
    for p, r, want in zip(PROMPTS, results, solo):
        assert r.tokens == want, p
    assert _sum(results, "n_ngram_chained") > 0
    assert any(r.stats["auto_n_switches"] > 0 for r in results)


# ---------------------------------------------------------------------------------------------------
# 2. sampling: a chained token, then a draft-model token, each verified with its own q
@pytest.mark.parametrize("verify", ["token", "block"])
def test_sampling_matches_target(pair, oracle, verify):
    # The prompt's tokens end in a doubled one ("z", "z"): its 1-token suffix matches the token before it,
    # so the first round's lookup proposes that one token and the draft model drafts the second
    # (draft_max 2, max_tokens 3), whatever the seed.
    prompt = "a cat sat zz"
    top_k = 3
    samples, mixed = [], 0
    with specgen.Generator(pair[0], draft=pair[1], ngram_chain=1, verify=verify, n_threads=2, n_ctx=64,
                           draft_max=2, draft_adaptive=False, draft_p_min=0.0) as g:
        for seed in range(500):
            r = g.generate(prompt, max_tokens=3, temperature=1.0, top_k=top_k, top_p=1.0, min_p=0.0, seed=seed,
                           ignore_eos=True)
            samples.append(r.tokens[0] * oracle.n_vocab + r.tokens[1])
            s = r.stats
            mixed += s["drafted_at"][1] >= 1 and s["n_ngram_chained"] >= 1 and s["n_drafted"] > s["n_ngram_chained"]
    assert mixed == 500, mixed  # every first round proposed [chained token, draft-model token]
    ids, probs = joint_two_tokens(oracle, prompt, top_k)
    assert abs(sum(probs) - 1.0) < 1e-4
    assert goodness_of_fit(samples, ids, probs) > 1e-3


# ---------------------------------------------------------------------------------------------------
# 3. the knob in the front-ends
def test_table_default_and_range(pair):
    spec = next(s for s in specgen._core.param_specs() if s["name"] == "ngram_chain")
    assert spec["default"] == "4" and spec["flags"] == ["--ngram-chain"]
    for bad in (-1, 65):
        with pytest.raises(specgen.InvalidParameterError, match="ngram_chain"):
            specgen.Generator(pair[0], draft=pair[1], ngram_chain=bad, n_threads=1, n_ctx=64)


def test_cli_spellings(pair, cli, solo):
    base = [cli, "-m", pair[0], "-p", PROMPTS[0], "-n", str(N), "--temp", "0", "-t", "2", "--ignore-eos", "-c", "256",
            "--draft-p-min", "0"]
    plain = subprocess.run(base, capture_output=True, text=True, timeout=120)
    assert plain.returncode == 0, plain.stderr
    for extra, chained in ((["-md", pair[1], "--ngram-chain", "1"], "matches of 1+ tokens"),
                           (["-md", pair[1]], "matches of 4+ tokens"),  # the default
                           (["-md", pair[1], "--spec-type", "draft-simple,ngram-simple"], "matches of 4+ tokens"),
                           (["-md", pair[1], "--spec-type", "draft-simple"], None)):  # llama.cpp's draft alone
        r = subprocess.run(base + extra, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        assert r.stdout == plain.stdout
        if chained:
            assert f"ngram chained ({chained})" in r.stderr, r.stderr
        else:
            assert "ngram chained" not in r.stderr and "speculation: draft model" in r.stderr, r.stderr
        if chained == "matches of 1+ tokens":
            assert "n-gram tokens chained = " in r.stderr, r.stderr
    # llama.cpp's ngram-simple without a draft model is prompt lookup; a bad type is one line.
    r = subprocess.run(base + ["--spec-type", "ngram-simple"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout == plain.stdout and "speculation: ngram" in r.stderr, r.stderr
    r = subprocess.run(base + ["--spec-type", "draft-simple,ngram-cache"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--spec-type" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
