"""llama-server's native routes, as its web UI and scripts call them: ``POST /completion`` (also
``/completions``), ``POST /tokenize``, ``POST /detokenize``, ``GET /props`` and ``GET /slots``.

``/completion`` takes llama-server's body (``prompt``, ``n_predict`` or ``max_tokens``, ``temperature``,
``top_k``, ``top_p``, ``min_p``, ``repeat_penalty``, ``repeat_last_n``, ``seed``, ``stop``, ``stream``,
``ignore_eos``, ``return_tokens``) and answers with its fields: ``content``, ``stop``, ``stop_type``
("eos", "word", "limit"), ``tokens_predicted``, ``tokens_evaluated``, ``tokens_cached`` and ``timings``
(``prompt_n``, ``prompt_ms``, ``predicted_n``, ``predicted_ms`` and their per-token and per-second
figures). ``stream: true`` sends one ``data: {...}`` event per engine step with ``content`` and ``stop``
false, then a last event with ``stop`` true and the totals; as in llama-server there is no ``[DONE]``.
Unknown fields are ignored as llama-server ignores them; sampling features specgen does not have
(typical_p, mirostat, DRY, XTC, grammars, penalties other than repeat_penalty, n_probs) get a 400
naming them unless left at their neutral value. ``cache_prompt`` is accepted: the engine always reuses
a matching prompt prefix.

``/tokenize`` ({content, add_special=false, parse_special=true, with_pieces=false} -> {tokens}) and
``/detokenize`` ({tokens} -> {content}, control tokens written out) work as llama-server's.
``/props`` reports the default generation settings, ``total_slots``, ``model_path``, the chat template
and where it came from (``chat_template_source``: "gguf", "builtin:NAME" or "file:PATH"); ``/slots``
one entry per slot.
"""
from __future__ import annotations

import asyncio
import json
from typing import Any, AsyncIterator, Dict, List, Optional, Union

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from specgen import _core
from specgen import openai_compat as oc
from specgen.errors import ContextOverflowError
from specgen.server.engine import QueueFull
from specgen.server.errors import APIError, from_exception

router = APIRouter()

_SEED_MAX = 2**63 - 1

# Sampling fields of llama-server that specgen's sampler does not have, with the value that turns each off.
_NEUTRAL: Dict[str, Any] = {
    "typical_p": 1.0, "mirostat": 0, "frequency_penalty": 0.0, "presence_penalty": 0.0, "dry_multiplier": 0.0,
    "xtc_probability": 0.0, "n_probs": 0, "grammar": "", "json_schema": None, "logit_bias": None,
    "dynatemp_range": 0.0, "n_indent": 0,
}

_STOP_TYPE = {"eos": "eos", "stop": "word", "length": "limit"}


class NativeCompletionRequest(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)

    prompt: Union[str, List[int]] = Field(..., description="Text, or token ids")
    n_predict: Optional[int] = Field(None, ge=-1, description="Most tokens to generate; -1: until EOS or the context is full")
    max_tokens: Optional[int] = Field(None, ge=-1, description="Alias of n_predict")
    temperature: Optional[float] = Field(None, ge=0.0, le=1e6)
    top_k: Optional[int] = Field(None, ge=-1)
    top_p: Optional[float] = Field(None, gt=0.0, le=1.0)
    min_p: Optional[float] = Field(None, ge=0.0, le=1.0)
    repeat_penalty: Optional[float] = Field(None, gt=0.0, le=1e6)
    repeat_last_n: Optional[int] = Field(None, ge=-1)
    seed: Optional[int] = Field(None, ge=-1, le=_SEED_MAX, description="-1: a fresh random seed")
    stop: Optional[List[str]] = None
    stream: bool = False
    ignore_eos: bool = False
    return_tokens: bool = False
    cache_prompt: Optional[bool] = Field(None, description="accepted: a matching prompt prefix is always reused")


class TokenizeRequest(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)

    content: str = ""
    add_special: bool = False
    parse_special: bool = True
    with_pieces: bool = False


class DetokenizeRequest(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)

    tokens: List[int] = []


def _state(request: Request):
    return request.app.state.specgen


def _refuse_missing_features(body: NativeCompletionRequest) -> None:
    extra = body.model_extra or {}
    for name, neutral in _NEUTRAL.items():
        if name in extra and extra[name] not in (neutral, None) and not (neutral is None and extra[name] in ({}, [])):
            raise APIError(400, f"{name}={extra[name]!r} is not supported by specgen's sampler "
                                f"(leave it out or send {neutral!r})", param=name)


def _params(state, body: NativeCompletionRequest) -> Dict[str, Any]:
    n_predict = body.n_predict if body.n_predict is not None else body.max_tokens
    seed = None if body.seed is None or body.seed < 0 else body.seed
    params = oc.generation_params(max_tokens=-1 if n_predict is None else n_predict, temperature=body.temperature,
                                  top_p=body.top_p, top_k=body.top_k, min_p=body.min_p,
                                  repeat_penalty=body.repeat_penalty, stop=[s for s in body.stop or [] if s],
                                  seed=seed, max_tokens_limit=state.max_tokens_limit)
    if body.repeat_last_n is not None:
        params["repeat_last_n"] = body.repeat_last_n
    params["ignore_eos"] = body.ignore_eos
    return params


def generation_settings(state, params: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """llama-server's generation_settings: the context and the sampling parameters (a request's, or
    the defaults a request without them gets)."""
    g = state.generator
    p = params or oc.generation_params(max_tokens=-1, max_tokens_limit=state.max_tokens_limit)
    return {
        "n_ctx": g.n_ctx,
        "speculative": g.draft is not None,
        "draft": None if g.draft is None else str(g.draft),
        "params": {
            "n_predict": p["max_tokens"], "seed": -1 if p.get("seed") is None else p["seed"],
            "temperature": p["temperature"], "top_k": p["top_k"], "top_p": p["top_p"], "min_p": p["min_p"],
            "repeat_penalty": p["repeat_penalty"], "repeat_last_n": p.get("repeat_last_n", 64),
            "stop": list(p.get("stop") or []), "ignore_eos": bool(p.get("ignore_eos", False)),
        },
    }


def timings(stats: Dict[str, Any]) -> Dict[str, float]:
    """llama-server's timings from the engine's statistics: cache_n counts the prompt tokens reused from the
    slot's cache, prompt_n those computed, predicted_n the generated tokens; draft_n / draft_n_accepted
    the drafted and accepted tokens, when any was drafted. The prompt's last token
    runs with the first generated one, so a prompt the cache held but for that token computed no prefill
    rows: its per-token and per-second prompt figures are 0, not a division by next to no time."""
    prompt_n = int(stats.get("n_prompt_tokens", 0)) - int(stats.get("n_prompt_tokens_cached", 0))
    prompt_ms = float(stats.get("prefill_seconds", 0.0)) * 1e3
    predicted_n = int(stats.get("n_generated", 0))
    predicted_ms = float(stats.get("decode_seconds", 0.0)) * 1e3

    def per_token(ms: float, n: int) -> float:
        return ms / n if n > 0 else 0.0

    def per_second(ms: float, n: int) -> float:
        return 1e3 * n / ms if ms > 0 and n > 0 else 0.0

    rated_n = prompt_n if prompt_n > 1 else 0
    out = {"cache_n": int(stats.get("n_prompt_tokens_cached", 0)), "prompt_n": prompt_n, "prompt_ms": prompt_ms,
           "prompt_per_token_ms": per_token(prompt_ms, rated_n), "prompt_per_second": per_second(prompt_ms, rated_n),
           "predicted_n": predicted_n, "predicted_ms": predicted_ms,
           "predicted_per_token_ms": per_token(predicted_ms, predicted_n),
           "predicted_per_second": per_second(predicted_ms, predicted_n)}
    if int(stats.get("n_drafted", 0)) > 0:  # as llama-server: only when something was drafted
        out.update(draft_n=int(stats["n_drafted"]), draft_n_accepted=int(stats.get("n_accepted", 0)))
    return out


def _final(state, body: NativeCompletionRequest, params: Dict[str, Any], handle, content: str,
           tokens: List[int]) -> Dict[str, Any]:
    stats = dict(handle.stats) if handle.stats else {}
    stop_type = _STOP_TYPE.get(handle.finish_reason or "", "none")
    stops = params.get("stop") or []
    return {
        "index": 0, "content": content, "tokens": tokens if body.return_tokens else [], "id_slot": -1, "stop": True,
        "model": state.model_name, "tokens_predicted": int(stats.get("n_generated", len(tokens))),
        "tokens_evaluated": handle.n_prompt_tokens, "generation_settings": generation_settings(state, params),
        "prompt": body.prompt if isinstance(body.prompt, str) else state.generator.detokenize(body.prompt),
        "has_new_line": "\n" in content, "truncated": False, "stop_type": stop_type,
        # The engine reports that a stop string matched, not which; with one stop string it is that one.
        "stopping_word": stops[0] if stop_type == "word" and len(stops) == 1 else "",
        "tokens_cached": int(stats.get("n_prompt_tokens_cached", 0)), "timings": timings(stats),
    }


async def _watch_disconnect(request: Request, handle) -> None:
    while True:
        if (await request.receive())["type"] == "http.disconnect":
            handle.cancel()
            return


def _event(obj: Dict[str, Any]) -> str:
    return "data: " + json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n\n"


@router.post("/completion")
@router.post("/completions")
async def completion(body: NativeCompletionRequest, request: Request):
    """llama-server's native completion (see the module docstring)."""
    state = _state(request)
    try:
        _refuse_missing_features(body)
        params = _params(state, body)
        tokens = await run_in_threadpool(oc.prompt_tokens, state.generator, body.prompt)
    except APIError:
        raise
    except ContextOverflowError as e:
        raise APIError(400, str(e), code="context_length_exceeded", param="prompt")
    except Exception as e:
        raise from_exception(e)
    try:
        handle = state.engine.submit(tokens, params)
    except QueueFull as e:
        raise APIError(503, str(e), type="server_overloaded", code="queue_full")
    except Exception as e:
        raise from_exception(e)
    watcher = asyncio.ensure_future(_watch_disconnect(request, handle))

    if not body.stream:
        pieces: List[str] = []
        ids: List[int] = []
        try:
            async for ev in handle:
                pieces.append(ev.text)
                ids.extend(ev.tokens)
        except Exception as e:
            raise from_exception(e)
        finally:
            watcher.cancel()
            handle.cancel()
        return JSONResponse(_final(state, body, params, handle, "".join(pieces), ids))

    async def events() -> AsyncIterator[str]:
        ids: List[int] = []
        try:
            async for ev in handle:
                ids.extend(ev.tokens)
                yield _event({"index": 0, "content": ev.text, "tokens": ev.tokens if body.return_tokens else [],
                              "stop": False, "id_slot": -1, "tokens_predicted": len(ids),
                              "tokens_evaluated": handle.n_prompt_tokens})
            yield _event(_final(state, body, params, handle, "", ids))
        except Exception as e:  # after the headers: the error goes into the stream
            err = from_exception(e)
            yield _event({"error": {"code": err.status, "message": err.message, "type": err.type}})
        finally:
            watcher.cancel()
            handle.cancel()

    return StreamingResponse(events(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


@router.post("/tokenize")
async def tokenize(body: TokenizeRequest, request: Request):
    g = _state(request).generator
    try:
        ids = await run_in_threadpool(g.tokenize, body.content, body.add_special, body.parse_special)
    except Exception as e:
        raise from_exception(e)
    if not body.with_pieces:
        return {"tokens": ids}
    pieces = []
    for t in ids:
        raw = bytes(g._g.token_bytes(t))
        try:
            piece: Union[str, List[int]] = raw.decode("utf-8")
        except UnicodeDecodeError:  # part of a character: its bytes, as llama-server sends them
            piece = list(raw)
        pieces.append({"id": t, "piece": piece})
    return {"tokens": pieces}


@router.post("/detokenize")
async def detokenize(body: DetokenizeRequest, request: Request):
    g = _state(request).generator
    try:
        return {"content": await run_in_threadpool(g.detokenize, body.tokens)}
    except Exception as e:
        raise from_exception(e)


def _template_facts(state) -> Dict[str, Any]:
    template = state.chat_template
    if template is None:
        return {"chat_template": "", "chat_template_source": None, "chat_template_error": state.chat_template_error}
    return {"chat_template": template.source, "chat_template_source": getattr(template, "origin", None)}


@router.get("/props")
async def props(request: Request):
    state = _state(request)
    g = state.generator
    core = g._g
    token = (lambda i: bytes(core.token_bytes(i)).decode("utf-8", "replace") if i >= 0 else "")
    return {
        "default_generation_settings": {"id": 0, "id_task": -1, "is_processing": False, **generation_settings(state)},
        "total_slots": state.engine.n_slots,
        "model_path": g.model_path,
        "model_alias": state.model_name,
        **_template_facts(state),
        "bos_token": token(core.bos_id),
        "eos_token": token(core.eos_id),
        "build_info": f"specgen {_core.version()}",
        "modalities": {"vision": False, "audio": False},
    }


@router.get("/slots")
async def slots(request: Request):
    """One entry per slot. Slots are interchangeable here (the engine gives a request any free one), so
    the first entries, as many as the engine's busy slots, are reported busy."""
    state = _state(request)
    g = state.generator
    running = g.n_parallel - g.n_free_slots
    settings = generation_settings(state)
    return [{"id": i, "id_task": -1, "is_processing": i < running, **settings} for i in range(state.engine.n_slots)]
