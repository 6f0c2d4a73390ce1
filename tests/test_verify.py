"""The verifiers are lossless (docs/ALGORITHMS.md sections 1 and 2), and the test can tell when one is not.

Toy "models": a target p and a drafter q given as a distribution for EVERY prefix over a vocabulary of
3-4 tokens, gamma 3-4 (the tree layout of specgen.verify.simulate). Two layers of proof:

1. `exact_round` is a tiny exact enumerator that mirrors docs/ALGORITHMS.md line by line. It shows that the
   token-wise and capped block rules are lossless to 1e-12, that the uncapped rule of the official HSD
   code is not (errors ~1e-3..1e-2), and that block's expected accepted length is >= token-wise.
2. The thing under test is the C++ verifier: `specgen.verify.simulate` runs 10^6 rounds in C++ (drafts
   sampled from q by the engine's sampler) and the counts are compared with chi-square tests, at a
   false-failure rate of 1e-6 per test (threshold derived from the multinomial's standard error via
   the chi-square distribution), against (a) the exact enumerator's distribution of the emitted tokens
   and (b) the target's autoregressive joint of the first gamma+1 tokens, where each round's emitted
   tokens are completed by sampling the target (losslessness means exactly that this completion is
   distributed as plain autoregressive sampling). The uncapped variant must FAIL (b).
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import specgen.verify as sv
from specgen.errors import InvalidParameterError


# ---------------------------------------------------------------------------------------------------
# toy models
def off(V: int, l: int) -> int:
    """Row of the first prefix of length l."""
    return (V**l - 1) // (V - 1)


def node(V: int, prefix) -> int:
    idx = 0
    for t in prefix:
        idx = idx * V + t
    return off(V, len(prefix)) + idx


def random_tree(rng, V, depth, conc=1.0):
    """Dirichlet rows for every prefix of length 0..depth-1: [off(depth), V]."""
    return rng.dirichlet(np.full(V, conc), size=off(V, depth)).astype(np.float32)


def point_mass_tree(rng, V, depth):
    t = np.zeros((off(V, depth), V), np.float32)
    t[np.arange(len(t)), rng.integers(0, V, len(t))] = 1.0
    return t


def sparse_tree(rng, V, depth):
    """NanoSpec-like: each row keeps a random non-empty subset of the vocabulary (renormalised)."""
    t = random_tree(rng, V, depth)
    for row in t:
        keep = rng.permutation(V)[: rng.integers(1, V)]  # 1..V-1 ids: always misses part of p
        mask = np.zeros(V, bool)
        mask[keep] = True
        row[~mask] = 0
        row /= row.sum()
    return t


def greedy_tree(rng, V, depth):
    """Temperature 0: the argmax of random logits as a point mass."""
    return point_mass_tree(rng, V, depth)


def truncated_tree(rng, V, depth):
    """A target after top-k: every row has zeros (k = V - 1 or V - 2)."""
    t = random_tree(rng, V, depth)
    for row in t:
        row[np.argsort(row)[: rng.integers(1, V - 1)]] = 0
        row /= row.sum()
    return t


def f32(t):
    """The probabilities as the C++ sees them (float32), renormalised in float64 (the C++ sampler
    scales by the stored total, and the verifier's ratios are scale-free up to float rounding)."""
    t = np.asarray(t, np.float32).astype(np.float64)
    return t / t.sum(axis=-1, keepdims=True)


# ---------------------------------------------------------------------------------------------------
# exact enumerator mirroring docs/ALGORITHMS.md (reference for the C++ verifier; not the thing under test)
def exact_round(method, P, Q, V, g):
    """Exact distribution of the emitted sequence (x_1..x_k, y), as an array over rows 1..off(g+2)-1."""
    P, Q = f32(P), f32(Q)
    E = np.zeros(off(V, g + 2) - 1)
    for x in itertools.product(range(V), repeat=g):
        ps = [P[node(V, x[:i])] for i in range(g + 1)]
        qs = [Q[node(V, x[:i])] for i in range(g)]
        qx = [qs[i][x[i]] for i in range(g)]
        prob_draft = math.prod(qx)
        if prob_draft == 0:
            continue
        px = [ps[i][x[i]] for i in range(g)]
        for (k, w) in _round_outcomes(method, ps, qs, px, qx, g):
            for y in range(V):
                if w[y] > 0:
                    E[node(V, x[:k] + (y,)) - 1] += prob_draft * w[y]
    return E


def _residual(a, b):
    d = np.maximum(a - b, 0.0)
    return d / d.sum() if d.sum() > 0 else None


def _round_outcomes(method, ps, qs, px, qx, g):
    """Yields (k, weight vector over y) for one fixed draft: P(n_accepted = k, next = y | draft)."""
    if method == "token":
        reach = 1.0
        for i in range(g):
            acc = min(1.0, px[i] / qx[i])
            if acc < 1:
                yield i, reach * (1 - acc) * _residual(ps[i], qs[i])
            reach *= acc
        yield g, reach * ps[g]
        return
    # block: r_k, M_k, rho_k = r_k / M_k
    r = [1.0]
    for i in range(g):
        r.append(r[-1] * px[i] / qx[i])
    M = list(itertools.accumulate([max(1.0, v) for v in r], max))
    acc = min(1.0, r[g] / M[g - 1]) if method == "block" else min(1.0, r[g])
    yield g, acc * ps[g]
    reach = 1 - acc
    for k in range(g - 1, -1, -1):
        a, b = (r[k] / M[k]) * ps[k], qs[k]
        dp, dm = np.maximum(a - b, 0).sum(), np.maximum(b - a, 0).sum()
        h = 1.0 if k == 0 else (dp / max(dp, dm) if dp > 0 else 0.0)
        if h > 0 and dp > 0:
            yield k, reach * h * _residual(a, b)
        elif h > 0:  # h_0 = 1 with p_1 == q_1: the scan gets here with probability 0
            assert reach < 1e-12
        reach *= 1 - h


def target_joint(P, V, g):
    """The target's autoregressive joint of gamma+1 tokens: [V^(g+1)]."""
    P = f32(P)
    J = np.zeros(V ** (g + 1))
    for z in itertools.product(range(V), repeat=g + 1):
        J[node(V, z) - off(V, g + 1)] = math.prod(P[node(V, z[:i])][z[i]] for i in range(g + 1))
    return J


def complete(E, P, V, g):
    """Distribution of the emitted tokens completed by sampling the target to gamma+1 tokens."""
    P = f32(P)
    C = np.zeros(V ** (g + 1))
    for z in itertools.product(range(V), repeat=g + 1):
        for l in range(1, g + 2):
            e = E[node(V, z[:l]) - 1]
            if e:
                C[node(V, z) - off(V, g + 1)] += e * math.prod(
                    P[node(V, z[:i])][z[i]] for i in range(l, g + 1))
    return C


def mean_accepted(E, V, g):
    lengths = np.concatenate([np.full(V**l, l - 1) for l in range(1, g + 2)])
    return float(E @ lengths)


# ---------------------------------------------------------------------------------------------------
# statistics
def chi2_quantile(df: int, z: float = 4.753) -> float:
    """Upper quantile of chi-square(df) at the normal quantile z (Wilson-Hilferty; z = 4.753 is a
    one-sided tail of 1e-6). Accurate to a few percent for df >= 1, which is all a 1e-6 test needs."""
    c = 2.0 / (9.0 * df)
    return df * (1.0 - c + z * math.sqrt(c)) ** 3


def chi2_test(counts, probs, min_expected=5.0):
    """Pearson chi-square of multinomial counts against probs, pooling cells with expected < 5.

    Returns (statistic, threshold at false-failure rate 1e-6). An observed count in a cell of
    probability 0 is an impossible outcome: statistic = inf.
    """
    counts = np.asarray(counts, np.float64)
    n = counts.sum()
    expected = n * np.asarray(probs, np.float64)
    if np.any(counts[expected <= 1e-12 * n] > 0):
        return math.inf, 0.0
    big = expected >= min_expected
    stat = float((((counts - expected) ** 2)[big] / expected[big]).sum())
    cells = int(big.sum())
    rest_e, rest_o = expected[~big].sum(), counts[~big].sum()
    if rest_e > 1e-12 * n:
        stat += (rest_o - rest_e) ** 2 / rest_e
        cells += 1
    return stat, chi2_quantile(max(cells - 1, 1))


N_DRAWS = 10**6
CONFIGS = [(3, 3), (4, 4), (3, 4), (4, 3)]
PROPOSALS = {
    "full": lambda rng, V, g: random_tree(rng, V, g),
    "point_mass": point_mass_tree,
    "sparse": sparse_tree,
}


def make_case(V, g, q_kind, p_kind="full", seed=0):
    rng = np.random.default_rng(1000 * V + 100 * g + seed)
    P = truncated_tree(rng, V, g + 1) if p_kind == "truncated" else random_tree(rng, V, g + 1)
    return P, PROPOSALS[q_kind](rng, V, g)


CASES = [(V, g, qk, "full") for V, g in CONFIGS for qk in PROPOSALS] + [
    (V, g, "full", "truncated") for V, g in CONFIGS[:2]] + [(3, 4, "sparse", "truncated")]
CASE_IDS = [f"V{V}-g{g}-q_{qk}-p_{pk}" for V, g, qk, pk in CASES]


# ---------------------------------------------------------------------------------------------------
# 1. the spec itself, exactly
@pytest.mark.parametrize("V,g,q_kind,p_kind", CASES, ids=CASE_IDS)
def test_exact_spec_lossless_and_block_not_shorter(V, g, q_kind, p_kind):
    P, Q = make_case(V, g, q_kind, p_kind)
    J = target_joint(P, V, g)
    E = {m: exact_round(m, P, Q, V, g) for m in ("token", "block", "block_uncapped")}
    for m in ("token", "block"):
        assert abs(E[m].sum() - 1) < 1e-12
        assert np.abs(complete(E[m], P, V, g) - J).max() < 1e-12, m
    assert mean_accepted(E["block"], V, g) >= mean_accepted(E["token"], V, g) - 1e-12
    err_uncapped = np.abs(complete(E["block_uncapped"], P, V, g) - J).max()
    if q_kind == "point_mass":
        # q(x) = 1 makes every r_k <= 1, so the cap M_k is 1 and both variants coincide.
        assert err_uncapped < 1e-12
    elif q_kind == "full" and p_kind == "full":
        assert err_uncapped > 1e-3  # the official code's lossy rule (docs/ALGORITHMS.md: ~5e-3)


# ---------------------------------------------------------------------------------------------------
# 2. the C++ verifier, by Monte Carlo
@pytest.mark.parametrize("method", ["token", "block"])
@pytest.mark.parametrize("V,g,q_kind,p_kind", CASES, ids=CASE_IDS)
def test_cpp_verifier_is_lossless(method, V, g, q_kind, p_kind):
    P, Q = make_case(V, g, q_kind, p_kind)
    sim = sv.simulate(method, P, Q, g, N_DRAWS, seed=V * 7 + g)
    # (a) the emitted tokens (x_1..x_k, y) follow the spec's exact distribution
    E = exact_round(method, P, Q, V, g)
    stat, thr = chi2_test(sim["emitted"], E)
    assert stat < thr, f"emitted sequences: chi2 {stat:.1f} >= {thr:.1f}"
    # (b) completed to gamma+1 tokens, they follow the target's autoregressive joint
    stat, thr = chi2_test(sim["completed"], target_joint(P, V, g))
    assert stat < thr, f"joint of the first {g + 1} tokens: chi2 {stat:.1f} >= {thr:.1f}"
    # expected accepted length: within 5 standard errors of the exact value
    lengths = np.concatenate([np.full(V**l, l - 1) for l in range(1, g + 2)])
    mean = float(E @ lengths)
    se = math.sqrt(max(float(E @ lengths**2) - mean**2, 1e-12) / N_DRAWS)
    assert abs(sim["mean_accepted"] - mean) < 5 * se + 1e-9


@pytest.mark.parametrize("V,g,q_kind,p_kind", [(3, 3, "full", "full"), (4, 4, "full", "full"),
                                               (4, 3, "sparse", "full"), (3, 3, "full", "truncated")])
def test_uncapped_block_fails_the_same_test(V, g, q_kind, p_kind):
    """The test has teeth: the official HSD rule (uncapped full-draft ratio) is rejected.

    Cases where the exact error is 4e-3..2e-2 (a point-mass q makes both rules coincide)."""
    P, Q = make_case(V, g, q_kind, p_kind)
    sim = sv.simulate("block_uncapped", P, Q, g, N_DRAWS, seed=V * 7 + g)
    stat, thr = chi2_test(sim["completed"], target_joint(P, V, g))
    assert stat > thr, f"the lossy variant passed: chi2 {stat:.1f} < {thr:.1f}"
    # ...while the C++ does compute that (lossy) rule as the mirror says
    stat, thr = chi2_test(sim["emitted"], exact_round("block_uncapped", P, Q, V, g))
    assert stat < thr


@pytest.mark.parametrize("V,g", CONFIGS)
def test_block_accepts_at_least_token_wise(V, g):
    for q_kind in PROPOSALS:
        P, Q = make_case(V, g, q_kind, seed=1)
        tok = sv.simulate("token", P, Q, g, 200_000, seed=3)["mean_accepted"]
        blk = sv.simulate("block", P, Q, g, 200_000, seed=3)["mean_accepted"]
        exact_tok = mean_accepted(exact_round("token", P, Q, V, g), V, g)
        exact_blk = mean_accepted(exact_round("block", P, Q, V, g), V, g)
        assert exact_blk >= exact_tok - 1e-12
        assert blk >= tok - 5 * g / math.sqrt(200_000)  # MC slack: 5 standard errors (sd <= g)


# ---------------------------------------------------------------------------------------------------
# the exact acceptance per draft (specgen.verify.reach, what $SPECGEN_VERIFY_TRACE logs per round)
@pytest.mark.parametrize("V,g,q_kind,p_kind", CASES, ids=CASE_IDS)
def test_reach_is_the_exact_acceptance_of_each_draft(V, g, q_kind, p_kind):
    """For every draft x, reach(method)[i] = P(n_accepted > i | x) of the spec's enumerator. Averaged
    over x ~ q, the sums are each rule's expected accepted length, and block's P(n_accepted > i) is
    token-wise's at i = 0 (both sum min(p_1, q_1)) and never below it after (for one draft it can be)."""
    P, Q = make_case(V, g, q_kind, p_kind)
    Pf, Qf = f32(P), f32(Q)
    mean = {"token": np.zeros(g), "block": np.zeros(g)}
    for x in itertools.product(range(V), repeat=g):
        ps = [Pf[node(V, x[:i])] for i in range(g + 1)]
        qs = [Qf[node(V, x[:i])] for i in range(g)]
        qx = [qs[i][x[i]] for i in range(g)]
        prob_draft = math.prod(qx)
        if prob_draft == 0:
            continue
        px = [ps[i][x[i]] for i in range(g)]
        p_rows = np.stack([P[node(V, x[:i])] for i in range(g + 1)])
        q_rows = np.stack([Q[node(V, x[:i])] for i in range(g)])
        for m in mean:
            p_k = np.zeros(g + 1)
            for k, w in _round_outcomes(m, ps, qs, px, qx, g):
                p_k[k] += w.sum()
            want = p_k[::-1].cumsum()[::-1][1:]  # P(n_accepted >= i + 1)
            got = sv.reach(m, p_rows, q_rows, x)
            assert got.shape == (g,)
            assert np.abs(got - want).max() < 1e-5, (m, x)  # the C++ reads float32 rows unrenormalised
            mean[m] += prob_draft * got
    for m in mean:
        assert mean[m].sum() == pytest.approx(mean_accepted(exact_round(m, P, Q, V, g), V, g), abs=1e-5)
    assert mean["block"][0] == pytest.approx(mean["token"][0], abs=1e-6)
    assert np.all(mean["block"] >= mean["token"] - 1e-6)


def test_reach_by_hand():
    """Two positions, V = 2: token-wise stops at the first unlikely token; block lets the likely
    second token rescue it (r_2 = 0.5 * 2 = 1 = M_1, so the whole draft is accepted surely). With a
    second unlikely token instead, block accepts less of this one draft: h_1 = 0, as q_2 >= p_2 / 2."""
    p = np.array([[0.25, 0.75], [0.0, 1.0], [0.5, 0.5]], np.float32)
    q = np.array([[0.5, 0.5], [0.5, 0.5]], np.float32)
    assert sv.reach("token", p, q, [0, 1]) == pytest.approx([0.5, 0.5])
    assert sv.reach("block", p, q, [0, 1]) == pytest.approx([1.0, 1.0])
    p2 = np.array([[0.25, 0.75], [0.25, 0.75], [0.5, 0.5]], np.float32)
    assert sv.reach("token", p2, q, [0, 0]) == pytest.approx([0.5, 0.25])
    assert sv.reach("block", p2, q, [0, 0]) == pytest.approx([0.25, 0.25])
    assert sv.reach("block", p[:1], np.zeros((0, 2)), []).shape == (0,)
    with pytest.raises(InvalidParameterError, match="q_1"):
        sv.reach("block", p, np.array([[1.0, 0.0], [0.5, 0.5]]), [1, 1])


# ---------------------------------------------------------------------------------------------------
# greedy: both sides point masses
@pytest.mark.parametrize("method", ["token", "block"])
@pytest.mark.parametrize("q_kind", ["full", "point_mass"])
def test_greedy_emits_the_argmax_path(method, q_kind):
    V, g = 4, 4
    rng = np.random.default_rng(5)
    P = greedy_tree(rng, V, g + 1)
    Q = PROPOSALS[q_kind](rng, V, g)
    path = []
    for _ in range(g + 1):
        path.append(int(np.argmax(P[node(V, tuple(path))])))
    sim = sv.simulate(method, P, Q, g, 20_000, seed=1)
    assert sim["completed"][node(V, tuple(path)) - off(V, g + 1)] == 20_000
    E = exact_round(method, P, Q, V, g)
    stat, thr = chi2_test(sim["emitted"], E)
    assert stat < thr


@pytest.mark.parametrize("verify_fn", [sv.token, sv.block])
def test_greedy_rounds_by_hand(verify_fn):
    V = 5
    argmax = [3, 1, 4, 0]
    p = np.eye(V, dtype=np.float32)[argmax]          # [g+1, V] point masses
    q_match = np.eye(V, dtype=np.float32)[argmax[:3]]
    assert verify_fn(p, q_match, argmax[:3], 0) == (3, 0)  # all accepted, bonus = argmax of row g+1
    draft = [3, 2, 4]
    q = np.eye(V, dtype=np.float32)[draft]
    assert verify_fn(p, q, draft, 0) == (1, 1)  # mismatch at x_2: correction = argmax p_2
    q_full = np.full((3, V), 1.0 / V, np.float32)  # a sampling drafter against a greedy target
    assert verify_fn(p, q_full, [2, 1, 4], 7) == (0, 3)


# ---------------------------------------------------------------------------------------------------
# the Python surface
def test_rng_argument_and_reproducibility():
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(6), size=4)
    q = rng.dirichlet(np.ones(6), size=3)
    draft = [int(np.argmax(r)) for r in q]
    for fn in (sv.token, sv.block):
        a = [fn(p, q, draft, s) for s in range(50)]
        assert a == [fn(p, q, draft, s) for s in range(50)]
        r1, r2 = sv.Rng(11), sv.Rng(11)
        assert [fn(p, q, draft, r1) for _ in range(50)] == [fn(p, q, draft, r2) for _ in range(50)]
        assert len(set(a)) > 1
    with pytest.raises(TypeError):
        sv.token(p, q, draft, 1.5)


def test_gamma_zero_samples_the_target():
    p = np.array([[0.0, 1.0, 0.0]])
    for fn in (sv.token, sv.block):
        assert fn(p, np.zeros((0, 3)), [], 4) == (0, 1)


def test_stats_on_the_emitted_path():
    p = np.array([[0.5, 0.5, 0.0], [0.2, 0.3, 0.5], [0.1, 0.1, 0.8]], np.float32)
    q = np.array([[0.5, 0.5, 0.0], [0.0, 1.0, 0.0]], np.float32)
    n, y, stats = sv.verify("token", p, q, [0, 1], 0, with_stats=True)
    assert stats.shape == (n + 1, 3)
    for i in range(n + 1):
        row = p[i].astype(np.float64)
        nz = row[row > 0]
        assert stats[i, 0] == pytest.approx(-(nz * np.log(nz)).sum(), rel=1e-6)
        assert stats[i, 1] == pytest.approx((nz * np.log(nz) ** 2).sum(), rel=1e-6)
        if i < 2:
            assert stats[i, 2] == pytest.approx(np.minimum(row, q[i]).sum(), rel=1e-6)
        else:
            assert math.isnan(stats[i, 2])


def test_invalid_inputs():
    p = np.full((3, 4), 0.25)
    q = np.array([[0.5, 0.5, 0, 0], [0.25] * 4])
    with pytest.raises(InvalidParameterError, match="q_1"):
        sv.token(p, q, [2, 0], 0)  # q_1(x_1) = 0: not sampled from q
    with pytest.raises(InvalidParameterError, match="q_1"):
        sv.block(p, q, [3, 0], 0)
    with pytest.raises(InvalidParameterError, match="outside"):
        sv.token(p, q, [0, 9], 0)
    with pytest.raises(InvalidParameterError, match="shapes"):
        sv.block(p[:2], q, [0, 1], 0)
    with pytest.raises(ValueError):
        sv.verify("hsd", p, q, [0, 1], 0)
    with pytest.raises(InvalidParameterError):
        sv.token(-p, q, [0, 1], 0)
