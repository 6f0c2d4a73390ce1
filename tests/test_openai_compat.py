"""The SDK's OpenAI-shaped results: Generator.create_completion / create_chat_completion return what
llama-cpp-python's Llama returns (dicts; stream=True: an iterator of chunks), with the same text as
generate(), and refuse what the engine cannot do with a typed error."""
from __future__ import annotations

import pytest

from specgen.errors import ContextOverflowError, InvalidParameterError

PROMPT = "The capital of France is"


def test_create_completion_matches_generate(gen):
    ref = gen.generate(PROMPT, max_tokens=12, temperature=0)
    r = gen.create_completion(PROMPT, max_tokens=12, temperature=0)
    assert r["object"] == "text_completion" and r["id"].startswith("cmpl-")
    assert r["choices"][0]["text"] == ref.text and r["choices"][0]["finish_reason"] == "length"
    assert r["choices"][0]["logprobs"] is None
    assert r["usage"]["completion_tokens"] == 12 and r["usage"]["prompt_tokens"] == ref.stats["n_prompt_tokens"]
    assert r["usage"]["total_tokens"] == r["usage"]["prompt_tokens"] + 12
    chunks = list(gen.create_completion(PROMPT, max_tokens=12, temperature=0, stream=True))
    assert "".join(c["choices"][0]["text"] for c in chunks) == ref.text
    assert chunks[-1]["choices"][0]["finish_reason"] == "length" and chunks[-1]["usage"]["completion_tokens"] == 12
    # token ids as the prompt, a stop string, finish_reason "stop"
    ids = gen.tokenize(PROMPT)
    r = gen.create_completion(ids, max_tokens=12, temperature=0, stop=[ref.text[4:8]])
    assert r["choices"][0]["text"] == ref.text[:4] and r["choices"][0]["finish_reason"] == "stop"


def test_create_completion_logprobs(gen):
    ref = gen.generate(PROMPT, max_tokens=6, temperature=0, logprobs=2)
    lp = gen.create_completion(PROMPT, max_tokens=6, temperature=0, logprobs=2)["choices"][0]["logprobs"]
    assert lp["token_logprobs"] == [e.logprob for e in ref.logprobs]
    assert [list(t.values()) for t in lp["top_logprobs"]] == [[v for _, v in e.top] for e in ref.logprobs]
    assert lp["text_offset"][0] == 0 and lp["text_offset"][1] == len(lp["tokens"][0])


def test_create_chat_completion(gen):
    msgs = [{"role": "user", "content": "Say hello."}]
    r = gen.create_chat_completion(msgs, chat_template="gemma3", max_tokens=8, temperature=0)
    assert r["object"] == "chat.completion" and r["choices"][0]["message"]["role"] == "assistant"
    # The rendered prompt, continued by generate(), gives the same text.
    from specgen.chat_template import template_for

    text = template_for(gen, "gemma3").render(msgs)
    ref = gen.generate(gen.tokenize(text, add_bos=False, special=True), max_tokens=8, temperature=0)
    assert r["choices"][0]["message"]["content"] == ref.text
    chunks = list(gen.create_chat_completion(msgs, chat_template="gemma3", max_tokens=8, temperature=0, stream=True))
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == ref.text
    assert chunks[-1]["object"] == "chat.completion.chunk" and chunks[-1]["choices"][0]["finish_reason"] in ("stop", "length")


@pytest.mark.parametrize("kwargs,match", [
    (dict(n=2), "n=2"),
    (dict(frequency_penalty=0.5), "frequency_penalty"),
    (dict(presence_penalty=-1.0), "presence_penalty"),
    (dict(logit_bias={"1": 2.0}), "logit_bias"),
    (dict(echo=True), "echo"),
    (dict(logprobs=99), "logprobs"),
    (dict(temperature=-1.0), "temperature"),
])
def test_unsupported_or_bad_parameters_raise(gen, kwargs, match):
    with pytest.raises(InvalidParameterError, match=match):
        gen.create_completion(PROMPT, max_tokens=2, **kwargs)


def test_prompt_over_the_context_names_the_limit(gen):
    with pytest.raises(ContextOverflowError, match=str(gen.n_ctx)):
        gen.create_completion("word " * (gen.n_ctx + 10), max_tokens=2)


def test_chat_without_a_template_uses_the_architectures_builtin(gen):
    # The reference GGUF carries no tokenizer.chat_template: Gemma 3's built-in one renders the chat, as
    # llama.cpp falls back to a built-in format (specgen.chat_template.builtin_template_name).
    msgs = [{"role": "user", "content": "hi"}]
    fallback = gen.create_chat_completion(msgs, max_tokens=4, temperature=0)
    named = gen.create_chat_completion(msgs, chat_template="gemma3", max_tokens=4, temperature=0)
    assert fallback["choices"][0]["message"] == named["choices"][0]["message"]
    assert fallback["usage"]["prompt_tokens"] == named["usage"]["prompt_tokens"]
    with pytest.raises(InvalidParameterError, match="top_logprobs"):
        gen.create_chat_completion([{"role": "user", "content": "hi"}], chat_template="gemma3", top_logprobs=2)
