"""The iterator generate(stream=True) returns (engine/scheduler.h states the thread rule).

The engine decodes the request on its own thread; the stream hands out the text as it comes. Like
any request it waits in the engine's queue while every slot is busy, and no other request ends it:
only ``close()`` (or dropping the stream) or ``Generator.close()`` ends it early, with
``finish_reason == "cancelled"``. Once exhausted, ``finish_reason`` and ``stats``
tell how it ended.
"""
from __future__ import annotations

from typing import Any, Iterator, Optional

__all__ = ["Stream"]


class Stream(Iterator[str]):
    """Text pieces (whole UTF-8 characters) of one generation. ``finish_reason`` is None while it
    runs, then "stop", "length", "eos" or "cancelled" (closed or abandoned by its caller)."""

    def __init__(self, gen, generator=None, seed: Optional[int] = None) -> None:
        self._gen = gen
        self._generator = generator
        self._seed = seed

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
            gen.cancel(wait=False)
            raise
        raise StopIteration

    @property
    def finish_reason(self) -> Optional[str]:
        return self._gen.finish_reason if self._gen.done else None

    @property
    def stats(self) -> Any:
        """GenerationStats (the seed included) once the stream ended, else None."""
        if not self._gen.done:
            return None
        stats = self._gen.stats()
        if self._seed is not None:
            stats.seed = self._seed
        return stats

    @property
    def tokens(self):
        """The token ids emitted so far."""
        return list(self._gen.tokens)

    def cancel(self) -> None:
        """Ends the generation now (finish_reason "cancelled" unless it had finished)."""
        self._gen.cancel()

    close = cancel

    def __del__(self) -> None:
        gen = getattr(self, "_gen", None)
        if gen is not None:
            gen.cancel()
