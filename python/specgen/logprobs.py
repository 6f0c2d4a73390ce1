"""Per-token log-probabilities (``generate(logprobs=N)``), read by the engine from the target's
processed distribution of the row that emitted each token (cpp/src/engine/logprobs.h): the same with
and without speculation. With temperature > 0 that is the sampling distribution after the penalties,
temperature, top-k, top-p and min-p (a token they cut has logprob -inf); with temperature 0 the
softmax of the penalised logits at temperature 1 (greedy's point mass would say nothing)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, List, Tuple


@dataclass
class TokenLogprob:
    token: int
    logprob: float
    top: List[Tuple[int, float]] = field(default_factory=list)  # (id, logprob), most probable first


def from_core(entries: Iterable[tuple]) -> List[TokenLogprob]:
    """The binding's (token, logprob, top_ids, top_logprobs) tuples as TokenLogprob."""
    return [TokenLogprob(int(t), float(lp), list(zip(ids, lps))) for t, lp, ids, lps in entries]
