"""Qwen2.5's chat template (issue 33): a GGUF that carries it in tokenizer.chat_template renders through
specgen.chat_template exactly as transformers renders the same template string, for a system + user
turn, the default system prompt, multi-turn chats, tool calls and tool results, with and without the
generation prompt. The GGUF is the tiny model of tests/hostile_gguf.py with the template added, so no
1.6 GB download is needed.

Test data: QWEN25_TEMPLATE below is Qwen2.5's chat template copied verbatim from the
tokenizer.chat_template of Qwen2.5-Coder-1.5B-Instruct's GGUF (Qwen team, Alibaba Cloud; Apache-2.0),
the target of the `pair` bench preset; its sha256 is checked so an edit cannot go unnoticed.
"""
from __future__ import annotations

import hashlib
import os
import sys

import pytest

pytest.importorskip("jinja2", reason="needs the server extra (pip install .[server])")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import specgen  # noqa: E402
from specgen.chat_template import template_for  # noqa: E402

from hostile_gguf import STR, tiny_model  # noqa: E402

QWEN25_TEMPLATE_SHA256 = "d5495a1e5db0611132a97e46a65dbb64a642a499421228b9c8b93229097fa9a4"
QWEN25_TEMPLATE = r"""{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
    {{- "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{{\"name\": <function-name>, \"arguments\": <args-json-object>}}\n</tool_call><|im_end|>\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}
    {%- else %}
        {{- '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\n<tool_call>\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- message.content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
"""

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Current weather of a city",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                          "required": ["city"]}}}]
CONVERSATIONS = {
    "system+user": [{"role": "system", "content": "You are a careful C programmer."},
                    {"role": "user", "content": "Write strlen without the standard library."}],
    "default system": [{"role": "user", "content": "Explain what `git rebase -i` does."}],
    "multi-turn": [{"role": "system", "content": "Answer in one line."},
                   {"role": "user", "content": "Rename `x` to `count`:\n```py\nx = 0\n```"},
                   {"role": "assistant", "content": "```py\ncount = 0\n```"},
                   {"role": "user", "content": "Now in Rust, ünïcødé and {{ braces }} kept."}],
    "tool call and results": [{"role": "user", "content": "Weather in Zürich?"},
                              {"role": "assistant", "content": "",
                               "tool_calls": [{"type": "function",
                                               "function": {"name": "get_weather", "arguments": {"city": "Zürich"}}}]},
                              {"role": "tool", "content": "15 C"}, {"role": "tool", "content": "sunny"}],
}


def _transformers_render(messages, add_generation_prompt, tools=None):
    pytest.importorskip("transformers", reason="needs the test extra")
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3}
    tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel(vocab, unk_token="<unk>")),
                                  bos_token="<bos>", eos_token="<eos>", unk_token="<unk>", pad_token="<pad>")
    return tok.apply_chat_template(messages, chat_template=QWEN25_TEMPLATE, tokenize=False, tools=tools,
                                   add_generation_prompt=add_generation_prompt)


@pytest.fixture(scope="module")
def qwen_template(tmp_path_factory):
    """template_for() of a tiny GGUF whose tokenizer.chat_template is Qwen2.5's."""
    g = tiny_model()
    g.kv("tokenizer.chat_template", STR, QWEN25_TEMPLATE)
    path = g.write(str(tmp_path_factory.mktemp("qwen") / "tiny-qwen-template.gguf"))
    gen = specgen.Generator(path, n_threads=1, n_ctx=64)
    try:
        yield template_for(gen)
    finally:
        gen.close()


def test_template_text_is_the_published_one(qwen_template):
    assert hashlib.sha256(QWEN25_TEMPLATE.encode()).hexdigest() == QWEN25_TEMPLATE_SHA256
    # read back from the GGUF unchanged (escapes, quotes and newlines included)
    assert qwen_template.origin == "gguf"
    assert qwen_template.source == QWEN25_TEMPLATE


@pytest.mark.parametrize("name", sorted(CONVERSATIONS))
@pytest.mark.parametrize("add_generation_prompt", [True, False])
def test_qwen25_template_renders_as_transformers(qwen_template, name, add_generation_prompt):
    messages = CONVERSATIONS[name]
    ours = qwen_template.render(messages, add_generation_prompt=add_generation_prompt)
    assert ours == _transformers_render(messages, add_generation_prompt)
    assert ours.startswith("<|im_start|>system\n")
    assert ours.endswith("<|im_start|>assistant\n") == add_generation_prompt


def test_qwen25_template_system_and_turns_exactly(qwen_template):
    ours = qwen_template.render(CONVERSATIONS["multi-turn"][:2], add_generation_prompt=True)
    assert ours == ("<|im_start|>system\nAnswer in one line.<|im_end|>\n"
                    "<|im_start|>user\nRename `x` to `count`:\n```py\nx = 0\n```<|im_end|>\n"
                    "<|im_start|>assistant\n")
    default = qwen_template.render(CONVERSATIONS["default system"], add_generation_prompt=False)
    assert default.startswith("<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant."
                              "<|im_end|>\n<|im_start|>user\n")


def test_qwen25_template_with_tools_renders_as_transformers(qwen_template):
    messages = CONVERSATIONS["tool call and results"]
    ours = qwen_template.render(messages, add_generation_prompt=True, tools=TOOLS)
    assert ours == _transformers_render(messages, True, tools=TOOLS)
    assert '"city": "Zürich"' in ours and "<tools>" in ours
