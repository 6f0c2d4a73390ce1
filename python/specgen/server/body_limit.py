"""ASGI middleware: a request body over ``max_bytes`` gets 413 before any route parses it (a declared
Content-Length is refused at once; a chunked body is counted as it arrives), and a body that does not
arrive in full within ``timeout`` seconds (a short body under a longer Content-Length, a trickle) gets
408 and the connection is closed (specgen.server.http_limits)."""
from __future__ import annotations

import asyncio
import json
import time


class BodyLimit:
    def __init__(self, app, max_bytes: int, timeout: float = 600.0) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.timeout = timeout

    @staticmethod
    async def _refuse(send, status: int, message: str, code: str) -> None:
        body = json.dumps({"error": {"message": message, "type": "invalid_request_error", "param": None,
                                     "code": code}}).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope.get("method") in ("GET", "HEAD", "OPTIONS"):
            return await self.app(scope, receive, send)
        too_large = f"request body exceeds {self.max_bytes} bytes"
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = -1
                if declared > self.max_bytes:
                    return await self._refuse(send, 413, too_large, "request_too_large")
        # Read the body here (bounded in size and time), then replay it to the app.
        chunks, total = [], 0
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                msg = await asyncio.wait_for(receive(), max(0.0, deadline - time.monotonic()))
            except asyncio.TimeoutError:
                return await self._refuse(send, 408, f"the request body did not arrive within {self.timeout:g} s "
                                                     f"({total} bytes came)", "request_timeout")
            if msg["type"] == "http.disconnect":
                return
            chunk = msg.get("body", b"")
            total += len(chunk)
            if total > self.max_bytes:
                return await self._refuse(send, 413, too_large, "request_too_large")
            chunks.append(chunk)
            if not msg.get("more_body", False):
                break
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)
