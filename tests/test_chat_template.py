"""Chat templates: rendered in jinja2's sandbox exactly as transformers' apply_chat_template renders
the same template string (no hub download: a local tokenizer object carries the special tokens), and a
hostile template cannot reach Python internals."""
from __future__ import annotations

import pytest

pytest.importorskip("jinja2", reason="needs the server extra (pip install .[server])")

from specgen.chat_template import ChatTemplate, ChatTemplateError, load_template_source, shipped_templates  # noqa: E402
from specgen.errors import InvalidParameterError  # noqa: E402

CONVERSATIONS = [
    [{"role": "user", "content": "Hello!"}],
    [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "  Capital of France?  "}],
    [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello, how can I help?"},
     {"role": "user", "content": [{"type": "text", "text": "Tell me a joke. "}]}],
    [{"role": "system", "content": [{"type": "text", "text": "Be nice."}]}, {"role": "user", "content": "ünïcødé ✓ {{ x }}"},
     {"role": "assistant", "content": "ok"}, {"role": "user", "content": "<start_of_turn> again"}],
]


def _hf_tokenizer():
    pytest.importorskip("transformers", reason="needs the test extra")
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3}
    return PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel(vocab, unk_token="<unk>")),
                                   bos_token="<bos>", eos_token="<eos>", unk_token="<unk>", pad_token="<pad>")


@pytest.mark.parametrize("messages", CONVERSATIONS)
@pytest.mark.parametrize("add_generation_prompt", [True, False])
def test_gemma3_template_renders_as_transformers(messages, add_generation_prompt):
    source = load_template_source("gemma3")
    ours = ChatTemplate(source, bos_token="<bos>", eos_token="<eos>").render(messages, add_generation_prompt=add_generation_prompt)
    theirs = _hf_tokenizer().apply_chat_template(messages, chat_template=source, tokenize=False,
                                                 add_generation_prompt=add_generation_prompt)
    assert ours == theirs
    assert ours.startswith("<bos><start_of_turn>user\n")
    assert ours.endswith("<start_of_turn>model\n") == add_generation_prompt


def test_template_features_match_transformers():
    # Filters, loop controls and globals that Hub templates use.
    source = ("{% for m in messages %}{% if loop.index > 2 %}{% break %}{% endif %}{{ m | tojson }}|"
              "{{ m['content'] | upper }}{% endfor %}{{ raise_exception('x') if messages | length > 9 }}")
    messages = [{"role": "user", "content": "é\"<b>"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]
    assert ChatTemplate(source).render(messages) == _hf_tokenizer().apply_chat_template(messages, chat_template=source, tokenize=False)


def test_gemma3_template_rejects_bad_turn_order():
    t = ChatTemplate(load_template_source("gemma3"), "<bos>")
    with pytest.raises(InvalidParameterError, match="alternate"):
        t.render([{"role": "assistant", "content": "hi"}])


@pytest.mark.parametrize("source", [
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ messages.__class__.__init__.__globals__ }}",
    "{% set x = messages.append(1) %}{{ x }}",
    "{{ cycler.__init__.__globals__.os.popen('id').read() }}",
])
def test_hostile_template_is_sandboxed(source):
    with pytest.raises((ChatTemplateError, InvalidParameterError)):
        ChatTemplate(source).render([{"role": "user", "content": "hi"}])


def test_shipped_and_missing_templates(tmp_path):
    assert "gemma3" in shipped_templates()
    f = tmp_path / "t.jinja"
    f.write_text("{{ messages[0]['content'] }}!")
    assert ChatTemplate(load_template_source(str(f))).render([{"role": "user", "content": "a"}]) == "a!"
    with pytest.raises(ChatTemplateError, match="neither a file"):
        load_template_source(str(tmp_path / "missing.jinja"))
    with pytest.raises(ChatTemplateError, match="does not compile"):
        ChatTemplate("{% if %}")
