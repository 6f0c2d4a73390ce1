"""OpenAI-shaped completions for the SDK and the server (names and shapes as OpenAI's API and
llama-cpp-python's ``Llama.create_completion`` / ``create_chat_completion``).

Request fields map onto generate()'s parameters; fields the engine has no sampler for (a non-zero
frequency/presence penalty, logit_bias, n > 1, echo, suffix, tools) raise InvalidParameterError
naming them rather than being ignored. Streams are built from specgen.request events: each engine step
becomes one chunk with the text it made safe to show and the logprobs of the tokens it emitted.
"""
from __future__ import annotations

import math
import time
import uuid
import weakref
from typing import Any, Dict, Iterator, List, Optional, Sequence, Union

from specgen.errors import ContextOverflowError, InvalidParameterError
from specgen.logprobs import TokenLogprob
from specgen.request import Request, StepEvent

# OpenAI reports a token its distribution gives probability 0 as -9999.0 (JSON has no -inf).
_NEG_INF_LOGPROB = -9999.0
MAX_TOP_LOGPROBS = 20

# Defaults of a field the request leaves out: the SDK's generate() defaults (the server uses the same).
# Compiled chat templates per Generator and override (a Generator's template never changes).
_TEMPLATES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()

DEFAULTS = dict(temperature=0.8, top_p=0.95, top_k=40, min_p=0.05, repeat_penalty=1.0)


def finish_reason_openai(reason: Optional[str]) -> Optional[str]:
    """The engine's finish reason in OpenAI's vocabulary ("eos" and stop strings are both "stop")."""
    return {"eos": "stop", "stop": "stop", "length": "length"}.get(reason or "", reason)


def _finite(x: float) -> float:
    return x if math.isfinite(x) else _NEG_INF_LOGPROB


def generation_params(
    *,
    max_tokens: Optional[int],
    temperature: Optional[float] = None,
    top_p: Optional[float] = None,
    top_k: Optional[int] = None,
    min_p: Optional[float] = None,
    repeat_penalty: Optional[float] = None,
    frequency_penalty: Optional[float] = None,
    presence_penalty: Optional[float] = None,
    stop: Optional[Union[str, Sequence[str]]] = None,
    seed: Optional[int] = None,
    n: Optional[int] = None,
    best_of: Optional[int] = None,
    logit_bias: Optional[Dict[str, float]] = None,
    logprobs: Optional[int] = None,
    max_tokens_limit: int = -1,
) -> Dict[str, Any]:
    """generate() keyword arguments for an OpenAI request; InvalidParameterError for what the engine
    does not do. ``max_tokens_limit`` >= 0 caps max_tokens (the server's -n, as llama-server's)."""
    for name, value in (("frequency_penalty", frequency_penalty), ("presence_penalty", presence_penalty)):
        if value not in (None, 0, 0.0):
            raise InvalidParameterError(
                f"{name} is not supported: specgen's sampler has repeat_penalty (llama.cpp's), not OpenAI's {name}; "
                f"send {name}=0 or leave it out")
    if n not in (None, 1):
        raise InvalidParameterError(f"n={n} is not supported: specgen returns one choice per request (n=1)")
    if best_of not in (None, 1):
        raise InvalidParameterError(f"best_of={best_of} is not supported (best_of=1)")
    if logit_bias:
        raise InvalidParameterError("logit_bias is not supported by specgen's sampler")
    if max_tokens is None:
        max_tokens = -1
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
        raise InvalidParameterError(f"max_tokens must be an integer, got {max_tokens!r}")
    if max_tokens < -1:
        raise InvalidParameterError(f"max_tokens must be >= 0, got {max_tokens}")
    if max_tokens_limit >= 0 and (max_tokens < 0 or max_tokens > max_tokens_limit):
        max_tokens = max_tokens_limit
    out: Dict[str, Any] = dict(max_tokens=max_tokens, stop=stop, seed=seed, logprobs=logprobs)
    for name, value in (("temperature", temperature), ("top_p", top_p), ("top_k", top_k), ("min_p", min_p),
                        ("repeat_penalty", repeat_penalty)):
        out[name] = DEFAULTS[name] if value is None else value
    if out["top_k"] == -1:  # OpenAI-style clients send -1 for "off"
        out["top_k"] = 0
    return out


def prompt_tokens(generator, prompt: Union[str, Sequence[int]], *, add_bos: bool = True) -> List[int]:
    """Token ids of a completion prompt (text: control tokens parsed, as generate() does), checked
    against the context so a too-long prompt fails before it takes a slot."""
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
        prompt = prompt[0]  # a batch of one
    if isinstance(prompt, (str, bytes)):
        tokens = generator.tokenize(prompt, add_bos=add_bos, special=True)
    elif isinstance(prompt, (list, tuple)) and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
        tokens = generator._token_ids(prompt, "prompt")
    elif isinstance(prompt, list):
        raise InvalidParameterError("a batch of several prompts is not supported: send one prompt per request")
    else:
        raise InvalidParameterError(f"prompt must be a string or a list of token ids, got {type(prompt).__name__}")
    check_context(generator, tokens)
    return tokens


def check_context(generator, tokens: List[int]) -> None:
    core = generator._g
    n = len(tokens) + (1 if core.bos_id >= 0 and (not tokens or tokens[0] != core.bos_id) else 0)
    if n > generator.n_ctx:
        raise ContextOverflowError(
            f"This model's maximum context length is {generator.n_ctx} tokens; the prompt has {n} tokens")


def chat_prompt_tokens(generator, template, messages: List[Dict[str, Any]]) -> List[int]:
    """The messages rendered by ``template`` (specgen.chat_template) with a generation prompt, as ids.
    The template writes BOS itself where the model wants it; the engine adds it only when missing."""
    text = template.render(messages, add_generation_prompt=True)
    tokens = generator.tokenize(text, add_bos=False, special=True)
    check_context(generator, tokens)
    return tokens


def usage(stats: Dict[str, Any], n_prompt: int, n_completion: int) -> Dict[str, Any]:
    """OpenAI's usage (``prompt_tokens_details.cached_tokens``: the prompt tokens whose rows the slot's
    cache held, as llama-server and vLLM report them) plus ``speculation``: the engine's draft/accept
    counts (vLLM's spec_decode names)."""
    drafted_at = list(stats.get("drafted_at", []))
    return {
        "prompt_tokens": n_prompt,
        "completion_tokens": n_completion,
        "total_tokens": n_prompt + n_completion,
        "prompt_tokens_details": {"cached_tokens": min(n_prompt, int(stats.get("n_prompt_tokens_cached", 0)))},
        "speculation": {
            "num_drafts": int(drafted_at[0]) if drafted_at else 0,
            "num_draft_tokens": int(stats.get("n_drafted", 0)),
            "num_accepted_tokens": int(stats.get("n_accepted", 0)),
            "num_accepted_tokens_per_pos": [int(x) for x in stats.get("accepted_at", [])],
            "num_rounds": int(stats.get("n_rounds", 0)),
            "acceptance_rate": float(stats.get("acceptance_rate", 0.0)),
            "mean_accepted_length": float(stats.get("mean_accepted_length", 0.0)),
        },
    }


class ResponseBuilder:
    """Turns a request's StepEvents into OpenAI chunks or one response ("completion" or "chat")."""

    def __init__(self, generator, kind: str, model: str, logprobs: Optional[int]) -> None:
        assert kind in ("completion", "chat")
        self.kind = kind
        self.model = model
        self.logprobs = logprobs
        self.id = ("cmpl-" if kind == "completion" else "chatcmpl-") + uuid.uuid4().hex
        self.created = int(time.time())
        self._core = generator._g
        self._offset = 0  # completions' text_offset
        self._pieces: List[str] = []
        self._lp_all: List[TokenLogprob] = []
        self.n_completion = 0

    # -- token text ---------------------------------------------------------------------------
    def _bytes(self, token: int) -> bytes:
        return bytes(self._core.token_bytes(token))

    def _text(self, token: int) -> str:
        return self._bytes(token).decode("utf-8", errors="replace")

    def _logprobs_obj(self, lps: List[TokenLogprob]) -> Optional[Dict[str, Any]]:
        if self.logprobs is None:
            return None
        if self.kind == "chat":
            return {"content": [{
                "token": self._text(lp.token), "logprob": _finite(lp.logprob), "bytes": list(self._bytes(lp.token)),
                "top_logprobs": [{"token": self._text(t), "logprob": _finite(v), "bytes": list(self._bytes(t))}
                                 for t, v in lp.top],
            } for lp in lps]}
        tokens, offsets = [], []
        for lp in lps:
            s = self._text(lp.token)
            tokens.append(s)
            offsets.append(self._offset)
            self._offset += len(s)
        return {
            "tokens": tokens,
            "token_logprobs": [_finite(lp.logprob) for lp in lps],
            "top_logprobs": [{self._text(t): _finite(v) for t, v in lp.top} for lp in lps],
            "text_offset": offsets,
        }

    def _envelope(self, choice: Dict[str, Any], chunk: bool) -> Dict[str, Any]:
        obj = ("text_completion" if self.kind == "completion" else
               "chat.completion.chunk" if chunk else "chat.completion")
        return {"id": self.id, "object": obj, "created": self.created, "model": self.model, "choices": [choice]}

    # -- streaming ----------------------------------------------------------------------------
    def first_chunks(self) -> List[Dict[str, Any]]:
        if self.kind == "chat":  # OpenAI opens a chat stream with the role
            return [self._envelope({"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                                    "finish_reason": None}, True)]
        return []

    def chunk(self, ev: StepEvent) -> Dict[str, Any]:
        self.n_completion += len(ev.tokens)
        lp = self._logprobs_obj(ev.logprobs)
        if self.kind == "chat":
            return self._envelope({"index": 0, "delta": {"content": ev.text}, "logprobs": lp, "finish_reason": None}, True)
        return self._envelope({"index": 0, "text": ev.text, "logprobs": lp, "finish_reason": None}, True)

    def final_chunk(self, finish_reason: Optional[str], stats: Dict[str, Any], n_prompt: int) -> Dict[str, Any]:
        if self.kind == "chat":
            choice = {"index": 0, "delta": {}, "logprobs": None, "finish_reason": finish_reason_openai(finish_reason)}
        else:
            choice = {"index": 0, "text": "", "logprobs": None, "finish_reason": finish_reason_openai(finish_reason)}
        out = self._envelope(choice, True)
        out["usage"] = usage(stats, n_prompt, self.n_completion)
        return out

    # -- one response -------------------------------------------------------------------------
    def add(self, ev: StepEvent) -> None:
        self._pieces.append(ev.text)
        self._lp_all.extend(ev.logprobs)
        self.n_completion += len(ev.tokens)

    def response(self, finish_reason: Optional[str], stats: Dict[str, Any], n_prompt: int) -> Dict[str, Any]:
        text = "".join(self._pieces)
        lp = self._logprobs_obj(self._lp_all)
        fr = finish_reason_openai(finish_reason)
        if self.kind == "chat":
            choice = {"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": lp, "finish_reason": fr}
        else:
            choice = {"index": 0, "text": text, "logprobs": lp, "finish_reason": fr}
        out = self._envelope(choice, False)
        out["usage"] = usage(stats, n_prompt, self.n_completion)
        return out


def check_unsupported(echo: bool = False, suffix: Optional[str] = None, **named: Any) -> None:
    if echo:
        raise InvalidParameterError("echo=True is not supported")
    if suffix:
        raise InvalidParameterError("suffix (insertion) is not supported")
    for name, value in named.items():
        if value:
            raise InvalidParameterError(f"{name} is not supported by specgen")


def completion_logprobs(logprobs: Optional[int]) -> Optional[int]:
    if logprobs is None:
        return None
    if isinstance(logprobs, bool) or not isinstance(logprobs, int) or not 0 <= logprobs <= MAX_TOP_LOGPROBS:
        raise InvalidParameterError(f"logprobs must be an integer in [0, {MAX_TOP_LOGPROBS}], got {logprobs!r}")
    return logprobs


def chat_logprobs(logprobs: Optional[bool], top_logprobs: Optional[int]) -> Optional[int]:
    if top_logprobs is not None:
        if isinstance(top_logprobs, bool) or not isinstance(top_logprobs, int) or not 0 <= top_logprobs <= MAX_TOP_LOGPROBS:
            raise InvalidParameterError(f"top_logprobs must be an integer in [0, {MAX_TOP_LOGPROBS}], got {top_logprobs!r}")
        if not logprobs:
            raise InvalidParameterError("top_logprobs needs logprobs=true")
    return (top_logprobs or 0) if logprobs else None


def _run(builder: ResponseBuilder, request: Request, streaming: bool):
    if not streaming:
        for ev in request.events():
            builder.add(ev)
        return builder.response(request.finish_reason, request.stats, request.n_prompt_tokens)

    def chunks() -> Iterator[Dict[str, Any]]:
        yield from builder.first_chunks()
        for ev in request.events():
            yield builder.chunk(ev)
        yield builder.final_chunk(request.finish_reason, request.stats, request.n_prompt_tokens)

    return chunks()


def create_completion(
    generator,
    prompt: Union[str, Sequence[int]],
    *,
    suffix: Optional[str] = None,
    max_tokens: Optional[int] = 16,
    temperature: float = DEFAULTS["temperature"],
    top_p: float = DEFAULTS["top_p"],
    min_p: float = DEFAULTS["min_p"],
    top_k: int = DEFAULTS["top_k"],
    stop: Optional[Union[str, List[str]]] = None,
    seed: Optional[int] = None,
    stream: bool = False,
    logprobs: Optional[int] = None,
    echo: bool = False,
    frequency_penalty: float = 0.0,
    presence_penalty: float = 0.0,
    repeat_penalty: float = DEFAULTS["repeat_penalty"],
    n: int = 1,
    best_of: Optional[int] = None,
    logit_bias: Optional[Dict[str, float]] = None,
    model: Optional[str] = None,
) -> Union[Dict[str, Any], Iterator[Dict[str, Any]]]:
    """An OpenAI ``text_completion`` dict for ``prompt`` (``stream=True``: an iterator of chunks, the
    last one with finish_reason and usage)."""
    check_unsupported(echo=echo, suffix=suffix)
    n_top = completion_logprobs(logprobs)
    params = generation_params(max_tokens=max_tokens, temperature=temperature, top_p=top_p, top_k=top_k, min_p=min_p,
                               repeat_penalty=repeat_penalty, frequency_penalty=frequency_penalty,
                               presence_penalty=presence_penalty, stop=stop, seed=seed, n=n, best_of=best_of,
                               logit_bias=logit_bias, logprobs=n_top)
    tokens = prompt_tokens(generator, prompt)
    builder = ResponseBuilder(generator, "completion", model or _model_name(generator), n_top)
    return _run(builder, generator._start(tokens, **params), stream)


def create_chat_completion(
    generator,
    messages: List[Dict[str, Any]],
    *,
    chat_template: Optional[str] = None,
    max_tokens: Optional[int] = None,
    temperature: float = DEFAULTS["temperature"],
    top_p: float = DEFAULTS["top_p"],
    min_p: float = DEFAULTS["min_p"],
    top_k: int = DEFAULTS["top_k"],
    stop: Optional[Union[str, List[str]]] = None,
    seed: Optional[int] = None,
    stream: bool = False,
    logprobs: Optional[bool] = None,
    top_logprobs: Optional[int] = None,
    frequency_penalty: float = 0.0,
    presence_penalty: float = 0.0,
    repeat_penalty: float = DEFAULTS["repeat_penalty"],
    n: int = 1,
    logit_bias: Optional[Dict[str, float]] = None,
    tools: Optional[list] = None,
    tool_choice: Optional[Any] = None,
    response_format: Optional[Dict[str, Any]] = None,
    model: Optional[str] = None,
) -> Union[Dict[str, Any], Iterator[Dict[str, Any]]]:
    """An OpenAI ``chat.completion`` dict for ``messages`` rendered with the model's chat template
    (``chat_template``: a file or a shipped name instead; specgen.chat_template)."""
    from specgen.chat_template import template_for

    check_unsupported(tools=tools, tool_choice=None if tool_choice == "none" else tool_choice)
    if response_format and response_format.get("type", "text") != "text":
        raise InvalidParameterError(f"response_format {response_format.get('type')!r} is not supported (only 'text')")
    n_top = chat_logprobs(logprobs, top_logprobs)
    params = generation_params(max_tokens=max_tokens, temperature=temperature, top_p=top_p, top_k=top_k, min_p=min_p,
                               repeat_penalty=repeat_penalty, frequency_penalty=frequency_penalty,
                               presence_penalty=presence_penalty, stop=stop, seed=seed, n=n,
                               logit_bias=logit_bias, logprobs=n_top)
    cache = _TEMPLATES.setdefault(generator, {})
    template = cache.get(chat_template)
    if template is None:
        template = cache[chat_template] = template_for(generator, chat_template)
    tokens = chat_prompt_tokens(generator, template, messages)
    builder = ResponseBuilder(generator, "chat", model or _model_name(generator), n_top)
    return _run(builder, generator._start(tokens, **params), stream)


def _model_name(generator) -> str:
    import os

    return os.path.basename(str(generator.model_path))
