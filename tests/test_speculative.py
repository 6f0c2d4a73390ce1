"""Speculative decoding on Gemma 3 270M is lossless: greedy output is token-for-token identical to
plain decoding for every drafter, gamma and verifier, and sampled output has the same distribution
(chi-square against the exact target distribution)."""
import pytest

import specgen
from sampling_fit import first_tokens_fit, goodness_of_fit, target_distribution

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


@pytest.mark.parametrize("drafter,top_p", [("self6", 1.0), ("self6", 0.9), ("ngram", 1.0)])
def test_sampling_matches_target_distribution(model_path, gen, drafter, top_p):
    """First and second generated tokens at temperature 1 follow the exact AR distribution."""
    prompt = "My favourite colour is"
    g = specgen.Generator(model_path, n_threads=2, n_ctx=256, draft_max=4, **_drafters(model_path)[drafter])
    try:
        p_first, firsts, pairs = first_tokens_fit(g, gen, prompt, 300, top_k=0, top_p=top_p)
    finally:
        g.close()
    assert p_first > 1e-3
    # second token given the most frequent first token
    top_first = max(set(firsts), key=firsts.count)
    seconds = [b for a, b in pairs if a == top_first]
    if len(seconds) >= 50:
        ctx = gen.tokenize(prompt) + [top_first]
        assert goodness_of_fit(seconds, *target_distribution(gen, ctx, 0, top_p)) > 1e-3
