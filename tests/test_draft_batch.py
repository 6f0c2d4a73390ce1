"""Batched drafting with a draft model (speculative/draft_batch.h): the sequences that draft in an engine
step draft each position in ONE draft forward, and each still gets exactly what it gets alone: greedy
output token for token, a fixed seed's sample and its per-position draft counts (the draft logits are bit
for bit those of drafting alone, the sampling is the sequence's own). Tiny random Gemma 3 models made
here: the draft is the target with one layer re-drawn, so drafts are partly accepted."""
from __future__ import annotations

import numpy as np
import pytest

import specgen
import hostile_gguf as hg

PROMPTS = ["the cat", "a hat is on", "cat hat", "on the mat", "the the", "a", "hat cat on the", "is a cat"]
N = 20
# Small weights keep the tiny model's outputs varied (the fixture's default scale saturates them); its
# top draft probabilities lie around 0.02, where draft_p_min = 0.02 stops some drafts early.
SCALE = 0.001


def _tiny(path, redraw: str | None = None) -> str:
    g = hg.tiny_model(0)
    rng = np.random.default_rng(100)
    for t in g.tensors:
        if t.ttype == hg.T_Q8_0:
            n_in, n_out = t.dims
            t.data = hg.q8_0(n_out, n_in, rng, SCALE)
            if t.name.decode() == redraw:
                t.data = hg.q8_0(n_out, n_in, np.random.default_rng(7), SCALE)
    return g.write(str(path))


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    d = tmp_path_factory.mktemp("draft_batch")
    return _tiny(d / "target.gguf"), _tiny(d / "draft.gguf", redraw="blk.1.ffn_down.weight")


@pytest.fixture(scope="module")
def solo(pair):
    with specgen.Generator(pair[0], n_threads=2, n_ctx=256) as g:
        return [g.generate(p, max_tokens=N, temperature=0, ignore_eos=True).tokens for p in PROMPTS]


def _mean_batch(results) -> float:
    forwards = sum(r.stats["n_draft_forwards"] for r in results)
    return sum(r.stats["n_draft_batch_sequences"] for r in results) / forwards


@pytest.mark.parametrize("nanospec", [False, True])
def test_greedy_batches_equal_solo_and_share_draft_forwards(pair, solo, nanospec):
    # The batch policy off: every sequence drafts what its speculator wants in every step.
    with specgen.Generator(pair[0], draft=pair[1], n_threads=2, n_ctx=256, n_parallel=8, batch_draft_policy=False,
                           draft_p_min=0.0, nanospec=nanospec) as g:
        for size in (1, 3, 8):
            order = [(i * 3 + size) % len(PROMPTS) for i in range(size)]
            results = g.generate([PROMPTS[i] for i in order], max_tokens=N, temperature=0, ignore_eos=True)
            for i, r in zip(order, results):
                assert r.tokens == solo[i], (nanospec, size, PROMPTS[i])
            drafted = sum(r.stats["n_drafted"] for r in results)
            accepted = sum(r.stats["n_accepted"] for r in results)
            assert 0 < accepted < drafted  # the drafts are partly rejected: the rollback path runs
            # Every draft forward ran one sequence alone, or several at once.
            if size == 1:
                assert _mean_batch(results) == 1.0
            else:
                assert _mean_batch(results) > (1.5 if size == 3 else 3.0), size


@pytest.mark.parametrize("nanospec,p_min", [(False, 0.0), (False, 0.02), (True, 0.0)])
def test_fixed_seed_sample_and_drafts_equal_alone(pair, nanospec, p_min):
    """Sampling stays per sequence: its rng, its sampling params, its set S, its draft_p_min stops. A fixed
    seed gives the same tokens, and the same drafted / accepted counts per position, alone and batched."""
    kw = dict(max_tokens=N, temperature=0.9, top_k=40, ignore_eos=True)
    seeds = [100 + i for i in range(len(PROMPTS))]
    with specgen.Generator(pair[0], draft=pair[1], n_threads=2, n_ctx=256, n_parallel=8, batch_draft_policy=False,
                           draft_p_min=p_min, nanospec=nanospec) as g:
        alone = [g.generate(p, seed=s, **kw) for p, s in zip(PROMPTS, seeds)]
        together = g.generate(PROMPTS, seed=seeds, **kw)
        for a, t in zip(alone, together):
            assert t.tokens == a.tokens
            for key in ("drafted_at", "accepted_at", "n_drafted", "n_accepted"):
                assert t.stats[key] == a.stats[key], key
        assert _mean_batch(together) > 3.0
        assert sum(r.stats["n_drafted"] for r in together) > 0


def test_draft_forwards_are_counted_for_a_draft_model_only(pair):
    with specgen.Generator(pair[0], draft="ngram", n_threads=2, n_ctx=256, n_parallel=2) as g:
        r = g.generate(PROMPTS[0], max_tokens=4, temperature=0, ignore_eos=True)
        assert r.stats["n_draft_forwards"] == 0 and r.stats["n_draft_batch_sequences"] == 0
    with specgen.Generator(pair[0], draft=pair[1], n_threads=2, n_ctx=256, draft_p_min=0.0) as g:
        r = g.generate(PROMPTS[0], max_tokens=N, temperature=0, ignore_eos=True)
        # Alone: one draft forward per drafted token at most (a round's first also catches up its rows).
        assert 0 < r.stats["n_draft_forwards"] == r.stats["n_draft_batch_sequences"] <= r.stats["n_drafted"]


def test_a_catch_up_the_tokens_left_cannot_repay_decodes_plainly(model_path):
    """A draft model first forwards every row it has not seen (here the prompt). With 8 tokens to write
    after a ~400-token prompt that costs more than drafting can save, so the request decodes plainly
    (and identically); the same draft with a short prompt drafts."""
    plain = specgen.Generator(model_path, n_threads=2, n_ctx=1024)
    g = specgen.Generator(model_path, n_threads=2, n_ctx=1024, draft=model_path)
    long_prompt = " ".join(["The lighthouse keeper counted the ships that passed the headland."] * 30)
    assert len(g.tokenize(long_prompt)) > 4 * 8
    r = g.generate(long_prompt, max_tokens=8, temperature=0)
    assert r.stats["n_drafted"] == 0
    assert r.tokens == plain.generate(long_prompt, max_tokens=8, temperature=0).tokens
    short = g.generate("The capital of France is", max_tokens=32, temperature=0)
    assert short.stats["n_drafted"] > 0


def test_the_draft_models_rows_stay_with_the_slot_for_its_next_request(model_path):
    """A second turn that extends the first request's history finds the draft model's rows of it still
    in the slot's draft cache: it forwards only the rows after them, so with the few tokens left that made
    a cold request decode plainly (the test above) it drafts, and its tokens stay plain decoding's. The
    n-gram chain is off: on this repetitive prompt its matches would draft instead of the model."""
    plain = specgen.Generator(model_path, n_threads=2, n_ctx=1024)
    g = specgen.Generator(model_path, n_threads=2, n_ctx=1024, draft=model_path, ngram_chain=0)
    first = g.tokenize(" ".join(["The lighthouse keeper counted the ships that passed the headland."] * 15))
    r1 = g.generate(first, max_tokens=64, temperature=0, ignore_eos=True)
    assert r1.stats["n_drafted"] > 0 and r1.stats["n_draft_prompt_tokens_cached"] == 0
    second = first + r1.tokens + g.tokenize(" Then the keeper", add_bos=False)
    assert len(second) > 4 * 8
    r2 = g.generate(second, max_tokens=8, temperature=0, ignore_eos=True)
    assert r2.stats["n_prompt_tokens_cached"] > len(first)
    assert len(first) <= r2.stats["n_draft_prompt_tokens_cached"] < len(second)
    assert r2.stats["n_drafted"] > 0
    assert r2.tokens == plain.generate(second, max_tokens=8, temperature=0, ignore_eos=True).tokens
    cold = specgen.Generator(model_path, n_threads=2, n_ctx=1024, draft=model_path, ngram_chain=0)
    assert cold.generate(second, max_tokens=8, temperature=0, ignore_eos=True).stats["n_drafted"] == 0


def test_draft_threads_leave_the_tokens_unchanged(pair, solo):
    """n_threads_draft (-td) runs the draft model's forwards on fewer of the generator's threads; which
    thread computes a row never changes its value, so every sequence keeps its solo greedy output."""
    with specgen.Generator(pair[0], draft=pair[1], n_threads=2, n_threads_draft=1, n_ctx=256, n_parallel=3,
                           batch_draft_policy=False, draft_p_min=0.0) as g:
        assert g.n_threads_draft == 1
        results = g.generate(PROMPTS[:3], max_tokens=N, temperature=0, ignore_eos=True)
        assert [r.tokens for r in results] == solo[:3]
        assert sum(r.stats["n_drafted"] for r in results) > 0


@pytest.mark.parametrize("nanospec", [False, True])
def test_a_busy_slots_prefix_is_copied_with_the_drafts_rows(model_path, nanospec):
    """A request that shares a long prefix with one decoding in another slot copies that slot's rows
    (prefix reuse across slots), the draft model's and NanoSpec's top-k with them, so it prefills and
    catches up only the rest; both keep plain decoding's tokens."""
    plain = specgen.Generator(model_path, n_threads=2, n_ctx=1024)
    g = specgen.Generator(model_path, n_threads=2, n_ctx=1024, n_parallel=2, draft=model_path, ngram_chain=0,
                          nanospec=nanospec)
    shared = g.tokenize(" ".join(f"Ship {i} left the harbour at dawn with {i * 3} crates." for i in range(12)))
    a_ids = shared + g.tokenize(" The first ship", add_bos=False)
    b_ids = shared + g.tokenize(" The last ship", add_bos=False)
    a = g.generate(a_ids, max_tokens=48, temperature=0, ignore_eos=True, stream=True)
    next(a)  # a decodes: its prompt rows are committed in its slot
    b = g.generate(b_ids, max_tokens=16, temperature=0, ignore_eos=True)
    a.wait()
    assert b.stats["n_prompt_tokens_cached"] >= len(shared) - 1
    assert len(shared) // 2 <= b.stats["n_draft_prompt_tokens_cached"] <= b.stats["n_prompt_tokens_cached"]
    assert b.tokens == plain.generate(b_ids, max_tokens=16, temperature=0, ignore_eos=True).tokens
    assert a.tokens == plain.generate(a_ids, max_tokens=48, temperature=0, ignore_eos=True).tokens
