"""Speed-of-light formulas (docs/ALGORITHMS.md section 5) against hand-computed values, and their inputs
measured on synthetic acceptance traces and on the C++ verifier."""
from __future__ import annotations

import math

import numpy as np
import pytest

import specgen.bounds as sb
import specgen.verify as sv
from specgen.errors import InvalidParameterError


def test_tokens_per_call_hand_values():
    assert sb.expected_tokens_per_call(0.5, 3) == pytest.approx(1.875)  # (1 - 1/16) / (1/2)
    assert sb.expected_tokens_per_call(0.8, 4) == pytest.approx((1 - 0.8**5) / 0.2)
    assert sb.expected_tokens_per_call(0.0, 5) == 1.0
    assert sb.expected_tokens_per_call(1.0, 5) == 6.0  # the alpha -> 1 limit, no 0/0
    assert sb.expected_tokens_per_call(1 - 1e-12, 5) == pytest.approx(6.0)
    assert sb.expected_tokens_per_call(0.7, 0) == 1.0


def test_limit_and_speedup_hand_values():
    assert sb.tokens_per_call_limit(0.8) == pytest.approx(5.0)  # 1/(1-a), not a/(1-a) = 4
    assert sb.tokens_per_call_limit(0.0) == 1.0
    assert sb.tokens_per_call_limit(1.0) == math.inf
    assert sb.expected_speedup(0.8, 4, 0.1) == pytest.approx((1 - 0.32768) / (0.2 * 1.4))
    assert sb.expected_speedup(0.8, 4, 0.0) == pytest.approx(sb.expected_tokens_per_call(0.8, 4))
    # more draft tokens stop paying off once their cost exceeds the acceptance gain
    s = [sb.expected_speedup(0.6, g, 0.2) for g in range(1, 12)]
    assert max(s) > s[-1] and s[0] < max(s)


def test_pankratov_alistarh_hand_values():
    assert sb.pankratov_alistarh_bound(1.0, 2.0, 5) == pytest.approx(3 * math.log(5))
    assert sb.pankratov_alistarh_bound(0.5, 0.5, 8) == pytest.approx(math.log(8) / 0.25)
    assert sb.pankratov_alistarh_bound(0.0, 0.0, 8) == math.inf  # deterministic target: no bound
    assert sb.pankratov_alistarh_bound(1.3, 2.0, 1) == 0.0  # ln 1: leading term only (O(1) omitted)


@pytest.mark.parametrize("call,args", [
    (sb.expected_tokens_per_call, (1.2, 3)), (sb.expected_tokens_per_call, (float("nan"), 3)),
    (sb.expected_tokens_per_call, (0.5, -1)), (sb.tokens_per_call_limit, (-0.1,)),
    (sb.expected_speedup, (0.5, 3, -1.0)), (sb.pankratov_alistarh_bound, (-1.0, 1.0, 4)),
    (sb.pankratov_alistarh_bound, (1.0, 1.0, 0)),
])
def test_domain_errors(call, args):
    with pytest.raises(InvalidParameterError):
        call(*args)


def test_alpha_and_entropy_helpers():
    p = np.array([[0.5, 0.5, 0.0], [1.0, 0.0, 0.0]])
    q = np.array([[0.25, 0.25, 0.5], [0.5, 0.5, 0.0]])
    assert sb.acceptance_alpha(p, q) == pytest.approx([0.5, 0.5])
    h, h2 = sb.entropy_stats(p)
    assert h == pytest.approx([math.log(2), 0.0])
    assert h2 == pytest.approx([math.log(2) ** 2, 0.0])


def test_accumulator():
    acc = sb.BoundAccumulator()
    assert math.isnan(acc.mu) and math.isnan(acc.alpha)
    for h, h2 in [(1.0, 2.0), (3.0, 4.0)]:
        acc.add_row(h, h2)
    acc.add_alpha(0.5)
    acc.add_alpha(float("nan"))  # the bonus row has no proposal
    acc.add_alpha(0.7)
    assert (acc.mu, acc.mu2, acc.alpha, acc.n_rows, acc.n_alpha) == (
        2.0, 3.0, pytest.approx(0.6), 2, 2)
    other = sb.BoundAccumulator()
    other.add_row(5.0, 0.0)
    acc.merge(other)
    assert (acc.mu, acc.mu2, acc.n_rows) == (3.0, 2.0, 3)
    acc.reset()
    assert acc.n_rows == 0


def test_synthetic_iid_trace_matches_formula():
    """Rounds with i.i.d. acceptance alpha: accepted = min(Geometric, gamma); tokens = accepted + 1."""
    rng = np.random.default_rng(0)
    for alpha, g in [(0.3, 2), (0.7, 4), (0.9, 8)]:
        acc = rng.random((200_000, g)) < alpha
        accepted = np.where(acc.all(1), g, np.argmin(acc, axis=1))
        tokens = accepted + 1
        se = tokens.std() / math.sqrt(len(tokens))
        assert abs(tokens.mean() - sb.expected_tokens_per_call(alpha, g)) < 5 * se
        assert tokens.mean() < sb.tokens_per_call_limit(alpha)


@pytest.mark.parametrize("method", ["token", "block"])
def test_verifier_tokens_per_call_on_context_free_model(method):
    """Same p and q at every prefix: token-wise accepts each position independently with probability
    alpha = sum min(p, q), so tokens per call is the formula; block verification is never below it."""
    V, g = 4, 4
    p = np.array([0.5, 0.2, 0.2, 0.1], np.float32)
    q = np.array([0.25, 0.25, 0.25, 0.25], np.float32)
    rows = lambda d, row: np.tile(row, ((V**d - 1) // (V - 1), 1))
    sim = sv.simulate(method, rows(g + 1, p), rows(g, q), g, 400_000, seed=2)
    alpha = float(np.minimum(p, q).sum())  # 0.85
    want = sb.expected_tokens_per_call(alpha, g)
    se = g / math.sqrt(400_000)
    if method == "token":
        assert sim["mean_accepted"] + 1 == pytest.approx(want, abs=5 * se)
    else:
        assert sim["mean_accepted"] + 1 > want - 5 * se


def test_verifier_stats_feed_the_accumulator():
    rng = np.random.default_rng(3)
    acc = sb.BoundAccumulator()
    h_all, h2_all, alphas = [], [], []
    for _ in range(50):
        p = rng.dirichlet(np.ones(8), size=4).astype(np.float32)
        q = rng.dirichlet(np.ones(8), size=3).astype(np.float32)
        draft = [int(rng.choice(8, p=r / r.sum())) for r in q.astype(np.float64)]
        n, _, stats = sv.verify("token", p, q, draft, int(rng.integers(1 << 30)), with_stats=True)
        for i, (h, h2, a) in enumerate(stats):
            acc.add_row(h, h2)
            acc.add_alpha(a)
            eh, eh2 = sb.entropy_stats(p[i])
            h_all.append(eh), h2_all.append(eh2)
            if i < 3:
                alphas.append(sb.acceptance_alpha(p[i], q[i]))
    assert acc.n_rows == len(h_all)
    assert acc.mu == pytest.approx(np.mean(h_all), rel=1e-6)
    assert acc.mu2 == pytest.approx(np.mean(h2_all), rel=1e-6)
    assert acc.alpha == pytest.approx(np.mean(alphas), rel=1e-6)
    bound = sb.pankratov_alistarh_bound(acc.mu, acc.mu2, 4)
    assert bound == pytest.approx((acc.mu + acc.mu2) * math.log(4) / acc.mu**2)
