"""The FastAPI application: one Generator (loaded once, by the caller), its engine adapter, the chat
template (compiled once, rendered under its budget off the event loop), metrics and the routes, with
OpenAI's error object for every failure; API keys, body and write limits and Retry-After as ASGI
middleware (specgen.server.security, body_limit, http_limits)."""
from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from typing import Optional, Sequence

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from specgen import _core
from specgen.server.body_limit import BodyLimit
from specgen.server.chat_prompts import ChatPrompts
from specgen.server.engine import EngineAdapter
from specgen.server.errors import APIError, error_response
from specgen.server.json_bodies import JsonBodies
from specgen.server.http_limits import ResponseGuard
from specgen.server.metrics import ServerMetrics
from specgen.server.security import ApiKeyAuth
from specgen.server.token_budget import DEFAULT_CHAT_MAX_TOKENS, DEFAULT_COMPLETION_MAX_TOKENS

DEFAULT_MAX_REQUEST_BYTES = 4 << 20


@dataclass
class ServerState:
    generator: object
    engine: EngineAdapter
    metrics: ServerMetrics
    model_name: str
    chat_template: object
    chat_template_error: str
    max_tokens_limit: int
    created: int
    chat_prompts: Optional[ChatPrompts] = None
    # True: a request naming another model gets 404 (a multi-model setup behind a router); False: any
    # name is served by the one model loaded, as llama-server does (--strict-model).
    strict_model: bool = False


def _validation_message(exc: RequestValidationError) -> tuple:
    errors = exc.errors()
    if not errors:
        return "invalid request", None
    e = errors[0]
    loc = [str(x) for x in e.get("loc", ()) if x != "body"]
    if e.get("type") == "json_invalid":
        return f"the body is not valid JSON: {e.get('ctx', {}).get('error', e.get('msg'))}", None
    where = ".".join(loc) or "body"
    return f"{where}: {e.get('msg')}", (loc[0] if loc else None)


def create_app(generator, *, model_name: Optional[str] = None, chat_template: Optional[str] = None,
               n_slots: int = 1, queue_size: int = 64, max_tokens_limit: int = -1,
               max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES, api_keys: Sequence[str] = (),
               disable_docs: bool = False, timeout: float = 600.0, template_budget=None,
               allowed_origins: Sequence[str] = (), strict_model: bool = False) -> FastAPI:
    """The server app over ``generator``. ``chat_template``: a file or shipped template name that
    overrides the GGUF's (a bad one raises ChatTemplateError here, at startup). ``api_keys``: when
    given, every route but /health needs one (Bearer). ``disable_docs``: no /docs, /redoc,
    /openapi.json. ``timeout``: seconds a request body may take to arrive and each response write to
    go through (``--timeout``). ``template_budget``: specgen.template_budget.RenderBudget (None: its
    defaults). ``allowed_origins``: browser origins CORS lets in ("*": any; none: CORS off).
    ``strict_model``: 404 for a request naming a model other than ``model_name`` (else any name is
    served, as llama-server does)."""
    from specgen.chat_template import ChatTemplateError, template_for

    name = model_name or os.path.basename(str(generator.model_path))
    metrics = ServerMetrics(name)
    engine = EngineAdapter(generator, n_slots=n_slots, queue_size=queue_size, metrics=metrics)
    template, template_error = None, ""
    try:
        template = template_for(generator, chat_template, template_budget)
    except ChatTemplateError as e:
        if chat_template is not None:
            raise
        template_error = str(e)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        yield
        engine.close()
        if chat_prompts is not None:
            chat_prompts.close()

    chat_prompts = ChatPrompts(generator, template) if template is not None else None
    docs = {"docs_url": None, "redoc_url": None, "openapi_url": None} if disable_docs else {}
    app = FastAPI(title="specgen", version=_core.version(), lifespan=lifespan, **docs,
                  description="OpenAI-compatible completions over specgen's speculative-decoding engine. A request "
                              f"without max_tokens generates at most {DEFAULT_COMPLETION_MAX_TOKENS} tokens "
                              f"(/v1/completions) or {DEFAULT_CHAT_MAX_TOKENS} (/v1/chat/completions), never past "
                              "the context; one whose prompt plus max_tokens exceeds the context gets a 400.")
    app.state.specgen = ServerState(generator, engine, metrics, name, template, template_error, max_tokens_limit,
                                    int(time.time()), chat_prompts)
    app.state.specgen.strict_model = strict_model

    @app.exception_handler(APIError)
    async def _api_error(request: Request, exc: APIError):
        return exc.response()

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError):
        message, param = _validation_message(exc)
        return error_response(400, message, param=param)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException):
        kind = "not_found_error" if exc.status_code == 404 else "invalid_request_error"
        return error_response(exc.status_code, str(exc.detail), type=kind)

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception):
        return error_response(500, f"internal error: {type(exc).__name__}: {exc}", type="internal_error")

    from specgen.server.native_routes import router as native_router
    from specgen.server.routes import router

    app.include_router(router)
    app.include_router(native_router)  # llama-server's /completion, /tokenize, /detokenize, /props, /slots
    app.add_middleware(JsonBodies)  # a JSON body without Content-Type: application/json is still JSON
    # Outermost last: Retry-After and write timeouts see every response, the key is checked before
    # any body is read.
    app.add_middleware(BodyLimit, max_bytes=max_request_bytes, timeout=timeout)
    if api_keys:
        app.add_middleware(ApiKeyAuth, keys=list(api_keys))
    app.add_middleware(ResponseGuard, timeout=timeout)
    if allowed_origins:  # outermost: preflights and every answer, a 401 or 503 too, carry the CORS headers
        from starlette.middleware.cors import CORSMiddleware

        app.add_middleware(CORSMiddleware, allow_origins=list(allowed_origins), allow_methods=["GET", "POST", "OPTIONS"],
                           allow_headers=["*"], expose_headers=["X-Specgen-Chat-Template"])

    return app
