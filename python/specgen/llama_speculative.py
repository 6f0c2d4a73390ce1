"""Draft models for ``specgen.Llama(draft_model=...)``, named as llama-cpp-python's ``llama_speculative``.

``LlamaPromptLookupDecoding(max_ngram_size=2, num_pred_tokens=10)`` is prompt lookup: specgen's n-gram
drafter runs it inside the engine (``draft="ngram"``, ``ngram_max=max_ngram_size``,
``draft_max=num_pred_tokens``) with lossless verification (docs/ALGORITHMS.md section 6). Calling the
object on token ids also works, for code that uses it directly: it returns the tokens that followed the
latest earlier occurrence of the longest matching suffix.

A ``LlamaDraftModel`` subclass of your own is Python code the engine cannot call from its decoding
loop: ``Llama`` refuses it with SpecgenNotImplementedError (use a draft GGUF: ``draft_model="d.gguf"``).
"""
from __future__ import annotations

import abc
from typing import Any

import numpy as np

__all__ = ["LlamaDraftModel", "LlamaPromptLookupDecoding"]


class LlamaDraftModel(abc.ABC):
    """A drafter: token ids so far -> proposed next token ids."""

    @abc.abstractmethod
    def __call__(self, input_ids: np.ndarray, /, **kwargs: Any) -> np.ndarray:
        raise NotImplementedError


class LlamaPromptLookupDecoding(LlamaDraftModel):
    """Prompt lookup decoding: propose the ``num_pred_tokens`` tokens that followed an earlier
    occurrence of the last 1..``max_ngram_size`` tokens."""

    def __init__(self, max_ngram_size: int = 2, num_pred_tokens: int = 10) -> None:
        for name, value in (("max_ngram_size", max_ngram_size), ("num_pred_tokens", num_pred_tokens)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        self.max_ngram_size = int(max_ngram_size)
        self.num_pred_tokens = int(num_pred_tokens)

    def __call__(self, input_ids: np.ndarray, /, **kwargs: Any) -> np.ndarray:
        ids = np.asarray(input_ids, dtype=np.intc)
        n = ids.shape[0]
        # Longest suffix first; among its earlier occurrences the latest one (the freshest context).
        for size in range(min(self.max_ngram_size, n - 1), 0, -1):
            suffix = ids[n - size:]
            for start in range(n - size - 1, -1, -1):
                if np.array_equal(ids[start:start + size], suffix):
                    follow = ids[start + size:start + size + self.num_pred_tokens]
                    if follow.size:
                        return follow.copy()
        return np.zeros(0, dtype=np.intc)

    def __repr__(self) -> str:
        return f"LlamaPromptLookupDecoding(max_ngram_size={self.max_ngram_size}, num_pred_tokens={self.num_pred_tokens})"
