"""The engine adapter: the server's only contact with the Generator.

``submit(tokens, params)`` starts a request on the Generator's own engine, which queues it until a
slot is free and decodes it batched with every other request (engine/scheduler.h, docs/DESIGN.md
section 9): the server keeps no queue and no worker per slot of its own. It returns a RequestHandle:
an async iterator of specgen.request.StepEvent (text piece, token ids, logprobs) read with the
request's blocking ``poll(timeout)`` on a reader thread, ``cancel()``, and, once it ends,
``finish_reason``, ``stats`` and ``n_prompt_tokens``.

The adapter admits at most ``n_slots + queue_size`` requests at a time (QueueFull beyond, the
server's 503; the engine's own QueueFullError is the same). Every admitted request is finished exactly
once (``RequestHandle._finish``), whichever way it ends: read to its end, cancelled by its client going
away (queued or running, streamed or not), failed, or the server shutting down. The gauges of running
and waiting requests are read from the engine itself when /metrics is scraped, so they cannot drift.
"""
from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, List, Optional, Set

from specgen.errors import QueueFullError
from specgen.server.metrics import ServerMetrics
from specgen.request import Request, StepEvent

# A reader thread waits this long for a request's next step before it looks again: the thread is
# never held for ever by a request nobody reads any more.
READ_WAIT_S = 0.5
_END = object()


class QueueFull(Exception):
    """Every slot is busy and the waiting queue is full."""


class RequestHandle:
    def __init__(self, adapter: "EngineAdapter", request: Request, t_arrival: float) -> None:
        self.t_arrival = t_arrival
        self.finish_reason: Optional[str] = None
        self.stats: Dict[str, Any] = {}
        self.n_prompt_tokens = request.n_prompt_tokens
        self._adapter = adapter
        self._request = request
        self._n_seen = 0
        self._t_last: Optional[float] = None
        self._cancelled = False
        self._finished = False
        self._ended = False  # the consumer saw the end

    # -- consumer side (the event loop) -------------------------------------------------------
    def __aiter__(self):
        return self

    async def __anext__(self) -> StepEvent:
        loop = asyncio.get_running_loop()
        while not self._ended:
            try:
                ev = await loop.run_in_executor(self._adapter._readers, self._read)
            except asyncio.CancelledError:
                raise
            except BaseException:
                self._ended = True
                self._adapter._settle(self)  # the engine's error ends the request
                raise
            if ev is _END:
                self._ended = True
            elif ev is not None:
                return ev
        raise StopAsyncIteration

    def cancel(self) -> None:
        """Ends the request (its client went away, or the route is done with it): the engine drops it
        at its next step boundary, queued or running. Idempotent; returns at once."""
        if self._cancelled:
            return
        self._cancelled = True
        if not self._finished:
            self._request.cancel(False)
            self._adapter._settle(self)

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    # -- a reader thread ----------------------------------------------------------------------
    def _read(self):
        """The next StepEvent, None when nothing came within READ_WAIT_S, or _END once it ended."""
        if self._request.done:
            self._finish()
            return _END
        ev = self._request.poll(READ_WAIT_S)
        if ev is None:
            return None
        if ev.tokens:
            self._n_seen += len(ev.tokens)
            self._adapter._observe(self, ev.tokens)
        return ev if ev.text or ev.tokens else None

    def _finish(self) -> None:
        """Counts the request out, once, after the engine let go of it (any thread)."""
        adapter = self._adapter
        with adapter._lock:
            if self._finished:
                return
            self._finished = True
        self.finish_reason = self._request.finish_reason
        self.stats = self._request.current_stats()
        adapter._count_out(self)


class EngineAdapter:
    def __init__(self, generator, *, n_slots: int = 1, queue_size: int = 64, metrics: Optional[ServerMetrics] = None) -> None:
        if n_slots < 1 or queue_size < 0:
            raise ValueError("n_slots must be >= 1 and queue_size >= 0")
        self.generator = generator
        self.n_slots = n_slots
        self.queue_size = queue_size
        self.metrics = metrics
        self.n_parallel = max(1, int(getattr(generator, "n_parallel", 1) or 1))
        # One outstanding read per admitted request at most, so a read never waits for a thread.
        self._readers = ThreadPoolExecutor(max_workers=min(1024, n_slots + queue_size + 1),
                                           thread_name_prefix="specgen-reader")
        self._lock = threading.Lock()
        self._live: Set[RequestHandle] = set()
        self._kv_rows: Dict[int, int] = {}
        self._closed = False
        if metrics is not None:
            metrics.before_scrape = self.update_gauges

    # -- facts --------------------------------------------------------------------------------
    @property
    def n_admitted(self) -> int:
        """Requests admitted and not yet finished."""
        return len(self._live)

    def update_gauges(self) -> None:
        """Running and waiting requests as the engine counts them; KV rows of the live requests."""
        if not self.metrics:
            return
        core = self.generator._core
        if core is None:  # closed
            running, waiting = 0, 0
        else:
            running, waiting = self.n_parallel - core.n_free_slots, core.n_waiting
        self.metrics.requests_running.set(running)
        self.metrics.requests_waiting.set(waiting)
        with self._lock:
            rows = sum(self._kv_rows.values())
        n_ctx = self.generator.n_ctx * self.n_parallel if core is not None else 0
        self.metrics.kv_cache_usage.set(min(1.0, rows / n_ctx) if n_ctx else 0.0)

    # -- requests -----------------------------------------------------------------------------
    def submit(self, tokens: List[int], params: Dict[str, Any]) -> RequestHandle:
        """Starts a request; raises QueueFull when n_slots + queue_size requests are already in (or
        the engine's queue is full), and the Generator's parameter errors as they are."""
        t_arrival = time.perf_counter()
        with self._lock:
            if self._closed:
                raise QueueFull("the server is shutting down")
            full = len(self._live) >= self.n_slots + self.queue_size
        if full:
            self._rejected()
            raise QueueFull(f"all {self.n_slots} slots are busy and the queue ({self.queue_size}) is full; retry later")
        try:
            request = self.generator._start(tokens, **params)
        except QueueFullError as e:
            self._rejected()
            raise QueueFull(str(e)) from None
        handle = RequestHandle(self, request, t_arrival)
        with self._lock:
            self._live.add(handle)
            self._kv_rows[id(handle)] = handle.n_prompt_tokens
            closed = self._closed
        if closed:  # close() ran while this one started
            handle.cancel()
        return handle

    def _rejected(self) -> None:
        if self.metrics:
            self.metrics.requests_rejected.inc()

    def _settle(self, handle: RequestHandle) -> None:
        """Finishes a cancelled or failed request once the engine has let go of it (off the loop)."""
        def settle() -> None:
            handle._request.cancel(True)
            handle._finish()

        try:
            self._readers.submit(settle)
        except RuntimeError:  # the reader pool is shut down: the server is going away
            handle._finish()

    def _observe(self, h: RequestHandle, new: List[int]) -> None:
        now = time.perf_counter()
        m = self.metrics
        if m:
            if h._t_last is None:
                m.ttft.observe(now - h.t_arrival)
                for _ in new[1:]:
                    m.itl.observe(0.0)
            else:
                share = (now - h._t_last) / len(new)
                for _ in new:
                    m.itl.observe(share)
            m.generation_tokens.inc(len(new))
        h._t_last = now
        with self._lock:
            if id(h) in self._kv_rows:
                self._kv_rows[id(h)] = h.n_prompt_tokens + h._n_seen

    def _count_out(self, h: RequestHandle) -> None:
        with self._lock:
            self._live.discard(h)
            self._kv_rows.pop(id(h), None)
        if self.metrics:
            self.metrics.e2e.observe(time.perf_counter() - h.t_arrival)
            self.metrics.record_finished(h.stats, h.finish_reason)

    def close(self) -> None:
        """Ends every request (finish_reason "cancelled") and stops the readers."""
        with self._lock:
            self._closed = True
            live = list(self._live)
        for h in live:
            h.cancel()
        self._readers.shutdown(wait=False)
