"""One request on a Generator, as its caller reads it: the one Python iterator over a request.

The engine decodes the request on its own thread, batched with every other request of the Generator
(engine/scheduler.h); like any request it waits in the engine's queue while every slot is busy, and no
other request ends it: only ``cancel()`` / ``close()`` (or dropping it) or ``Generator.close()`` ends
it early, with ``finish_reason == "cancelled"``.

Read it one of three ways, all over the same ``poll()`` (the only place that reads the native
request, ``_core.Request``):
- iterate it: the text pieces (whole UTF-8 characters), what ``generate(stream=True)`` returns;
- ``events()``: a StepEvent per engine step (text piece, token ids, log-probabilities when asked for),
  what create_completion, the Llama class and the server's engine adapter read;
- ``poll(timeout)``: one step's event, waiting at most ``timeout`` seconds (the server's reader threads).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator, List, Optional

from specgen.logprobs import TokenLogprob, from_core

__all__ = ["Request", "StepEvent"]


@dataclass
class StepEvent:
    """What one engine step emitted for a request."""

    text: str
    tokens: List[int]
    logprobs: List[TokenLogprob] = field(default_factory=list)


class Request(Iterator[str]):
    """A started request (``Generator.generate(stream=True)``). ``finish_reason`` is None while it
    runs, then "stop", "length", "eos" or "cancelled"."""

    def __init__(self, generator, native, seed: int, want_logprobs: bool = False) -> None:
        self._native = native
        self._generator = generator
        self.seed = seed
        self._want_logprobs = want_logprobs
        self._n_seen = 0
        self._pieces: Optional[Iterator[StepEvent]] = None
        self.n_prompt_tokens = int(native.stats()["n_prompt_tokens"])

    # -- reading -------------------------------------------------------------------------------
    def poll(self, timeout: Optional[float] = None) -> Optional[StepEvent]:
        """The next step's event (possibly empty: a step that held its text back), or None when the
        request has ended or nothing came within ``timeout`` seconds (None: wait for the step)."""
        native = self._native
        if native.done:
            return None
        ready, piece = native.next(-1.0 if timeout is None else float(timeout))
        if not ready:
            return None
        tokens = native.tokens
        new = list(tokens[self._n_seen:])
        lp = from_core(native.logprobs(self._n_seen)) if self._want_logprobs else []
        self._n_seen = len(tokens)
        return StepEvent(bytes(piece).decode("utf-8", errors="replace"), new, lp)

    def events(self) -> Iterator[StepEvent]:
        """The request's non-empty step events until it ends. Closing the iterator early cancels the
        request (its slot is free when close() returns); an exception while waiting (Ctrl-C) cancels
        it without waiting."""
        native = self._native
        try:
            while not native.done:
                ev = self.poll()
                if ev is not None and (ev.text or ev.tokens):
                    yield ev
        except GeneratorExit:
            native.cancel()
            raise
        except BaseException:
            native.cancel(False)
            raise

    def wait(self) -> "Request":
        """Blocks until the request ends (cancelling it on an exception such as Ctrl-C)."""
        for _ in self.events():
            pass
        return self

    def __iter__(self) -> "Request":
        return self

    def __next__(self) -> str:
        if self._pieces is None:
            self._pieces = self.events()
        for ev in self._pieces:
            if ev.text:
                return ev.text
        raise StopIteration

    # -- state ---------------------------------------------------------------------------------
    @property
    def done(self) -> bool:
        return self._native.done

    @property
    def finish_reason(self) -> Optional[str]:
        return self._native.finish_reason if self._native.done else None

    @property
    def stats(self) -> Any:
        """GenerationStats (the seed included) once the request ended, else None."""
        return self.current_stats() if self._native.done else None

    def current_stats(self) -> Any:
        """GenerationStats so far (the seed included), also while the request runs."""
        stats = self._native.stats()
        stats.seed = self.seed
        return stats

    @property
    def tokens(self) -> List[int]:
        """The token ids emitted so far."""
        return list(self._native.tokens)

    @property
    def text(self) -> str:
        """The text emitted so far (stop strings excluded)."""
        return self._native.text

    @property
    def n_generated(self) -> int:
        return len(self._native.tokens)

    def logprobs(self, start: int = 0) -> List[TokenLogprob]:
        """Log-probabilities of the emitted tokens from index ``start`` on (``logprobs=N`` requests)."""
        return from_core(self._native.logprobs(start))

    # -- ending ----------------------------------------------------------------------------------
    def cancel(self, wait: bool = True) -> None:
        """Ends the request now (finish_reason "cancelled" unless it had finished); wait: until the
        engine has freed its slot. Any thread; idempotent."""
        self._native.cancel(wait)

    close = cancel

    def __del__(self) -> None:
        native = getattr(self, "_native", None)
        if native is not None:
            native.cancel()
