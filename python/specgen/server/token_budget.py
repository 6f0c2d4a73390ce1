"""How many tokens a request may generate: what it asked for, if that fits in the context (else a 400
naming the limit, as vLLM answers, instead of a silent cut to "length"), or, when it did not ask, a
default cap that also stops at the context.

Defaults for a request without max_tokens: /v1/completions 16 (OpenAI's), /v1/chat/completions
DEFAULT_CHAT_MAX_TOKENS. The server's ``-n/--n-predict`` caps both, and any request, as llama-server's.
"""
from __future__ import annotations

from typing import List

from specgen.server.errors import APIError

DEFAULT_COMPLETION_MAX_TOKENS = 16
DEFAULT_CHAT_MAX_TOKENS = 1024


def prompt_rows(generator, tokens: List[int]) -> int:
    """Context rows the prompt takes: its tokens plus the BOS the engine adds when it is missing."""
    core = generator._g
    return len(tokens) + (1 if core.bos_id >= 0 and (not tokens or tokens[0] != core.bos_id) else 0)


def fit_max_tokens(generator, tokens: List[int], max_tokens: int, requested: bool, what: str) -> int:
    """max_tokens for this prompt (``max_tokens`` after the server's -n cap; -1 = until the context is
    full). ``requested``: the client set it, so it must fit (APIError 400 otherwise); not requested: it
    is cut to the context left. ``what``: "messages" or "prompt", for the message."""
    n_ctx = generator.n_ctx
    n_prompt = prompt_rows(generator, tokens)
    room = n_ctx - n_prompt
    if not requested or max_tokens < 0:
        max_tokens = room if max_tokens < 0 else min(max_tokens, room)
        if max_tokens > 0 or room > 0:
            return max_tokens
        max_tokens = 1  # the prompt fills the context: not one token fits
    if n_prompt + max_tokens > n_ctx:
        raise APIError(
            400, f"This model's maximum context length is {n_ctx} tokens (n_ctx). However, you requested "
                 f"{n_prompt + max_tokens} tokens ({n_prompt} in the {what}, {max_tokens} in the completion). "
                 f"Please reduce the length of the {what} or the completion (max_tokens).",
            param="max_tokens", code="context_length_exceeded")
    return max_tokens
