"""NanoSpec's in-context draft vocabulary and FR-Spec's static one (docs/ALGORITHMS.md section 3).

1. The set S (specgen._testing.NanoSpecVocab over Gemma 3 270M's head): prefill content, growth order,
   capacity (a full set stops adding, never drops), reset per request, the incremental gather equals
   gathering from scratch byte for byte, and the sparse head's logits equal the full head's at the same
   ids bit for bit.
2. Losslessness: the C++ verifier with proposals that miss part of p's support (q_S) keeps the
   target's joint (Monte Carlo vs exact), and on the real model greedy output is identical to AR for
   the self drafter (all layers: the hidden-state reuse shortcut; 6 layers) and the model drafter with
   NanoSpec, and with FR-Spec; sampling at temperature 1 follows the target (chi-square).
"""
import numpy as np
import pytest

import specgen
import specgen.verify as sv
from specgen import _core, _testing

from sampling_fit import first_tokens_fit, goodness_of_fit, joint_two_tokens

PROMPT = "The history of the printing press begins"
N_TOKENS = 24


@pytest.fixture(scope="module")
def vocab(gen):
    return _testing.NanoSpecVocab(gen._core, 3072)


def _topk_rows(gen, ids, k=3):
    lg = gen.logits(ids)
    return lg, np.array([_testing.top_ids(np.ascontiguousarray(r), k) for r in lg], np.int32)


# ---------------------------------------------------------------------------------------------------
# 1. the set
@pytest.mark.parametrize("k", [1, 3, 16, 64, 100])
def test_top_ids_matches_numpy(k):
    rng = np.random.default_rng(k)
    x = rng.standard_normal(5000).astype(np.float32)
    x[[5, 17]] = 9.0  # a tie: the lower id ranks first
    x[rng.integers(0, 5000, 50)] = 0.5  # more ties inside the top k
    assert _testing.top_ids(x, k) == [int(i) for i in np.argsort(-x, kind="stable")[:k]]
    with pytest.raises(specgen.InvalidParameterError):
        _testing.top_ids(x[:4], 5)


@pytest.fixture(scope="module")
def seed_ids(model_path):
    """The ids the engine's prompt seed ranks its top-k over (speculative/draft_vocab.h)."""
    g = specgen.Generator(model_path, n_threads=1, n_ctx=64, draft="self", nanospec=True)
    try:
        return np.array(g._core.seed_ids, np.int32)
    finally:
        g.close()


def _seed_topk(gen, seed_ids, ids, k):
    """The engine's prompt seed: the target's top-k over the seed ids, ties to the id ranked first."""
    lg = gen.logits(ids)[:, seed_ids]
    return seed_ids[np.argsort(-lg, axis=1, kind="stable")[:, :k]]


def test_seed_ids_rank_the_vocabulary(gen, model_path, seed_ids):
    """16384 ids ranked from the vocabulary alone: the end-of-generation ids, the one-byte tokens (Gemma 3
    lists its ASCII letters last, at 236743 and up), then the other text tokens by id; no control ids
    besides the end-of-generation ones."""
    import gguf

    field = gguf.GGUFReader(model_path).fields["tokenizer.ggml.token_type"]
    types = np.array([field.parts[i][0] for i in field.data])
    text = np.isin(types, [1, 4, 6])  # normal, user-defined, byte
    eog = [int(i) for i in seed_ids[:8] if gen._core.is_eog(int(i))]
    one_byte = [i for i in np.flatnonzero(text) if len(gen._core.token_bytes(int(i))) == 1]
    expected = list(dict.fromkeys(eog + one_byte + np.flatnonzero(text).tolist()))[:16384]
    assert len(eog) >= 2 and 106 in eog  # <eos> and <end_of_turn>
    assert ord("e") in [gen._core.token_bytes(int(i))[0] for i in one_byte]
    assert seed_ids.tolist() == expected


@pytest.mark.parametrize("k", [3, 16])
def test_prefill_content_and_order(gen, seed_ids, k):
    vocab = _testing.NanoSpecVocab(gen._core, 3072, top_k=k)
    ids = gen.tokenize(PROMPT)
    topk = _seed_topk(gen, seed_ids, ids, k)
    vocab.seed(np.array(ids, np.int32), topk[:-1])  # the engine's prefill computes all rows but the last
    got = vocab.ids
    expected = list(dict.fromkeys(ids + [int(t) for rank in range(k) for t in topk[:-1, rank]]))
    assert got == expected
    # the engine seeds the same set: a request that generates nothing reports |S|
    g = specgen.Generator(gen.model_path, n_threads=1, n_ctx=256, draft="self", nanospec=True, nanospec_topk=k)
    try:
        assert g.generate(PROMPT, max_tokens=0).stats["vocab_set_size"] == len(expected)
    finally:
        g.close()
    with pytest.raises(specgen.InvalidParameterError):
        vocab.seed(np.array(ids, np.int32), topk[:-1, :2].copy())  # rows of the wrong width


def test_prefill_seed_over_frequent_ids_keeps_most_of_the_full_top_k(gen, seed_ids):
    # The seed head trades the ids outside the 16384 ranked first for a sixteenth of the head's cost;
    # on this prompt most of every row's top-16 is among them (measured 0.86-0.93 over the bench sets).
    ids = gen.tokenize(PROMPT)
    full = _topk_rows(gen, ids, 16)[1]
    frequent = _seed_topk(gen, seed_ids, ids, 16)
    overlap = np.mean([len(set(a) & set(b)) / 16 for a, b in zip(full, frequent)])
    assert 0.7 < overlap < 1.0, overlap


def test_small_vocabulary_seeds_over_the_full_head(tmp_path):
    """A vocabulary under twice the seed's 16384 ids (here ~300) has no seed head: the full head ranks
    the prompt rows' top-k, and the request's S is exactly the prompt ids plus those."""
    from hostile_gguf import tiny_model

    path = tiny_model().write(str(tmp_path / "tiny.gguf"))
    plain = specgen.Generator(path, n_threads=1, n_ctx=128)
    g = specgen.Generator(path, n_threads=1, n_ctx=128, draft="self", nanospec=True, nanospec_topk=3)
    try:
        assert g._core.seed_ids == []
        ids = plain.tokenize("abc dog cat")
        topk = _topk_rows(plain, ids, 3)[1]
        expected = set(ids) | set(int(t) for t in topk[:-1].ravel())
        assert g.generate(ids, max_tokens=0).stats["vocab_set_size"] == len(expected)
    finally:
        g.close()
        plain.close()


def test_growth_order_and_no_duplicates(vocab):
    vocab.reset()
    vocab.add_many(np.array([1, 2, 3], np.int32))
    top3 = np.array([[10, 11, 12], [20, 2, 21]], np.int32)
    vocab.grow(top3.ravel(), emitted=np.array([30, 31], np.int32), drafted=np.array([30, 40, 3], np.int32))
    # argmax of each row, emitted, drafted, then ranks 2-3 row by row
    assert vocab.ids == [1, 2, 3, 10, 20, 30, 31, 40, 11, 12, 21]
    assert 40 in vocab and 99 not in vocab


def test_capacity_stops_adding_and_never_drops(gen):
    v = _testing.NanoSpecVocab(gen._core, 16)
    v.add_many(np.arange(10, dtype=np.int32))
    first = v.ids
    v.add_many(np.arange(100, 120, dtype=np.int32))
    assert v.size == 16 and v.full
    assert v.ids[:10] == first and v.ids[10:] == list(range(100, 106))
    assert v.add(5000) == 0 and 5000 not in v
    v.reset()
    assert v.size == 0 and not v.full and 0 not in v
    with pytest.raises(specgen.InvalidParameterError):
        v.add(gen.n_vocab)


def test_reset_per_request(model_path):
    g = specgen.Generator(model_path, n_threads=1, n_ctx=512, draft="self", nanospec=True, nanospec_topk=3)
    try:
        long = g.generate(PROMPT + " and continues through the centuries of European history", max_tokens=8,
                          temperature=0).stats["vocab_set_size"]
        short = g.generate("Hi", max_tokens=0).stats["vocab_set_size"]
        assert 0 < short < long
        assert short <= 2 + 3 * 1  # BOS + "Hi" and the top-3 of one row
    finally:
        g.close()


def test_incremental_gather_equals_gather_from_scratch(gen):
    rng = np.random.default_rng(1)
    batches = [rng.integers(0, gen.n_vocab, size=n).astype(np.int32) for n in (5, 40, 1, 300)]
    inc = _testing.NanoSpecVocab(gen._core, 3072)
    for b in batches:
        inc.add_many(b)
    scratch = _testing.NanoSpecVocab(gen._core, 3072)
    scratch.add_many(np.array(inc.ids, np.int32))
    assert inc.ids == scratch.ids
    assert inc.gathered() == scratch.gathered() == inc.head_rows(np.array(inc.ids, np.int32))


def test_sparse_head_logits_equal_full_head_bit_for_bit(gen, vocab):
    ids = gen.tokenize(PROMPT)
    full = gen.logits(ids)  # the engine's evaluator on 2 threads
    vocab.reset()
    vocab.add_many(np.random.default_rng(2).permutation(gen.n_vocab)[:1000].astype(np.int32))
    vocab.add_many(np.array(ids, np.int32))
    h = vocab.hidden(ids)  # a separate evaluator on 1 thread
    sparse = vocab.logits(h)
    assert sparse.shape == (len(ids), vocab.size)
    np.testing.assert_array_equal(sparse, full[:, vocab.ids])


def test_frspec_table_shipped_and_checked(gen):
    from specgen.generator import default_frspec_table

    ids = _testing.read_frspec_table(default_frspec_table(), gen.n_vocab, 32768)
    assert len(ids) == len(set(ids)) == 32768 and all(0 <= i < gen.n_vocab for i in ids)
    assert gen.tokenize(" the", add_bos=False)[0] in ids[:300]
    with pytest.raises(specgen.InvalidParameterError):
        _testing.read_frspec_table(default_frspec_table(), 1000, 10)  # another vocabulary
    with pytest.raises(specgen.InvalidParameterError):
        _testing.read_frspec_table(default_frspec_table(), gen.n_vocab, 1 << 20)  # too few ids


def test_option_errors(model_path):
    with pytest.raises(specgen.InvalidParameterError):
        specgen.Generator(model_path, n_ctx=64, draft="ngram", nanospec=True)
    with pytest.raises(specgen.InvalidParameterError):
        specgen.Generator(model_path, n_ctx=64, draft="self", nanospec=True, frspec=100)
    for bad in (0, 65):
        with pytest.raises(specgen.InvalidParameterError, match="nanospec_topk"):
            specgen.Generator(model_path, n_ctx=64, draft="self", nanospec=True, nanospec_topk=bad)


# ---------------------------------------------------------------------------------------------------
# 2. losslessness
@pytest.mark.parametrize("method", ["token", "block"])
def test_verifier_lossless_with_q_over_a_subset(method):
    """q_S: every draft row is a distribution over the same strict subset S of the vocabulary (p has
    mass outside it, and a target favourite is missing). The C++ verifier's emitted tokens follow the
    exact round distribution, and completed sequences the target's joint (chi-square at 1e-6)."""
    from test_verify import chi2_test, exact_round, random_tree, target_joint

    rng = np.random.default_rng(3)
    V, g = 4, 3
    P = random_tree(rng, V, g + 1)
    Q = random_tree(rng, V, g)
    S = np.array([0, 2])  # token 1 and 3 never proposed
    Q[:, [1, 3]] = 0.0
    Q /= Q.sum(axis=1, keepdims=True)
    P[:, 3] += 2.0  # the target's favourite lies outside S
    P /= P.sum(axis=1, keepdims=True)
    assert (P[:, [1, 3]].sum(axis=1) > 0.3).all() and set(np.flatnonzero(Q.sum(axis=0))) == set(S)
    sim = sv.simulate(method, P, Q, g, 200_000, seed=4)
    stat, thr = chi2_test(sim["emitted"], exact_round(method, P, Q, V, g))
    assert stat < thr
    stat, thr = chi2_test(sim["completed"], target_joint(P, V, g))
    assert stat < thr


@pytest.fixture(scope="module")
def ar_tokens(gen):
    return gen.generate(PROMPT, max_tokens=N_TOKENS, temperature=0).tokens


@pytest.mark.parametrize("case", ["self_all", "self_all_no_reuse", "self_all_top16", "self_all_top16_pmin", "self6",
                                  "model", "frspec_self", "frspec_model"])
def test_greedy_identity(model_path, ar_tokens, case):
    kw = {
        "self_all": dict(draft="self", nanospec=True),
        "self_all_no_reuse": dict(draft="self", nanospec=True, reuse_draft_hidden=False),
        "self_all_top16": dict(draft="self", nanospec=True, nanospec_topk=16),
        "self_all_top16_pmin": dict(draft="self", nanospec=True, nanospec_topk=16, draft_p_min=0.4),
        "self6": dict(draft="self", self_layers=6, nanospec=True),
        "model": dict(draft=model_path, nanospec=True, nanospec_capacity=16),
        "frspec_self": dict(draft="self", frspec=32768),
        "frspec_model": dict(draft=model_path, frspec=2048),
    }[case]
    g = specgen.Generator(model_path, n_threads=1, n_ctx=256, draft_max=4, **kw)
    try:
        r = g.generate(PROMPT, max_tokens=N_TOKENS, temperature=0)
        assert r.tokens == ar_tokens, case
        s = r.stats
        assert s["n_rounds"] > 0 and s["n_drafted"] > 0 and 0 < s["vocab_set_size"]
        assert 0 < s["draft_head_seconds"] <= s["draft_seconds"]
        if case == "model":
            assert s["vocab_set_size"] == 16  # the capacity was reached and kept
    finally:
        g.close()


def test_hidden_reuse_is_bit_identical_when_sampling(model_path):
    """At temperature 1 the same seed gives the same tokens with and without the all-layers shortcut:
    every target row p_i is bit-identical (one rounding difference would change the draws)."""
    outs = []
    for reuse in (True, False):
        g = specgen.Generator(model_path, n_threads=1, n_ctx=256, draft="self", nanospec=True, draft_max=4,
                              reuse_draft_hidden=reuse)
        try:
            outs.append([g.generate(PROMPT, max_tokens=12, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0,
                                    seed=s).tokens for s in range(2)])
        finally:
            g.close()
    assert outs[0] == outs[1]


def test_sampling_matches_target_distribution(model_path, gen):
    """First generated token at temperature 1 (top_k 40) follows the exact AR distribution although
    q_S is zero outside S. draft_p_min 0: every round drafts (its automatic value would often stop
    before this prompt's uncertain first token)."""
    prompt = "My favourite colour is"
    g = specgen.Generator(model_path, n_threads=1, n_ctx=128, draft="self", nanospec=True, draft_max=1,
                          draft_p_min=0)
    try:
        p_first, _, _ = first_tokens_fit(g, gen, prompt, 300, top_k=40, top_p=1.0)
    finally:
        g.close()
    assert p_first > 1e-3


def test_draft_p_min_is_automatic_with_nanospec(model_path):
    """draft_p_min defaults to -1: 0.5 with a NanoSpec head (its measured best), off for other heads.
    At temperature 1 the NanoSpec drafter then stops before uncertain positions and drafts fewer tokens
    than with draft_p_min 0; the full-head self drafter drafts as many as with 0."""
    assert _core.GeneratorParams().draft_p_min == -1.0
    drafted = {}
    for name, kw in (("ns", dict(nanospec=True)), ("ns_off", dict(nanospec=True, draft_p_min=0)),
                     ("full", dict()), ("full_off", dict(draft_p_min=0))):
        g = specgen.Generator(model_path, n_threads=1, n_ctx=256, draft="self", draft_max=4, **kw)
        try:
            drafted[name] = sum(g.generate(PROMPT, max_tokens=24, temperature=1.0, seed=s).stats["n_drafted"]
                                for s in range(3))
        finally:
            g.close()
    assert 0 < drafted["ns"] < drafted["ns_off"], drafted
    assert drafted["full"] == drafted["full_off"], drafted
    with pytest.raises(specgen.errors.InvalidParameterError, match="draft_p_min"):
        specgen.Generator(model_path, n_ctx=64, draft="self", nanospec=True, draft_p_min=-0.5)


def test_sampling_with_draft_stops_matches_target(model_path, gen):
    """Block verification of drafts whose length the drafter chose from its own tokens (the automatic
    draft_p_min stops before an uncertain position) keeps the target's joint of the first two tokens
    (chi-square). On this prompt the first position is near certain and the second's certainty
    depends on the first token drawn, so some first rounds draft two tokens and others stop after one."""
    prompt = "1, 2, 3, 4,"
    top_k = 6
    g = specgen.Generator(model_path, n_threads=1, n_ctx=128, draft="self", nanospec=True, draft_max=2)
    samples, lengths = [], set()
    try:
        for seed in range(400):
            r = g.generate(prompt, max_tokens=3, temperature=1.0, top_k=top_k, top_p=1.0, min_p=0.0, seed=seed)
            assert len(r.tokens) == 3
            samples.append(r.tokens[0] * gen.n_vocab + r.tokens[1])
            lengths.add(r.stats["n_drafted"])
    finally:
        g.close()
    assert len(lengths) >= 2 and max(lengths) >= 2, lengths
    ids, probs = joint_two_tokens(gen, prompt, top_k)
    assert goodness_of_fit(samples, ids, probs) > 1e-3


def test_a_chats_next_turn_reuses_the_answers_rows(model_path):
    """The slot keeps the top-k of the rows a request emitted as it does its prompt's, so the next turn
    (history + a new message) reuses every cached row, answer included, and still seeds S with the
    target's top-k of its last rows; its output stays plain decoding's."""
    g = specgen.Generator(model_path, n_threads=1, n_ctx=512, draft="self", nanospec=True, nanospec_topk=3)
    plain = specgen.Generator(model_path, n_threads=1, n_ctx=512)
    try:
        r1 = g.generate(PROMPT, max_tokens=24, temperature=0, ignore_eos=True)
        second = g.tokenize(PROMPT) + r1.tokens + g.tokenize(" Later,", add_bos=False)
        seeded = g.generate(second, max_tokens=0).stats
        assert seeded["n_prompt_tokens_cached"] >= len(g.tokenize(PROMPT)) + len(r1.tokens) - 1
        assert seeded["vocab_set_size"] > len(set(second)) + 3  # top-k ids beyond the prompt's own
        r2 = g.generate(second, max_tokens=8, temperature=0, ignore_eos=True)
        assert r2.stats["n_prompt_tokens_cached"] == len(second) - 1 and r2.stats["n_drafted"] > 0
        assert r2.tokens == plain.generate(second, max_tokens=8, temperature=0, ignore_eos=True).tokens
    finally:
        g.close()
        plain.close()


def test_a_reused_row_whose_top_k_never_ran_seeds_nothing(model_path, gen, seed_ids):
    """The slot keeps a top-k for every prompt row, but only the last 64 of a prompt have one computed.
    A later request that reuses rows before those (a shorter prompt sharing their prefix) seeds S from
    the prompt ids and the top-k of the rows it computes: the rows without one add nothing (they once
    added id 0, a token no row proposed)."""
    text = " ".join(f"Chapter {i} tells of the {w} and the harbour it sheltered." for i, w in
                    enumerate(["river", "mill", "bridge", "market", "tower", "ferry", "church", "quay", "forge",
                               "school", "granary", "lighthouse", "abbey", "canal", "shipyard"]))
    first = gen.tokenize(text)
    assert len(first) > 150
    g = specgen.Generator(model_path, n_threads=1, n_ctx=512, draft="self", nanospec=True, nanospec_topk=3)
    try:
        g.generate(first, max_tokens=0)
        # The first request computed the top-k of rows >= len(first) - 1 - 64 only.
        second = first[:100] + gen.tokenize(" Then the river froze, and the town walked across it to the far bank.",
                                            add_bos=False)
        stats = g.generate(second, max_tokens=0).stats
    finally:
        g.close()
    cached = stats["n_prompt_tokens_cached"]
    rows = len(second) - 1                     # the prompt rows the prefill forwards
    seeded_from = max(0, rows - 64)
    assert seeded_from < cached < len(first) - 1 - 64, (seeded_from, cached)  # reused rows without a top-k
    topk = _seed_topk(gen, seed_ids, second, 3)
    expected = set(second) | {int(t) for t in topk[cached:rows].ravel()}
    assert 0 not in expected
    assert stats["vocab_set_size"] == len(expected)
