"""How long and how many: the server's limits on its clients, with uvicorn's and Starlette's own
mechanisms (no HTTP of ours).

- ``timeout`` (``--timeout``, llama-server's read/write timeout, 600 s by default): a request's head
  must arrive within it, and within HEAD_TIMEOUT_S at most (a connection that sends nothing or a half
  head is closed; uvicorn itself has no such timer, so GuardedH11Protocol adds one to uvicorn's h11
  protocol), its body too (BodyLimit answers 408), and each write of the response must go through
  within it (a client that stops reading a stream is dropped, its request cancelled).
- ``keep_alive`` (``--keep-alive-timeout``): an idle kept-alive connection is closed after it (uvicorn's
  timeout_keep_alive).
- ``max_connections`` (``--max-connections``): connections beyond it get a 503 with Retry-After and
  are closed (their head must come within REFUSED_HEAD_TIMEOUT_S); beyond twice it they are closed
  at once, so no flood of connections can take the process's file descriptors.
- Every 503 the server sends carries Retry-After (ResponseGuard).
"""
from __future__ import annotations

import asyncio
import json
import resource
from dataclasses import dataclass
from typing import Optional

RETRY_AFTER_S = 1
# A request head is a few hundred bytes: no honest client takes a minute over one (nginx's
# client_header_timeout default), while a connection flood holding half heads must not hold the
# connection slots for the whole --timeout.
HEAD_TIMEOUT_S = 60.0
REFUSED_HEAD_TIMEOUT_S = 10.0
# Descriptors the process needs besides its connections (model file, threads' pipes, logs, Python).
_SPARE_FDS = 64


@dataclass(frozen=True)
class HttpLimits:
    timeout: float = 600.0
    keep_alive: float = 5.0
    max_connections: int = 256

    def __post_init__(self) -> None:
        if not self.timeout > 0:
            raise ValueError(f"--timeout must be > 0 seconds, got {self.timeout}")
        if not self.keep_alive > 0:
            raise ValueError(f"--keep-alive-timeout must be > 0 seconds, got {self.keep_alive}")
        if self.max_connections < 1:
            raise ValueError(f"--max-connections must be >= 1, got {self.max_connections}")


def _error_body(message: str, code: str) -> bytes:
    return json.dumps({"error": {"message": message, "type": "server_overloaded", "param": None, "code": code}}).encode()


async def _too_many_connections(scope, receive, send) -> None:
    """The ASGI app a connection past max_connections gets instead of the server's."""
    if scope["type"] != "http":
        return
    body = _error_body("the server has too many open connections; retry later", "too_many_connections")
    await send({"type": "http.response.start", "status": 503, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
        (b"retry-after", str(RETRY_AFTER_S).encode()), (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})


def guarded_protocol(limits: HttpLimits) -> type:
    """uvicorn's h11 protocol with a deadline for each request's head and the connection cap."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class GuardedH11Protocol(H11Protocol):
        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            self._head_timer: Optional[asyncio.TimerHandle] = None
            self._head_timeout = min(limits.timeout, HEAD_TIMEOUT_S)
            n_open = len(self.connections)
            if n_open > 2 * limits.max_connections:
                transport.close()
                return
            if n_open > limits.max_connections:
                self.app = _too_many_connections
                self._head_timeout = min(limits.timeout, REFUSED_HEAD_TIMEOUT_S)
            self._watch_head()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            self._watch_head()

        def connection_lost(self, exc) -> None:
            self._stop_head_timer()
            super().connection_lost(exc)

        def _watch_head(self) -> None:
            # Between requests uvicorn's keep-alive timer runs; the head timer starts with the
            # connection or with a request's first bytes and is not restarted by more of them.
            waiting_for_head = self.conn.their_state is h11.IDLE and not self.transport.is_closing()
            if waiting_for_head and self._head_timer is None and (self.cycle is None or self.cycle.response_complete):
                self._head_timer = self.loop.call_later(self._head_timeout, self._head_too_slow)
            elif not waiting_for_head:
                self._stop_head_timer()

        def _stop_head_timer(self) -> None:
            if getattr(self, "_head_timer", None) is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_too_slow(self) -> None:
            self._head_timer = None
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                self.transport.close()

        def on_response_complete(self) -> None:
            self._stop_head_timer()
            super().on_response_complete()

    return GuardedH11Protocol


class ResponseGuard:
    """ASGI middleware: Retry-After on every 503, and each write of a response within ``timeout``
    seconds (a client that stops reading is dropped: the app's send fails and the route cancels its
    request)."""

    def __init__(self, app, timeout: float) -> None:
        self.app = app
        self.timeout = timeout

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def guarded_send(message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 503:
                headers = list(message.get("headers", []))
                if not any(k.lower() == b"retry-after" for k, _ in headers):
                    headers.append((b"retry-after", str(RETRY_AFTER_S).encode()))
                message = dict(message, headers=headers)
            try:
                await asyncio.wait_for(send(message), self.timeout)
            except asyncio.TimeoutError:
                raise ClientTooSlow(f"a write waited more than {self.timeout:g} s for the client") from None

        try:
            await self.app(scope, receive, guarded_send)
        except ClientTooSlow:
            pass  # uvicorn closes a connection whose response did not complete


class ClientTooSlow(OSError):
    """A response write timed out (an OSError: Starlette treats it as the client going away)."""


def ensure_file_limit(limits: HttpLimits) -> None:
    """Raises the soft limit on open files to what the connection cap needs (up to the hard limit);
    ValueError naming both when the hard limit is too low."""
    need = 2 * limits.max_connections + _SPARE_FDS
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= need:
        return
    if hard != resource.RLIM_INFINITY and hard < need:
        raise ValueError(f"--max-connections {limits.max_connections} needs {need} open files, but the hard limit "
                         f"(ulimit -Hn) is {hard}: lower --max-connections to {max(1, (hard - _SPARE_FDS) // 2)}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))


def uvicorn_config(app, *, host: str, port: int, limits: HttpLimits, ssl_keyfile: Optional[str] = None,
                   ssl_certfile: Optional[str] = None, log_level: str = "warning"):
    """The uvicorn.Config ``specgen serve`` runs (tests run the same one in process)."""
    import uvicorn

    return uvicorn.Config(app, host=host, port=port, http=guarded_protocol(limits), timeout_keep_alive=limits.keep_alive,
                          ssl_keyfile=ssl_keyfile, ssl_certfile=ssl_certfile, log_level=log_level, access_log=False,
                          timeout_graceful_shutdown=5, lifespan="on")
