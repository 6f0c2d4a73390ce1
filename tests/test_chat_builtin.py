"""Built-in chat templates for GGUF files without tokenizer.chat_template (as llama.cpp falls back to a
built-in format): which one an architecture and vocabulary get, what each renders, and that the choice
is stated (ChatTemplate.origin)."""
from __future__ import annotations

import pytest

pytest.importorskip("jinja2")

from specgen.chat_template import (ChatTemplate, ChatTemplateError, builtin_template_name,  # noqa: E402
                                   load_template_source, shipped_templates, template_for)

MSGS = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": [{"type": "text", "text": "Colours?"}]}]


class _Stub:
    """What builtin_template_name reads of a Generator: metadata and tokenize(special=True)."""

    def __init__(self, arch: str, control_tokens=(), template: str = "") -> None:
        self.metadata = {"general.architecture": arch}
        if template:
            self.metadata["tokenizer.chat_template"] = template
        self.model_path = f"/models/{arch}.gguf"
        self._control = set(control_tokens)

    def tokenize(self, text, add_bos=True, special=False):
        return [1] if special and text in self._control else [1] * len(text)


@pytest.mark.parametrize("arch,tokens,expected", [
    ("gemma3", (), "gemma3"), ("gemma2", (), "gemma3"), ("qwen2", (), "chatml"), ("qwen3", (), "chatml"),
    ("llama", ("<|start_header_id|>",), "llama3"), ("llama", ("[INST]",), "mistral"), ("llama", (), "llama2"),
    ("bert", (), None),
])
def test_the_builtin_follows_architecture_and_vocabulary(arch, tokens, expected):
    assert builtin_template_name(_Stub(arch, tokens)) == expected
    if expected is not None:
        assert expected in shipped_templates()


def test_an_architecture_without_a_builtin_is_a_clear_error():
    with pytest.raises(ChatTemplateError, match="no built-in one for its architecture.*--chat-template"):
        template_for(_Stub("bert"))


@pytest.mark.parametrize("name,expected", [
    ("chatml", "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
               "Hello!<|im_end|>\n<|im_start|>user\nColours?<|im_end|>\n<|im_start|>assistant\n"),
    ("llama3", "<s><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|><|start_header_id|>user"
               "<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
               "<|start_header_id|>user<|end_header_id|>\n\nColours?<|eot_id|><|start_header_id|>assistant"
               "<|end_header_id|>\n\n"),
    ("mistral", "<s>[INST] Be brief.\n\nHi [/INST]Hello!</s>[INST] Colours? [/INST]"),
    ("llama2", "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST] Hello! </s><s>[INST] Colours? [/INST]"),
])
def test_each_builtin_renders_its_format(name, expected):
    assert ChatTemplate(load_template_source(name), "<s>", "</s>").render(MSGS) == expected


@pytest.mark.parametrize("name", ["mistral", "llama2", "gemma3"])
def test_alternation_is_enforced(name):
    from specgen.errors import InvalidParameterError

    with pytest.raises(InvalidParameterError, match="alternate"):
        ChatTemplate(load_template_source(name), "<s>", "</s>").render([{"role": "assistant", "content": "x"}])


def test_the_reference_model_states_its_fallback(gen):
    assert template_for(gen).origin == "builtin:gemma3"
    assert template_for(gen).render(MSGS[1:2]) == template_for(gen, "gemma3").render(MSGS[1:2])
    assert template_for(gen, "chatml").origin == "builtin:chatml"
