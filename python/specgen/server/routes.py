"""The OpenAI routes: /v1/completions, /v1/chat/completions, /v1/models, plus /health and /metrics.

A request is checked (schema, model, parameters, prompt length) before it takes a slot; then the
engine adapter runs it and the route turns its StepEvents into one response or a server-sent-event
stream (OpenAI's chunks, then ``data: [DONE]``). A watcher on the connection cancels the request the
moment the client goes away, streaming or not.
"""
from __future__ import annotations

import asyncio
import json
import os
import time
from typing import Any, AsyncIterator, Dict, List, Optional

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.concurrency import run_in_threadpool

from specgen import openai_compat as oc
from specgen.server.engine import QueueFull, RequestHandle
from specgen.errors import ContextOverflowError
from specgen.server.errors import APIError, from_exception
from specgen.server.metrics import CONTENT_TYPE_LATEST
from specgen.server.schemas import ChatCompletionRequest, CompletionRequest
from specgen.server.token_budget import DEFAULT_CHAT_MAX_TOKENS, DEFAULT_COMPLETION_MAX_TOKENS, fit_max_tokens

router = APIRouter()


def _state(request: Request):
    return request.app.state.specgen


def _check_model(state, model: Optional[str]) -> None:
    # Without --strict-model any name is served by the one model loaded, as llama-server does.
    if model and model != state.model_name and state.strict_model:
        raise APIError(404, f"The model '{model}' does not exist (this server serves '{state.model_name}')",
                       type="not_found_error", param="model", code="model_not_found")


async def _watch_disconnect(request: Request, handle: RequestHandle) -> None:
    while True:
        msg = await request.receive()
        if msg["type"] == "http.disconnect":
            handle.cancel()
            return


def _sse(obj: Dict[str, Any]) -> str:
    return "data: " + json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n\n"


async def _serve(request: Request, state, tokens: List[int], params: Dict[str, Any], builder: oc.ResponseBuilder,
                 stream: bool) -> Response:
    try:
        handle = state.engine.submit(tokens, params)
    except QueueFull as e:
        raise APIError(503, str(e), type="server_overloaded", code="queue_full")
    except Exception as e:  # the Generator's parameter checks: the client's 400
        raise from_exception(e)
    watcher = asyncio.ensure_future(_watch_disconnect(request, handle))
    try:
        # The first event (or the end, or the request's error) before any header: a bad parameter
        # found by the engine is still a plain 400.
        first = await handle.__anext__()
    except StopAsyncIteration:
        first = None
    except BaseException as e:
        watcher.cancel()
        handle.cancel()
        if isinstance(e, asyncio.CancelledError):
            raise
        raise from_exception(e)

    if not stream:
        try:
            if first is not None:
                builder.add(first)
                async for ev in handle:
                    builder.add(ev)
        except Exception as e:
            raise from_exception(e)
        finally:
            watcher.cancel()
            handle.cancel()
        return JSONResponse(builder.response(handle.finish_reason, handle.stats, handle.n_prompt_tokens))

    async def events() -> AsyncIterator[str]:
        try:
            for c in builder.first_chunks():
                yield _sse(c)
            if first is not None:
                yield _sse(builder.chunk(first))
                async for ev in handle:
                    yield _sse(builder.chunk(ev))
            yield _sse(builder.final_chunk(handle.finish_reason, handle.stats, handle.n_prompt_tokens))
        except Exception as e:  # after the headers: the error goes into the stream
            err = from_exception(e)
            yield _sse({"error": {"message": err.message, "type": err.type, "param": err.param, "code": err.code}})
        finally:
            watcher.cancel()
            handle.cancel()  # a client gone mid-stream: stop the sequence, free the slot
        yield "data: [DONE]\n\n"

    return _RequestStream(events(), handle, watcher)


class _RequestStream(StreamingResponse):
    """An SSE response that cancels its request however it ends: a client gone before the first
    chunk or during a write never leaves the request running (or counted) until garbage collection."""

    def __init__(self, events: AsyncIterator[str], handle: RequestHandle, watcher: asyncio.Future) -> None:
        super().__init__(events, media_type="text/event-stream",
                         headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        self._handle, self._watcher = handle, watcher

    async def __call__(self, scope, receive, send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._watcher.cancel()
            self._handle.cancel()
            await self.body_iterator.aclose()


@router.post("/v1/completions")
async def completions(body: CompletionRequest, request: Request):
    state = _state(request)
    _check_model(state, body.model)
    try:
        oc.check_unsupported(echo=bool(body.echo), suffix=body.suffix)
        n_top = oc.completion_logprobs(body.logprobs)
        params = oc.generation_params(
            max_tokens=DEFAULT_COMPLETION_MAX_TOKENS if body.max_tokens is None else body.max_tokens,
            temperature=body.temperature,
            top_p=body.top_p, top_k=body.top_k, min_p=body.min_p, repeat_penalty=body.repeat_penalty,
            frequency_penalty=body.frequency_penalty, presence_penalty=body.presence_penalty, stop=body.stop_list(),
            seed=body.seed, n=body.n, best_of=body.best_of, logit_bias=body.logit_bias, logprobs=n_top,
            max_tokens_limit=state.max_tokens_limit)
        # off the event loop: a long prompt's tokenization would stall every open stream
        tokens = await run_in_threadpool(oc.prompt_tokens, state.generator, body.prompt)
        params["max_tokens"] = fit_max_tokens(state.generator, tokens, params["max_tokens"],
                                              body.max_tokens is not None, "prompt")
    except APIError:
        raise
    except ContextOverflowError as e:  # the prompt alone is too long: name the field that holds it
        raise APIError(400, str(e), code="context_length_exceeded", param="prompt")
    except Exception as e:
        raise from_exception(e)
    builder = oc.ResponseBuilder(state.generator, "completion", state.model_name, n_top)
    return await _serve(request, state, tokens, params, builder, bool(body.stream))


@router.post("/v1/chat/completions")
async def chat_completions(body: ChatCompletionRequest, request: Request):
    state = _state(request)
    _check_model(state, body.model)
    try:
        if state.chat_template is None:
            raise APIError(400, state.chat_template_error, code="no_chat_template")
        if body.tools or body.tool_choice not in (None, "none"):
            raise oc.InvalidParameterError("tools / tool_choice are not supported")
        if body.response_format and body.response_format.get("type", "text") != "text":
            raise oc.InvalidParameterError(f"response_format {body.response_format.get('type')!r} is not supported (only 'text')")
        n_top = oc.chat_logprobs(body.logprobs, body.top_logprobs)
        max_tokens = body.max_completion_tokens if body.max_completion_tokens is not None else body.max_tokens
        params = oc.generation_params(
            max_tokens=DEFAULT_CHAT_MAX_TOKENS if max_tokens is None else max_tokens, temperature=body.temperature,
            top_p=body.top_p, top_k=body.top_k,
            min_p=body.min_p, repeat_penalty=body.repeat_penalty, frequency_penalty=body.frequency_penalty,
            presence_penalty=body.presence_penalty, stop=body.stop_list(), seed=body.seed, n=body.n,
            logit_bias=body.logit_bias, logprobs=n_top, max_tokens_limit=state.max_tokens_limit)
        messages = [m.model_dump(exclude_none=True) for m in body.messages]
        # rendered under the template's budget on its own threads (specgen.server.chat_prompts)
        tokens = await state.chat_prompts.tokens(messages)
        params["max_tokens"] = fit_max_tokens(state.generator, tokens, params["max_tokens"], max_tokens is not None,
                                              "messages")
    except APIError:
        raise
    except Exception as e:
        raise from_exception(e)
    builder = oc.ResponseBuilder(state.generator, "chat", state.model_name, n_top)
    response = await _serve(request, state, tokens, params, builder, bool(body.stream))
    # Which template rendered the chat: "gguf", "builtin:NAME" (the GGUF has none) or "file:PATH".
    response.headers["X-Specgen-Chat-Template"] = getattr(state.chat_template, "origin", "unknown")
    return response


@router.get("/v1/models")
async def models(request: Request):
    state = _state(request)
    g = state.generator
    return {"object": "list", "data": [{
        "id": state.model_name, "object": "model", "created": state.created, "owned_by": "specgen",
        "meta": {"n_ctx": g.n_ctx, "n_vocab": g.n_vocab, "draft": None if g.draft is None else str(g.draft),
                 "n_slots": state.engine.n_slots},
    }]}


@router.get("/health")
async def health(request: Request):
    state = _state(request)
    # pid: which process answered (behind Ray Serve's router, which replica).
    return {"status": "ok", "slots": state.engine.n_slots, "requests": state.engine.n_admitted, "pid": os.getpid()}


@router.get("/metrics")
async def metrics(request: Request):
    return Response(_state(request).metrics.render(), media_type=CONTENT_TYPE_LATEST)
