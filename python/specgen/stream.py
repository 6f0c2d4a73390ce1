"""The iterator generate(stream=True) returns (engine/generator.h states the thread rule).

A stream is driven step by step, so it holds no lock between pieces: a newer call on the same
Generator (from this thread or another) supersedes it after its current step, and the stream then
ends with ``finish_reason == "cancelled"``; ``Generator.close()`` ends it the same way.
"""
from __future__ import annotations

from typing import Iterator, Optional

__all__ = ["Stream"]


class Stream(Iterator[str]):
    """Text pieces (whole UTF-8 characters) of one generation. ``finish_reason`` is None while it
    runs, then "stop", "length", "eos" or "cancelled" (superseded, closed or abandoned)."""

    def __init__(self, gen) -> None:
        self._gen = gen

    def __iter__(self) -> "Stream":
        return self

    def __next__(self) -> str:
        gen = self._gen
        try:
            while not gen.done:
                piece = gen.step()
                if piece:
                    return piece
        except BaseException:
            gen.cancel()
            raise
        gen.cancel()  # done: releases the speculator at once (no-op otherwise)
        raise StopIteration

    @property
    def finish_reason(self) -> Optional[str]:
        return self._gen.finish_reason if self._gen.done else None

    @property
    def tokens(self):
        """The token ids emitted so far."""
        return list(self._gen.tokens)

    def close(self) -> None:
        """Ends the generation now (finish_reason "cancelled" unless it had finished)."""
        self._gen.cancel()

    def __del__(self) -> None:
        gen = getattr(self, "_gen", None)
        if gen is not None:
            gen.cancel()
