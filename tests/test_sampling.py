"""Logits processors (cpp/src/sampling) against a float64 numpy reference, the portable RNG, sampling,
and parameter validation."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from specgen import _core
from specgen.errors import InvalidParameterError

MASK64 = (1 << 64) - 1


def params(**kw):
    sp = _core.SamplingParams()
    for k, v in kw.items():
        setattr(sp, k, v)
    return sp


def reference(logits, sp, history=(), ids=None):
    """The pipeline of sampling.h in numpy: {id: prob}. Penalty and temperature in float32 as the
    C++ does (they act on float logits); softmax and truncation in float64."""
    logits = np.asarray(logits, np.float32).copy()
    ids = np.arange(len(logits)) if ids is None else np.asarray(ids)
    if sp.repeat_penalty != 1.0 and sp.repeat_last_n != 0 and len(history):
        window = history if sp.repeat_last_n < 0 else history[-sp.repeat_last_n:]
        for t in set(int(t) for t in window):
            for j in np.nonzero(ids == t)[0]:
                pen = np.float32(sp.repeat_penalty)
                logits[j] = logits[j] / pen if logits[j] > 0 else logits[j] * pen
    if sp.temperature == 0:
        best = max(range(len(ids)), key=lambda j: (logits[j], -ids[j]))
        return {int(ids[best]): 1.0}
    logits = logits / np.float32(sp.temperature)
    order = np.lexsort((ids, -logits.astype(np.float64)))  # descending logit, then ascending id
    if 0 < sp.top_k < len(ids):
        order = order[: sp.top_k]
    l = logits[order].astype(np.float64)
    e = np.exp(l - l.max())
    keep = len(e)
    if sp.top_p < 1.0:
        cum = np.cumsum(e)
        keep = int(np.argmax(cum >= np.float64(np.float32(sp.top_p)) * e.sum())) + 1
    e, sel = e[:keep], order[:keep]
    mask = e >= np.float64(np.float32(sp.min_p))
    e, sel = e[mask], sel[mask]
    return {int(ids[j]): float(v) for j, v in zip(sel, e / e.sum())}


def run(logits, sp, history=None, ids=None):
    h = None if history is None else np.asarray(history, np.int32)
    i = None if ids is None else np.asarray(ids, np.int32)
    out_ids, probs = _core.process_logits(np.asarray(logits, np.float32), sp, h, i)
    assert len(set(out_ids)) == len(out_ids)
    assert abs(sum(probs) - 1) < 1e-5
    return dict(zip(out_ids, probs)), out_ids, probs


GRID = list(itertools.product([0.5, 1.0, 1.7], [0, 1, 7, 40, 5000], [1.0, 0.9, 0.5], [0.0, 0.05, 0.3],
                              [(1.0, 64), (1.3, 8), (0.8, -1), (1.5, 0)]))


@pytest.mark.parametrize("n,subset", [(50, False), (1000, False), (300, True)])
def test_processors_match_numpy_reference(n, subset):
    rng = np.random.default_rng(n)
    for combo in [GRID[i] for i in rng.choice(len(GRID), 120, replace=False)]:
        T, k, top_p, min_p, (pen, last_n) = combo
        sp = params(temperature=T, top_k=k, top_p=top_p, min_p=min_p, repeat_penalty=pen,
                    repeat_last_n=last_n)
        logits = rng.normal(0, 3, n).astype(np.float32)
        ids = rng.choice(262144, n, replace=False) if subset else None
        vocab = ids if subset else np.arange(n)
        history = rng.choice(vocab, 100)
        got, out_ids, probs = run(logits, sp, history, ids)
        want = reference(logits, sp, history, ids)
        assert set(got) == set(want), combo
        for t, p in want.items():
            assert got[t] == pytest.approx(p, rel=1e-5, abs=1e-7), combo
        if (0 < k < n) or top_p < 1:  # sorted output: descending probability
            assert all(a >= b for a, b in zip(probs, probs[1:]))


def test_each_processor_alone():
    logits = np.array([2.0, 1.0, 0.5, 0.0, -1.0, 3.0], np.float32)
    off = dict(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0)
    soft = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
    got, _, _ = run(logits, params(**off))
    assert [got[i] for i in range(6)] == pytest.approx(soft, rel=1e-6)
    got, ids, _ = run(logits, params(**{**off, "top_k": 2}))
    assert ids == [5, 0]
    got, _, _ = run(logits, params(**{**off, "top_p": 0.7}))  # 0.61 < 0.7 <= 0.61 + 0.22
    assert set(got) == {5, 0}
    got, _, _ = run(logits, params(**{**off, "min_p": math.exp(-1.5)}))  # keeps logit >= 1.5
    assert set(got) == {5, 0}
    got, _, _ = run(logits, params(**{**off, "temperature": 0.5}))
    assert got[5] / got[0] == pytest.approx(math.exp(2.0), rel=1e-5)
    # repeat penalty: positive logits divided, negative multiplied, each distinct token once
    got, _, _ = run(logits, params(**{**off, "repeat_penalty": 2.0}), history=[5, 5, 4, 9])
    pen = logits.copy()
    pen[5], pen[4] = 1.5, -2.0
    ref = np.exp(pen - pen.max()) / np.exp(pen - pen.max()).sum()
    assert [got[i] for i in range(6)] == pytest.approx(ref, rel=1e-6)
    got, _, _ = run(logits, params(**{**off, "repeat_penalty": 2.0, "repeat_last_n": 1}), history=[5, 4])
    assert got[5] / got[0] == pytest.approx(math.exp(1.0), rel=1e-5)  # only token 4 in the window
    assert got[4] / got[0] == pytest.approx(math.exp(-4.0), rel=1e-5)


def test_greedy_is_a_point_mass_with_lowest_id_ties():
    sp = params(temperature=0.0)
    _, ids, probs = run(np.array([1, 7, 7, 3], np.float32), sp)
    assert (ids, probs) == ([1], [1.0])
    _, ids, _ = run(np.array([7, 7, 1], np.float32), sp, ids=[90, 12, 5])
    assert ids == [12]
    # greedy applies after the repeat penalty
    _, ids, _ = run(np.array([5, 4], np.float32), params(temperature=0.0, repeat_penalty=2.0), history=[0])
    assert ids == [1]


def test_masked_logits():
    got, _, _ = run(np.array([-np.inf, 0.0, 0.0], np.float32), params(top_k=0, top_p=1.0, min_p=0.0,
                                                                     temperature=1.0))
    assert got == {1: 0.5, 2: 0.5}
    with pytest.raises(InvalidParameterError, match="-inf"):
        run(np.full(3, -np.inf, np.float32), params())
    with pytest.raises(InvalidParameterError, match="NaN"):
        run(np.array([0.0, np.nan], np.float32), params())


# ---------------------------------------------------------------------------------------------------
def xoshiro_reference(seed, n):
    """xoshiro256** seeded by splitmix64, straight from the published algorithms."""
    x, s = seed, []
    for _ in range(4):
        x = (x + 0x9E3779B97F4A7C15) & MASK64
        z = x
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        s.append(z ^ (z >> 31))
    rotl = lambda v, k: ((v << k) | (v >> (64 - k))) & MASK64
    out = []
    for _ in range(n):
        out.append((rotl((s[1] * 5) & MASK64, 7) * 9) & MASK64)
        t = (s[1] << 17) & MASK64
        s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3]; s[2] ^= t
        s[3] = rotl(s[3], 45)
    return out


@pytest.mark.parametrize("seed", [0, 1, 42, 2**63 + 5])
def test_rng_is_the_portable_xoshiro_stream(seed):
    r = _core.Rng(seed)
    assert [r.next_u64() for _ in range(20)] == xoshiro_reference(seed, 20)
    r.reseed(seed)
    u = [r.uniform() for _ in range(20)]
    assert u == [(v >> 11) * 2.0**-53 for v in xoshiro_reference(seed, 20)]
    assert all(0.0 <= v < 1.0 for v in u)
    assert _core.Rng(0).next_u64() == 11091344671253066420  # pinned: a changed stream is never silent


def test_sample_token_distribution_and_reproducibility():
    ids, probs = [7, 3, 11, 0], [0.1, 0.2, 0.3, 0.4]
    r = _core.Rng(9)
    draws = [_core.sample_token(ids, probs, r) for _ in range(100_000)]
    r2 = _core.Rng(9)
    assert draws[:1000] == [_core.sample_token(ids, probs, r2) for _ in range(1000)]
    counts = np.array([draws.count(t) for t in ids])
    se = np.sqrt(np.array(probs) * (1 - np.array(probs)) / len(draws))
    assert np.all(np.abs(counts / len(draws) - probs) < 5 * se)
    assert _core.sample_token([4], [1.0], r) == 4
    with pytest.raises(InvalidParameterError):
        _core.sample_token([], [], r)


# ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("field,value", [
    ("temperature", -0.1), ("temperature", float("nan")), ("temperature", float("inf")),
    ("top_k", -1), ("top_p", 0.0), ("top_p", 1.5), ("top_p", float("nan")), ("min_p", -0.01),
    ("min_p", 1.01), ("min_p", float("nan")), ("repeat_penalty", 0.0), ("repeat_penalty", -1.0),
    ("repeat_penalty", float("nan")), ("repeat_last_n", -2),
])
def test_validation_names_the_field(field, value):
    sp = params(**{field: value})
    with pytest.raises(InvalidParameterError, match=field):
        sp.validate()
    with pytest.raises(ValueError, match=field):  # InvalidParameterError is a ValueError
        _core.process_logits(np.zeros(4, np.float32), sp)


def test_defaults_are_valid():
    sp = _core.SamplingParams()
    sp.validate()
    assert (sp.temperature, sp.top_k, sp.min_p, sp.repeat_penalty, sp.repeat_last_n) == (
        pytest.approx(0.8), 40, pytest.approx(0.05), 1.0, 64)
    assert sp.top_p == pytest.approx(0.95)
    assert not sp.greedy and params(temperature=0.0).greedy
