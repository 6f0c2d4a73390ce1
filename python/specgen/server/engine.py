"""The engine adapter: the server's only contact with the Generator.

``submit(tokens, params)`` admits a request (QueueFull when every slot and the queue are taken) and
returns a RequestHandle: an async iterator of specgen.steps.StepEvent (text piece, token ids,
logprobs), ``cancel()``, and, once it ends, ``finish_reason``, ``stats`` and ``n_prompt_tokens``.

Requests run on ``n_slots`` worker threads against ONE Generator (the model is loaded once). The
Generator batches concurrent requests (engine/scheduler.h): up to its ``n_parallel`` are decoded in
the same engine steps, so that many workers hold an engine slot at once (``specgen serve -np N``
makes both N). A handle cancelled (client gone) ends its engine request at the next step boundary,
which frees the slot at once.
"""
from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, List, Optional

from specgen.server.metrics import ServerMetrics
from specgen.steps import StepEvent, StepStream


class QueueFull(Exception):
    """Every slot is busy and the waiting queue is full."""


_END = object()


class RequestHandle:
    def __init__(self, loop: asyncio.AbstractEventLoop, tokens: List[int], params: Dict[str, Any]) -> None:
        self.tokens = tokens
        self.params = params
        self.t_arrival = time.perf_counter()
        self.finish_reason: Optional[str] = None
        self.stats: Dict[str, Any] = {}
        self.n_prompt_tokens = 0
        self._loop = loop
        self._queue: asyncio.Queue = asyncio.Queue()
        self._cancel = threading.Event()
        self._stream: Optional[StepStream] = None

    # -- consumer side (the event loop) -------------------------------------------------------
    def __aiter__(self):
        return self

    async def __anext__(self) -> StepEvent:
        item = await self._queue.get()
        if item is _END:
            self._queue.put_nowait(_END)  # later calls end too
            raise StopAsyncIteration
        if isinstance(item, BaseException):
            raise item
        return item

    def cancel(self) -> None:
        self._cancel.set()
        stream = self._stream
        if stream is not None:
            stream.cancel_requested = True

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    # -- producer side (a worker thread) ------------------------------------------------------
    def _push(self, item) -> None:
        try:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, item)
        except RuntimeError:  # the loop is closed: nobody is listening any more
            pass


class EngineAdapter:
    def __init__(self, generator, *, n_slots: int = 1, queue_size: int = 64, metrics: Optional[ServerMetrics] = None) -> None:
        if n_slots < 1 or queue_size < 0:
            raise ValueError("n_slots must be >= 1 and queue_size >= 0")
        self.generator = generator
        self.n_slots = n_slots
        self.queue_size = queue_size
        self.metrics = metrics
        # How many requests the Generator steps at once (1 today; a batching Generator says more).
        self.engine_concurrency = max(1, min(n_slots, int(getattr(generator, "n_parallel", 1) or 1)))
        self._engine = threading.BoundedSemaphore(self.engine_concurrency)
        self._executor = ThreadPoolExecutor(max_workers=n_slots, thread_name_prefix="specgen-slot")
        self._lock = threading.Lock()
        self._admitted = 0
        self._running = 0
        self._kv_rows: Dict[int, int] = {}
        self._closed = False

    # -- facts --------------------------------------------------------------------------------
    @property
    def n_admitted(self) -> int:
        return self._admitted

    @property
    def n_running(self) -> int:
        return self._running

    # -- requests -----------------------------------------------------------------------------
    def submit(self, tokens: List[int], params: Dict[str, Any]) -> RequestHandle:
        """Admits a request; raises QueueFull when n_slots + queue_size requests are already in."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._closed:
                raise QueueFull("the server is shutting down")
            if self._admitted >= self.n_slots + self.queue_size:
                if self.metrics:
                    self.metrics.requests_rejected.inc()
                raise QueueFull(f"all {self.n_slots} slots are busy and the queue ({self.queue_size}) is full; retry later")
            self._admitted += 1
            self._gauges()
        handle = RequestHandle(loop, tokens, params)
        self._executor.submit(self._work, handle)
        return handle

    def _gauges(self) -> None:  # under self._lock
        if self.metrics:
            self.metrics.requests_running.set(self._running)
            self.metrics.requests_waiting.set(self._admitted - self._running)
            n_ctx = self.generator.n_ctx * self.engine_concurrency
            self.metrics.kv_cache_usage.set(min(1.0, sum(self._kv_rows.values()) / n_ctx) if n_ctx else 0.0)

    def _work(self, h: RequestHandle) -> None:
        holds_engine = False
        try:
            # Wait for the engine; a request cancelled while waiting never starts.
            while not self._engine.acquire(timeout=0.02):
                if h.cancelled:
                    return
            holds_engine = True
            if h.cancelled:
                return
            with self._lock:
                self._running += 1
                self._gauges()
            self._run(h)
        except BaseException as e:  # reported to the consumer (a bad parameter: its 400)
            h._push(e)
        finally:
            with self._lock:
                if holds_engine:
                    self._running -= 1
                self._admitted -= 1
                self._kv_rows.pop(id(h), None)
                self._gauges()
            if holds_engine:
                self._engine.release()
            h._push(_END)

    def _run(self, h: RequestHandle) -> None:
        m = self.metrics
        stream = StepStream(self.generator, h.tokens, **h.params)  # runs the prefill
        h._stream = stream
        h.n_prompt_tokens = stream.n_prompt_tokens
        if h.cancelled:
            stream.cancel_requested = True
        t_last = None
        n_rows = stream.n_prompt_tokens
        for ev in stream:
            now = time.perf_counter()
            if ev.tokens and m:
                if t_last is None:
                    m.ttft.observe(now - h.t_arrival)
                    for _ in ev.tokens[1:]:
                        m.itl.observe(0.0)
                else:
                    share = (now - t_last) / len(ev.tokens)
                    for _ in ev.tokens:
                        m.itl.observe(share)
                m.generation_tokens.inc(len(ev.tokens))
            if ev.tokens:
                t_last = now
                n_rows += len(ev.tokens)
                with self._lock:
                    self._kv_rows[id(h)] = n_rows
                    self._gauges()
            h._push(ev)
        h.finish_reason = stream.finish_reason
        h.stats = stream.stats
        if m:
            m.e2e.observe(time.perf_counter() - h.t_arrival)
            m.record_finished(stream.stats, stream.finish_reason)

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self._executor.shutdown(wait=False, cancel_futures=True)
