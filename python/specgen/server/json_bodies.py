"""ASGI middleware: every POST body is read as JSON, as llama-server reads it, whatever Content-Type the
client sent for it. ``curl -d '{...}'`` sends application/x-www-form-urlencoded, and some clients send
text/plain or no Content-Type at all: those bodies are parsed as JSON (an invalid one gets the usual 400
"the body is not valid JSON"). A body declared as another format (multipart/form-data, XML, ...) gets a
400 that says to send JSON with Content-Type: application/json, instead of a schema error about a
"dictionary" the client never sent."""
from __future__ import annotations

import json

# Content types read as JSON: none given, curl's default for -d, plain text.
_READ_AS_JSON = (b"", b"application/x-www-form-urlencoded", b"text/plain")


def _media_type(headers) -> bytes:
    for name, value in headers:
        if name == b"content-type":
            return value.split(b";", 1)[0].strip().lower()
    return b""


class JsonBodies:
    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            return await self.app(scope, receive, send)
        media = _media_type(scope.get("headers", []))
        if media == b"application/json" or media.endswith(b"+json"):
            return await self.app(scope, receive, send)
        if media in _READ_AS_JSON:
            headers = [(k, v) for k, v in scope.get("headers", []) if k != b"content-type"]
            scope = dict(scope, headers=headers + [(b"content-type", b"application/json")])
            return await self.app(scope, receive, send)
        message = (f"the request body must be JSON (Content-Type: application/json), got Content-Type "
                   f"{media.decode('latin-1')}")
        body = json.dumps({"error": {"message": message, "type": "invalid_request_error", "param": None,
                                     "code": "unsupported_media_type"}}).encode()
        await send({"type": "http.response.start", "status": 400,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
