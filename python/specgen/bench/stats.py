"""Statistics of a benchmark: medians and spreads of timings, pooled acceptance statistics and the
speed-of-light comparison (docs/ALGORITHMS.md section 5) of a set of Generator.generate() stats dicts.

Pure functions of plain dicts and lists (no engine), so they are unit-tested on hand-made traces.
Pooling: counts are summed over the runs before dividing (a long run weighs more than a short one),
which is what the engine's own per-run ratios become when the runs are concatenated.
"""
from __future__ import annotations

import math
from typing import Any, Dict, Iterable, List, Optional, Sequence

__all__ = [
    "spread",
    "pool_runs",
    "position_acceptance",
    "speed_of_light",
    "ratio",
]


def _percentile(sorted_xs: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default method) of an already sorted list."""
    if not sorted_xs:
        return float("nan")
    pos = (len(sorted_xs) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


def percentile(values: Iterable[float], q: float) -> float:
    """Linear-interpolated percentile of ``values`` in any order (NaN when there are none)."""
    return _percentile(sorted(values), q)


def spread(values: Iterable[float]) -> Dict[str, float]:
    """Median, quartiles, min, max and count of ``values`` (NaNs dropped).

    ``rel_iqr`` = (p75 - p25) / median: the spread a reader compares against a speedup.
    """
    xs = sorted(float(v) for v in values if v is not None and not math.isnan(float(v)))
    if not xs:
        nan = float("nan")
        return {"median": nan, "p25": nan, "p75": nan, "min": nan, "max": nan, "n": 0, "rel_iqr": nan}
    med = _percentile(xs, 0.5)
    p25, p75 = _percentile(xs, 0.25), _percentile(xs, 0.75)
    return {
        "median": med,
        "p25": p25,
        "p75": p75,
        "min": xs[0],
        "max": xs[-1],
        "n": len(xs),
        "rel_iqr": (p75 - p25) / med if med else float("nan"),
    }


def ratio(num: Optional[float], den: Optional[float]) -> Optional[float]:
    """num / den, None when either is missing, NaN, or den is 0."""
    if num is None or den is None or math.isnan(num) or math.isnan(den) or den == 0:
        return None
    return num / den


def _add_vectors(acc: List[int], v: Sequence[int]) -> List[int]:
    if len(v) > len(acc):
        acc = acc + [0] * (len(v) - len(acc))
    for i, x in enumerate(v):
        acc[i] += int(x)
    return acc


_SUMMED = (
    "n_prompt_tokens", "n_generated", "prefill_seconds", "decode_seconds", "n_rounds", "n_drafted",
    "n_accepted", "draft_seconds", "verify_seconds", "n_target_rows", "sum_entropy", "sum_entropy2",
    "sum_alpha", "n_alpha", "ssd_hits", "ssd_misses", "ssd_branches", "ssd_wait_seconds", "ssd_overlap_seconds",
    "draft_head_seconds", "nanospec_prefill_seconds",
)


def position_acceptance(drafted_at: Sequence[int], accepted_at: Sequence[int], n_rounds: int) -> Dict[str, List[float]]:
    """Per draft position i (0-based):

    - ``conditional``: accepted_at[i] / drafted_at[i], the chance the i-th drafted token of a round is
      accepted when it was drafted (the verifier keeps an accepted prefix, so it was reached);
    - ``reach``: accepted_at[i] / n_rounds, the fraction of target calls that got past position i.
      sum(reach) + 1 is the mean accepted length.
    """
    n = max(len(drafted_at), len(accepted_at))
    cond, reach = [], []
    for i in range(n):
        d = drafted_at[i] if i < len(drafted_at) else 0
        a = accepted_at[i] if i < len(accepted_at) else 0
        cond.append(a / d if d else float("nan"))
        reach.append(a / n_rounds if n_rounds else float("nan"))
    return {"conditional": cond, "reach": reach}


def pool_runs(stats_list: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    """Sums the counters of several generate() stats dicts and derives the pooled ratios.

    Returns the sums plus: acceptance_rate, mean_accepted_length (1 + accepted / rounds),
    tokens_per_call (generated tokens per target call: per verification round for speculative runs,
    1 for plain decoding, where every token is one target call), alpha (sum_alpha / n_alpha),
    mu and mu2 (mean entropy and second log-moment over the target rows), the per-position
    acceptance and vocab_set_size (largest |S| seen; 0 when NanoSpec is off).
    """
    out: Dict[str, Any] = {k: 0 for k in _SUMMED}
    drafted: List[int] = []
    accepted: List[int] = []
    vocab = 0
    pred_seconds = 0.0  # draft auto: decode time the policy predicted (n_generated / predicted tok/s)
    for s in stats_list:
        pred = s.get("auto_predicted_tokens_per_second", 0) or 0
        if pred > 0:
            pred_seconds += (s.get("n_generated", 0) or 0) / pred
        for k in _SUMMED:
            out[k] += s.get(k, 0) or 0
        drafted = _add_vectors(drafted, s.get("drafted_at", []) or [])
        accepted = _add_vectors(accepted, s.get("accepted_at", []) or [])
        vocab = max(vocab, int(s.get("vocab_set_size", 0) or 0))
    out["n_runs"] = len(stats_list)
    out["auto_predicted_tps"] = out["n_generated"] / pred_seconds if pred_seconds > 0 else None
    out["auto_measured_tps"] = out["n_generated"] / out["decode_seconds"] if pred_seconds > 0 and out["decode_seconds"] else None
    out["drafted_at"] = drafted
    out["accepted_at"] = accepted
    out["vocab_set_size"] = vocab
    out["acceptance_rate"] = out["n_accepted"] / out["n_drafted"] if out["n_drafted"] else None
    if out["n_rounds"]:
        out["mean_accepted_length"] = 1.0 + out["n_accepted"] / out["n_rounds"]
        out["tokens_per_call"] = out["n_generated"] / out["n_rounds"]
    else:  # plain decoding: one target call per token
        out["mean_accepted_length"] = 1.0 if out["n_generated"] else None
        out["tokens_per_call"] = 1.0 if out["n_generated"] else None
    # clamped: a mean of float overlaps can land a rounding error above 1
    out["alpha"] = min(1.0, out["sum_alpha"] / out["n_alpha"]) if out["n_alpha"] else None
    out["mu"] = out["sum_entropy"] / out["n_target_rows"] if out["n_target_rows"] else None
    out["mu2"] = out["sum_entropy2"] / out["n_target_rows"] if out["n_target_rows"] else None
    out["position_acceptance"] = position_acceptance(drafted, accepted, out["n_rounds"])
    out["draft_fraction"] = out["draft_seconds"] / out["decode_seconds"] if out["decode_seconds"] else None
    out["verify_fraction"] = out["verify_seconds"] / out["decode_seconds"] if out["decode_seconds"] else None
    out["ms_per_round"] = 1e3 * out["decode_seconds"] / out["n_rounds"] if out["n_rounds"] else None
    # SSD (docs/ALGORITHMS.md section 4): how often the speculation cache had the round's draft, how
    # long the target waited for the drafter, how much drafting overlapped verification.
    looks = out["ssd_hits"] + out["ssd_misses"]
    out["ssd_hit_rate"] = out["ssd_hits"] / looks if looks else None
    out["ssd_branches_per_round"] = out["ssd_branches"] / out["n_rounds"] if looks and out["n_rounds"] else None
    out["ssd_wait_fraction"] = out["ssd_wait_seconds"] / out["decode_seconds"] if looks and out["decode_seconds"] else None
    out["ssd_overlap_fraction"] = out["ssd_overlap_seconds"] / out["verify_seconds"] if looks and out["verify_seconds"] else None
    out["head_ms_per_draft"] = 1e3 * out["draft_head_seconds"] / out["n_drafted"] if out["n_drafted"] else None
    return out


def speed_of_light(pooled: Dict[str, Any], gamma: Optional[int]) -> Dict[str, Optional[float]]:
    """Bounds on tokens per target call for a pooled configuration (docs/ALGORITHMS.md section 5).

    - ``pa_bound``: Pankratov-Alistarh leading term (mu + mu2) ln(P) / mu^2 with P = gamma + 1 (the
      verifier's capacity). inf when mu == 0 (greedy: the processed target distribution is a point
      mass, so entropy gives no bound), None without target rows.
    - ``classic_limit``: 1 / (1 - alpha), gamma -> infinity.
    - ``expected_tpc``: (1 - alpha^(gamma+1)) / (1 - alpha), i.i.d. acceptance at the run's gamma.
    - ``*_ratio``: measured tokens per call over each (how close the run is to the limit).
    """
    from specgen import bounds

    tpc = pooled.get("tokens_per_call")
    alpha = pooled.get("alpha")
    mu, mu2 = pooled.get("mu"), pooled.get("mu2")
    out: Dict[str, Optional[float]] = {"gamma": gamma, "alpha": alpha, "mu": mu, "mu2": mu2}
    out["pa_bound"] = bounds.pankratov_alistarh_bound(mu, mu2, gamma + 1) if (gamma and mu is not None) else None
    out["classic_limit"] = bounds.tokens_per_call_limit(alpha) if alpha is not None else None
    out["expected_tpc"] = bounds.expected_tokens_per_call(alpha, gamma) if (alpha is not None and gamma) else None
    for key in ("pa_bound", "classic_limit", "expected_tpc"):
        b = out[key]
        out[key + "_ratio"] = (tpc / b) if (tpc is not None and b is not None and b > 0) else None
    return out
