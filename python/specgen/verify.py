"""Lossless verification of speculative drafts (docs/ALGORITHMS.md sections 1 and 2).

One round: the drafter sampled ``draft[i] ~ q[i]`` (i = 0..g-1, each row conditioned on the draft
before it) and the target gave ``p[0..g]``, its distributions at the same prefixes plus one more.
A round keeps the first ``n_accepted`` draft tokens (the accepted tokens) and emits one more token,
``next_token``: the correction sampled from the residual when ``n_accepted < g``, or the bonus sampled
from ``p[g]`` when the whole draft was accepted. The emitted tokens follow the target's distribution
exactly, whatever q is.

Shapes: ``p`` float [g+1, V], ``q`` float [g, V] (probabilities after each side's processors; a one-hot
row is a point-mass proposal such as an n-gram's; zeros are outside the proposal's support, as with
NanoSpec's in-context vocabulary), ``draft`` int [g]. ``rng`` is a seed (int) or a :class:`Rng`, whose
stream then advances. The computation is the C++ verifier the engine runs.
"""
from __future__ import annotations

from typing import Tuple, Union

import numpy as np

from specgen._core import Rng
from specgen._core import verify_dense as _verify_dense
from specgen._core import verify_reach as _verify_reach

__all__ = ["Rng", "token", "block", "verify", "reach", "simulate"]

RngLike = Union[int, Rng]


def _rng(rng: RngLike) -> Rng:
    if isinstance(rng, Rng):
        return rng
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
        return Rng(int(rng))
    raise TypeError(f"rng must be an int seed or specgen Rng, not {type(rng).__name__}")


def _rows(a, name: str) -> np.ndarray:
    arr = np.ascontiguousarray(a, dtype=np.float32)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D, got shape {arr.shape}")
    return arr


def verify(method: str, p, q, draft, rng: RngLike, with_stats: bool = False):
    """Runs one round with ``method`` in {'token', 'block'}.

    Returns ``(n_accepted, next_token)``, or with ``with_stats`` also a float array
    [n_accepted + 1, 3] of (entropy, sum p ln^2 p, alpha) for the target rows on the emitted path
    (alpha is NaN for the bonus row).
    """
    p = _rows(p, "p")
    draft = np.ascontiguousarray(draft, dtype=np.int32).reshape(-1)
    q = np.asarray(q, dtype=np.float32)
    if q.size == 0:  # gamma == 0: nothing proposed
        q = np.zeros((0, p.shape[1]), dtype=np.float32)
    q = _rows(q, "q")
    n, y, stats = _verify_dense(method, p, q, draft, _rng(rng), with_stats)
    if with_stats:
        return n, y, np.asarray(stats, dtype=np.float64).reshape(-1, 3)
    return n, y


def reach(method: str, p, q, draft) -> np.ndarray:
    """How far ``method`` accepts this draft, exactly, in expectation over its coins: float64 [g] with
    entry i = P(n_accepted >= i + 1 | draft), so ``reach(...).sum()`` is E[n_accepted | draft]."""
    p = _rows(p, "p")
    draft = np.ascontiguousarray(draft, dtype=np.int32).reshape(-1)
    q = np.asarray(q, dtype=np.float32)
    if q.size == 0:
        q = np.zeros((0, p.shape[1]), dtype=np.float32)
    return np.asarray(_verify_reach(method, p, _rows(q, "q"), draft), dtype=np.float64)


def token(p, q, draft, rng: RngLike) -> Tuple[int, int]:
    """Token-wise verification (section 1): accept x_i with prob min(1, p_i(x_i)/q_i(x_i))."""
    return verify("token", p, q, draft, rng)


def block(p, q, draft, rng: RngLike) -> Tuple[int, int]:
    """Block verification = single-draft HSD with the capped joint ratio (section 2)."""
    return verify("block", p, q, draft, rng)


def simulate(method: str, p_tree, q_tree, gamma: int, n_draws: int, seed: int = 0):
    """Monte Carlo of ``n_draws`` rounds on a toy model given for every prefix (in C++, GIL released).

    ``p_tree`` [off(gamma+1), V] and ``q_tree`` [off(gamma), V], where the prefix (t_1..t_l) is row
    ``off(l) + sum_j t_j V^(l-j)`` and ``off(l) = (V^l - 1) / (V - 1)``. Drafts are sampled from q by
    the engine's sampler. Returns a dict with ``emitted`` (counts of emitted sequences of length
    1..gamma+1, indexed by row index - 1), ``completed`` (counts over V^(gamma+1) of the emitted tokens
    completed by sampling the target) and ``mean_accepted``. ``method`` may also be "block_uncapped",
    the LOSSY rule of the official HSD code, so tests can show that it fails. Test helper: needs the
    specgen._testing extension (tests/native), which the package builds alongside _core.
    """
    from specgen._testing import verify_simulate as _verify_simulate

    emitted, completed, total = _verify_simulate(
        method, int(gamma), _rows(p_tree, "p_tree"), _rows(q_tree, "q_tree"), int(n_draws), int(seed))
    return {
        "emitted": np.asarray(emitted, dtype=np.int64),
        "completed": np.asarray(completed, dtype=np.int64),
        "mean_accepted": total / n_draws if n_draws else float("nan"),
    }
