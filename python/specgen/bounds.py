"""Speed-of-light bounds and the classic speculative-decoding formulas (docs/ALGORITHMS.md section 5).

Use them with your own statistics: alpha = sum_x min(p(x), q(x)) averaged over positions, and
mu / mu2 = mean -sum p ln p / mean sum p (ln p)^2 over the target rows of a run. The scalar formulas
are the C++ ones the engine reports with.
"""
from __future__ import annotations

from typing import Tuple

import numpy as np

from specgen._core import BoundAccumulator
from specgen._core import expected_speedup as _expected_speedup
from specgen._core import expected_tokens_per_call as _expected_tokens_per_call
from specgen._core import pankratov_alistarh_bound as _pankratov_alistarh_bound
from specgen._core import tokens_per_call_limit as _tokens_per_call_limit

__all__ = [
    "BoundAccumulator",
    "acceptance_alpha",
    "entropy_stats",
    "expected_speedup",
    "expected_tokens_per_call",
    "pankratov_alistarh_bound",
    "tokens_per_call_limit",
]


def expected_tokens_per_call(alpha: float, gamma: int) -> float:
    """(1 - alpha^(gamma+1)) / (1 - alpha): i.i.d. acceptance; gamma + 1 at alpha = 1."""
    return _expected_tokens_per_call(float(alpha), int(gamma))


def tokens_per_call_limit(alpha: float) -> float:
    """1 / (1 - alpha), the gamma -> infinity limit (inf at alpha = 1). Not alpha / (1 - alpha)."""
    return _tokens_per_call_limit(float(alpha))


def expected_speedup(alpha: float, gamma: int, cost_ratio: float) -> float:
    """(1 - alpha^(gamma+1)) / ((1 - alpha)(gamma c + 1)), c = draft cost / target cost."""
    return _expected_speedup(float(alpha), int(gamma), float(cost_ratio))


def pankratov_alistarh_bound(mu: float, mu2: float, max_verified: int) -> float:
    """Leading term (mu + mu2) ln(P) / mu^2 of Pankratov & Alistarh's bound (the O(1) is omitted).

    P = max_verified tokens per target call (gamma + 1 for a single draft). inf when mu == 0.
    """
    return _pankratov_alistarh_bound(float(mu), float(mu2), int(max_verified))


def acceptance_alpha(p, q) -> np.ndarray:
    """alpha per row: sum_x min(p(x), q(x)) = 1 - TV(p, q). p, q: [..., V]."""
    return np.minimum(np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64)).sum(axis=-1)


def entropy_stats(p) -> Tuple[np.ndarray, np.ndarray]:
    """Per row (-sum p ln p, sum p (ln p)^2), with 0 ln 0 = 0. p: [..., V]."""
    p = np.asarray(p, dtype=np.float64)
    lp = np.log(np.where(p > 0, p, 1.0))
    return -(p * lp).sum(axis=-1), (p * lp * lp).sum(axis=-1)
