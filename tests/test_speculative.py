"""Speculative decoding on Gemma 3 270M is lossless: greedy output is token-for-token identical to
plain decoding for every drafter, gamma and verifier, and sampled output has the same distribution
(chi-square against the exact target distribution)."""
import numpy as np
import pytest

import specgen
from specgen import _core

PROMPTS = [
    # copy/edit: n-gram drafts fire
    "Copy the sentence exactly: The quick brown fox jumps over the lazy dog near the river bank.\n"
    "Copy: The quick brown fox jumps over the lazy dog near the river bank.\nCopy:",
    # free text
    "The history of the printing press begins",
]
N_TOKENS = 32


@pytest.fixture(scope="module")
def ar_outputs(gen):
    return {p: gen.generate(p, max_tokens=N_TOKENS, temperature=0).tokens for p in PROMPTS}


def _drafters(model_path):
    # "model" uses the reference model itself as a separate draft GGUF: no smaller model shares
    # Gemma 3's tokenizer, and the path through a second file, cache and rollback is what is tested.
    return {"ngram": dict(draft="ngram"), "self": dict(draft="self"), "self6": dict(draft="self", self_layers=6),
            "model": dict(draft=model_path)}


@pytest.mark.parametrize("drafter", ["ngram", "self", "self6", "model"])
@pytest.mark.parametrize("verify", ["token", "block"])
def test_greedy_identity(model_path, ar_outputs, drafter, verify):
    for gamma in (1, 4, 8):
        # a fixed gamma, so every configuration is exercised as named
        g = specgen.Generator(model_path, n_threads=2, n_ctx=512, verify=verify, draft_max=gamma,
                              draft_adaptive=False, **_drafters(model_path)[drafter])
        try:
            for p in PROMPTS:
                r = g.generate(p, max_tokens=N_TOKENS, temperature=0)
                assert r.tokens == ar_outputs[p], f"{drafter}/{verify}/gamma={gamma} differs on {p[:30]!r}"
                s = r.stats
                assert s["n_rounds"] > 0 and s["n_drafted"] >= s["n_accepted"] >= 0
                assert len(s["drafted_at"]) <= gamma
        finally:
            g.close()


def test_ngram_drafts_are_accepted_on_copy_prompt(model_path):
    g = specgen.Generator(model_path, n_threads=2, n_ctx=512, draft="ngram", draft_max=8)
    r = g.generate(PROMPTS[0], max_tokens=N_TOKENS, temperature=0)
    s = r.stats
    assert s["n_accepted"] > 0
    assert s["mean_accepted_length"] == pytest.approx(1 + s["n_accepted"] / s["n_rounds"])
    # every generated token is either accepted or one per round (correction/bonus)
    assert s["n_generated"] <= s["n_accepted"] + s["n_rounds"]


def _chi2_sf(x, k):
    """Survival function of the chi-square distribution (regularized upper gamma), no scipy needed."""
    import math

    # series for the lower regularized gamma P(k/2, x/2)
    a, z = k / 2.0, x / 2.0
    if z <= 0:
        return 1.0
    term = 1.0 / a
    total = term
    for n in range(1, 10000):
        term *= z / (a + n)
        total += term
        if term < total * 1e-15:
            break
    lower = math.exp(-z + a * math.log(z) - math.lgamma(a)) * total
    return max(0.0, 1.0 - lower)


def _goodness_of_fit(samples, ids, probs):
    counts = {}
    for t in samples:
        counts[t] = counts.get(t, 0) + 1
    n = len(samples)
    expected = dict(zip(ids, probs))
    unseen_mass = [t for t in counts if t not in expected]
    assert not unseen_mass, f"sampled tokens outside the target's support: {unseen_mass}"
    # pool small categories so every expected count is >= 5
    cats, pooled_obs, pooled_exp = [], 0, 0.0
    for t, pr in sorted(expected.items(), key=lambda kv: -kv[1]):
        if pr * n >= 5:
            cats.append((counts.get(t, 0), pr * n))
        else:
            pooled_obs += counts.get(t, 0)
            pooled_exp += pr * n
    if pooled_exp > 0:
        cats.append((pooled_obs, pooled_exp))
    stat = sum((o - e) ** 2 / e for o, e in cats)
    return _chi2_sf(stat, max(1, len(cats) - 1))


@pytest.mark.parametrize("drafter,top_p", [("self6", 1.0), ("self6", 0.9), ("ngram", 1.0)])
def test_sampling_matches_target_distribution(model_path, gen, drafter, top_p):
    """First and second generated tokens at temperature 1 follow the exact AR distribution."""
    prompt = "My favourite colour is"
    g = specgen.Generator(model_path, n_threads=2, n_ctx=256, draft_max=4, **_drafters(model_path)[drafter])
    n = 300
    firsts, pairs = [], []
    try:
        for seed in range(n):
            r = g.generate(prompt, max_tokens=2, temperature=1.0, top_k=0, top_p=top_p, min_p=0.0, seed=seed)
            assert len(r.tokens) >= 1
            firsts.append(r.tokens[0])
            if len(r.tokens) == 2:
                pairs.append(tuple(r.tokens))
    finally:
        g.close()
    sp = _core.SamplingParams()
    sp.temperature, sp.top_k, sp.top_p, sp.min_p = 1.0, 0, top_p, 0.0
    ids = gen.tokenize(prompt)
    ids_p, probs_p = _core.process_logits(gen.logits(ids)[-1], sp, np.array(ids, dtype=np.int32))
    assert _goodness_of_fit(firsts, list(ids_p), list(probs_p)) > 1e-3
    # second token given the most frequent first token
    top_first = max(set(firsts), key=firsts.count)
    seconds = [b for a, b in pairs if a == top_first]
    if len(seconds) >= 50:
        ctx = ids + [top_first]
        ids2, probs2 = _core.process_logits(gen.logits(ctx)[-1], sp, np.array(ctx, dtype=np.int32))
        assert _goodness_of_fit(seconds, list(ids2), list(probs2)) > 1e-3
