"""The head's reduced draft vocabulary (docs/DESIGN.md section 4.1): the N target ids that occur most
often as next tokens in the training data, ascending, so that EAGLE-3's d2t offsets (target id minus
draft row) are never negative. The GGUF stores the absolute ids (what llama.cpp's converter writes)."""
from __future__ import annotations

import numpy as np


def reduced_vocabulary(token_ids: np.ndarray, n: int, n_vocab: int) -> np.ndarray:
    """The at most ``n`` most frequent ids of ``token_ids`` (ties: the lower id), ascending, int64."""
    counts = np.bincount(np.asarray(token_ids, dtype=np.int64), minlength=n_vocab)
    present = np.flatnonzero(counts)
    order = present[np.lexsort((present, -counts[present]))]
    return np.sort(order[:n]).astype(np.int64)


def d2t_offsets(d2t: np.ndarray) -> np.ndarray:
    """EAGLE-3's checkpoint form: target id = draft row + offset."""
    return np.asarray(d2t, dtype=np.int64) - np.arange(len(d2t), dtype=np.int64)


def target_to_draft(d2t: np.ndarray, n_vocab: int) -> np.ndarray:
    """Draft row of each target id, -1 for ids outside the draft vocabulary: [n_vocab] int64."""
    t2d = np.full(n_vocab, -1, dtype=np.int64)
    t2d[np.asarray(d2t, dtype=np.int64)] = np.arange(len(d2t))
    return t2d
