"""Request bodies of the OpenAI routes (pydantic; they are the server's OpenAPI schema).

Types are strict (a string where a number belongs is a 400, never coerced) and ranges are OpenAI's
where the engine agrees; fields the engine cannot honour are accepted by the schema and refused with
a 400 that names them (specgen.openai_compat), and unknown fields are ignored, as OpenAI's
compatible servers do.
"""
from __future__ import annotations

from typing import Any, Dict, List, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field

_SEED_MAX = 2**63 - 1


class _Request(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)

    model: Optional[str] = Field(None, description="The served model's id (GET /v1/models); omitted: that model")
    max_tokens: Optional[int] = Field(None, ge=0, description="Most tokens to generate; prompt + max_tokens past the "
                                      "context is a 400. Left out: 16 (completions) or 1024 (chat), at most the "
                                      "context left. The server's -n caps it")
    temperature: Optional[float] = Field(None, ge=0.0, le=1e6, description="0 = greedy")
    top_p: Optional[float] = Field(None, gt=0.0, le=1.0)
    top_k: Optional[int] = Field(None, ge=-1, description="0 or -1 = off")
    min_p: Optional[float] = Field(None, ge=0.0, le=1.0)
    repeat_penalty: Optional[float] = Field(None, gt=0.0, le=1e6, description="llama.cpp's repeat penalty, 1 = off")
    frequency_penalty: Optional[float] = Field(None, ge=-2.0, le=2.0, description="only 0 is supported")
    presence_penalty: Optional[float] = Field(None, ge=-2.0, le=2.0, description="only 0 is supported")
    stop: Optional[Union[str, List[str]]] = Field(None, description="Up to 4 stop strings (not included in the text)")
    seed: Optional[int] = Field(None, ge=0, le=_SEED_MAX)
    stream: Optional[bool] = False
    stream_options: Optional[Dict[str, Any]] = None
    n: Optional[int] = Field(None, ge=1, le=128, description="only 1 is supported")
    logit_bias: Optional[Dict[str, float]] = Field(None, description="not supported (must be empty)")
    user: Optional[str] = None

    def stop_list(self) -> List[str]:
        stop = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        return [s for s in stop if s]


class CompletionRequest(_Request):
    prompt: Union[str, List[int], List[str], List[List[int]]] = Field(..., description="Text, or token ids")
    logprobs: Optional[int] = Field(None, ge=0, le=20, description="Log-probabilities of the N most likely tokens per position")
    echo: Optional[bool] = False
    suffix: Optional[str] = None
    best_of: Optional[int] = Field(None, ge=1, le=128)


class ContentPart(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)
    type: str
    text: Optional[str] = None


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: Optional[Union[str, List[ContentPart]]] = None
    name: Optional[str] = None


class ChatCompletionRequest(_Request):
    messages: List[ChatMessage] = Field(..., min_length=1)
    max_completion_tokens: Optional[int] = Field(None, ge=0, description="Alias of max_tokens")
    logprobs: Optional[bool] = False
    top_logprobs: Optional[int] = Field(None, ge=0, le=20)
    tools: Optional[List[Dict[str, Any]]] = Field(None, description="not supported")
    tool_choice: Optional[Union[str, Dict[str, Any]]] = Field(None, description="not supported")
    response_format: Optional[Dict[str, Any]] = Field(None, description="only {'type': 'text'}")
