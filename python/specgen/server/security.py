"""API keys (``--api-key``, ``--api-key-file``; llama-server's and vLLM's flags): every request but
/health and CORS preflights must carry ``Authorization: Bearer <key>`` with one of the keys, else 401
in OpenAI's error shape. Keys are compared in constant time (hmac.compare_digest), each one, so the
time taken says nothing about which key or how much of one matched."""
from __future__ import annotations

import hmac
import json
from typing import Iterable, List, Optional, Sequence

# Open without a key, as llama-server keeps /health open: load balancers and probes carry no key.
OPEN_PATHS = frozenset(["/health"])


def load_api_keys(keys: Optional[Iterable[str]] = None, key_file: Optional[str] = None) -> List[str]:
    """The keys from ``--api-key`` values (each may list several, comma-separated, as llama-server's)
    and from ``--api-key-file`` (one per line; blank lines and lines starting with # skipped).
    ValueError for an empty key or an unreadable file."""
    out: List[str] = []
    for value in keys or ():
        out += [k.strip() for k in str(value).split(",")]
    if key_file is not None:
        try:
            with open(key_file, encoding="utf-8") as f:
                lines = f.read().splitlines()
        except (OSError, UnicodeDecodeError) as e:
            raise ValueError(f"--api-key-file {key_file}: {e}") from None
        file_keys = [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]
        if not file_keys:
            raise ValueError(f"--api-key-file {key_file} holds no key")
        out += file_keys
    if any(not k for k in out):
        raise ValueError("an API key must not be empty")
    if any(not k.isprintable() or " " in k for k in out):
        raise ValueError("an API key must be printable and hold no spaces")
    return out


class ApiKeyAuth:
    """ASGI middleware: refuses a request without one of ``keys`` (module docstring)."""

    def __init__(self, app, keys: Sequence[str]) -> None:
        if not keys:
            raise ValueError("ApiKeyAuth needs at least one key")
        self.app = app
        self._keys = [k.encode() for k in keys]

    def _allowed(self, presented: bytes) -> bool:
        ok = False
        for key in self._keys:  # every key, always
            ok |= hmac.compare_digest(presented, key)
        return ok

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope.get("method") == "OPTIONS" or scope.get("path") in OPEN_PATHS:
            return await self.app(scope, receive, send)
        presented = b""
        for name, value in scope.get("headers", []):
            if name == b"authorization":
                scheme, _, token = value.partition(b" ")
                if scheme.lower() == b"bearer":
                    presented = token.strip()
        if presented and self._allowed(presented):
            return await self.app(scope, receive, send)
        message = "Invalid API key" if presented else "Missing API key: send the header Authorization: Bearer <key>"
        body = json.dumps({"error": {"message": message, "type": "invalid_request_error", "param": None,
                                     "code": "invalid_api_key"}}).encode()
        await send({"type": "http.response.start", "status": 401, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
            (b"www-authenticate", b"Bearer")]})
        await send({"type": "http.response.body", "body": body})
