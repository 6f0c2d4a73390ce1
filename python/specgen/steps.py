"""A request driven one engine step at a time: what create_completion and the server stream.

Each step yields a StepEvent with the text it made safe to show, the token ids it emitted and their
log-probabilities (when asked for). After the last event ``finish_reason`` and ``stats`` are set.
This is the one place that talks to the native generation object. The engine decodes the request on
its own thread, batched with every other request of the Generator (engine/scheduler.h); iterating
waits for its next step.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional

from specgen.logprobs import TokenLogprob, from_core


@dataclass
class StepEvent:
    text: str
    tokens: List[int]
    logprobs: List[TokenLogprob] = field(default_factory=list)


class StepStream:
    """Iterates a started request; ``cancel()`` (any thread) ends it (finish_reason "cancelled"). One
    thread iterates; another may call ``cancel()`` or set ``cancel_requested`` (checked between steps)."""

    def __init__(self, generator, prompt, **params: Any) -> None:
        self._want_logprobs = params.get("logprobs") is not None
        self._gen, self.seed = generator._start(prompt, **params)
        self._generator = generator
        self.finish_reason: Optional[str] = None
        self.stats: Dict[str, Any] = {}
        self.cancel_requested = False
        self.n_prompt_tokens = int(self._gen.stats()["n_prompt_tokens"])

    def __iter__(self) -> Iterator[StepEvent]:
        gen = self._gen
        n_seen = 0
        try:
            while not gen.done:
                if self.cancel_requested:
                    gen.cancel()
                    break
                text = gen.step()
                tokens = gen.tokens
                new = list(tokens[n_seen:])
                lp = from_core(gen.logprobs(n_seen)) if self._want_logprobs else []
                n_seen = len(tokens)
                if text or new:
                    yield StepEvent(text, new, lp)
        finally:
            if not gen.done:
                gen.cancel()
            self.finish_reason = gen.finish_reason
            self.stats = self._generator._stats(gen, self.seed)

    def cancel(self) -> None:
        """Ends the request now: the engine frees its slot before this returns."""
        self.cancel_requested = True
        self._gen.cancel()

    @property
    def n_generated(self) -> int:
        return len(self._gen.tokens)
