"""OpenAI's error object ({"error": {"message", "type", "param", "code"}}) for every failure the
server answers, and the mapping from specgen's typed exceptions to HTTP status codes."""
from __future__ import annotations

from typing import Optional

from fastapi.responses import JSONResponse

from specgen.errors import ContextOverflowError, InvalidParameterError, SpecgenNotImplementedError


class APIError(Exception):
    def __init__(self, status: int, message: str, type: str = "invalid_request_error",
                 param: Optional[str] = None, code: Optional[str] = None) -> None:
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type, param, code

    def response(self) -> JSONResponse:
        return error_response(self.status, self.message, self.type, self.param, self.code)


def error_response(status: int, message: str, type: str = "invalid_request_error",
                   param: Optional[str] = None, code: Optional[str] = None) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": type, "param": param, "code": code}}, status_code=status)


def from_exception(e: BaseException) -> APIError:
    """The API error a request failure becomes (a bad parameter or prompt is the client's: 400)."""
    from specgen.chat_template import ChatTemplateError

    if isinstance(e, APIError):
        return e
    if isinstance(e, ContextOverflowError):
        return APIError(400, str(e), code="context_length_exceeded", param="messages")
    if isinstance(e, (InvalidParameterError, SpecgenNotImplementedError, ChatTemplateError)):
        return APIError(400, str(e))
    return APIError(500, f"internal error: {type(e).__name__}: {e}", type="internal_error")
