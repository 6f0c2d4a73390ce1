"""Chat messages -> prompt text with a model's Jinja chat template.

The template comes from the GGUF (``tokenizer.chat_template``), or from a file/shipped name given by
the caller (``--chat-template``); both are untrusted input and go through the same path (llama-cpp-python
had a template-injection advisory). A template runs in jinja2's ImmutableSandboxedEnvironment, which
stops escapes, and under a RenderBudget, which stops runaway work: lines executed (loop iterations
included), wall time, nested macro calls, and the size of every string or list it builds and of its
output. An over-budget or failing render raises ChatTemplateError / InvalidParameterError with a
one-line reason (the server's 400). The environment offers what chat templates on the Hub expect
(trim_blocks, lstrip_blocks, loop controls, raise_exception, strftime_now, a tojson that leaves
non-ASCII as it is), as transformers' apply_chat_template does, so a template renders the same in both.
"""
from __future__ import annotations

import json
import os
from datetime import datetime
from typing import Any, Dict, List, Optional

from specgen.errors import InvalidParameterError, SpecgenError

SHIPPED_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "chat_templates")


class ChatTemplateError(SpecgenError):
    """No chat template is available, or the template failed on these messages."""


def shipped_templates() -> List[str]:
    """Names of the templates specgen ships (``--chat-template NAME``)."""
    return sorted(f[:-6] for f in os.listdir(SHIPPED_DIR) if f.endswith(".jinja"))


def load_template_source(spec: str) -> str:
    """The template text of ``spec``: a file path, or the name of a shipped template."""
    if os.path.isfile(spec):
        with open(spec, encoding="utf-8") as f:
            return f.read()
    if spec in shipped_templates():
        with open(os.path.join(SHIPPED_DIR, spec + ".jinja"), encoding="utf-8") as f:
            return f.read()
    raise ChatTemplateError(f"chat template {spec!r} is neither a file nor one of the shipped templates {shipped_templates()}")


def _raise_exception(message: str):
    import jinja2

    raise jinja2.exceptions.TemplateError(message)


def _tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


class ChatTemplate:
    """A chat template compiled once (per model, not per request) plus the special tokens it is
    rendered with; ``render`` runs it under ``budget`` (specgen.template_budget.RenderBudget) on the
    calling thread, and is safe to call from several threads at once."""

    def __init__(self, source: str, bos_token: str = "", eos_token: str = "", budget=None) -> None:
        try:
            import jinja2
            from specgen.template_budget import BudgetedSandbox, RenderBudget
        except ImportError as e:  # the server extra ships it
            raise ChatTemplateError('chat templates need jinja2: pip install "specgen[server]"') from e
        if not isinstance(source, str):
            raise ChatTemplateError(f"a chat template is text, got {type(source).__name__}")
        self.budget = budget if budget is not None else RenderBudget()
        self._env = BudgetedSandbox(self.budget, trim_blocks=True, lstrip_blocks=True,
                                    extensions=["jinja2.ext.loopcontrols"], filters={"tojson": _tojson},
                                    globals={"raise_exception": _raise_exception, "strftime_now": _strftime_now})
        try:
            self._template = self._env.from_string(source)
        except jinja2.exceptions.TemplateError as e:
            raise ChatTemplateError(f"the chat template does not compile: {_one_line(e)}") from None
        except (RecursionError, MemoryError) as e:  # a pathologically nested template
            raise ChatTemplateError(f"the chat template does not compile: {type(e).__name__}") from None
        self.source = source
        self.bos_token = bos_token
        self.eos_token = eos_token

    def render(self, messages: List[Dict[str, Any]], add_generation_prompt: bool = True, **extra: Any) -> str:
        """The prompt text. A template over its budget raises ChatTemplateError; one that rejects the
        messages (raise_exception) or cannot render them, InvalidParameterError; both one line."""
        import jinja2
        from specgen.template_budget import BudgetExceeded

        if not isinstance(messages, list) or not messages:
            raise InvalidParameterError("messages must be a non-empty list of {'role': ..., 'content': ...} objects")
        for m in messages:
            if not isinstance(m, dict) or not isinstance(m.get("role"), str):
                raise InvalidParameterError("every message must be an object with a string 'role'")
        try:
            return self._env.render(self._template, messages=messages, add_generation_prompt=add_generation_prompt,
                                    bos_token=self.bos_token, eos_token=self.eos_token, **extra)
        except BudgetExceeded as e:
            raise ChatTemplateError(f"the chat template went over its budget: {e}") from None
        except RecursionError:
            raise ChatTemplateError("the chat template went over its budget: it recursed too deeply") from None
        except MemoryError:
            raise ChatTemplateError("the chat template went over its budget: it ran out of memory") from None
        except jinja2.exceptions.SecurityError as e:
            raise ChatTemplateError(f"the chat template tried an unsafe operation: {_one_line(e)}") from None
        except jinja2.exceptions.TemplateError as e:
            # raise_exception() in the template: the messages do not fit its rules (a bad request).
            raise InvalidParameterError(f"chat template: {_one_line(e)}") from None
        except Exception as e:  # noqa: BLE001  (any other failure of the template is the template's: one line)
            raise InvalidParameterError(
                f"chat template could not render these messages: {type(e).__name__}: {_one_line(e)}") from None


def template_for(generator, override: Optional[str] = None, budget=None) -> ChatTemplate:
    """The chat template of ``generator``'s model: ``override`` (a file or a shipped name) if given,
    else the GGUF's tokenizer.chat_template, else the built-in template of its architecture
    (builtin_template_name); the same sandbox and budget either way. ``.origin`` says which. ChatTemplateError
    when there is none of these."""
    if override is not None:
        source = load_template_source(str(override))
        origin = f"file:{override}" if os.path.isfile(str(override)) else f"builtin:{override}"
    else:
        source = generator.metadata.get("tokenizer.chat_template")
        origin = "gguf"
        if not source:
            builtin = builtin_template_name(generator)
            if builtin is None:
                raise ChatTemplateError(
                    f"the model {os.path.basename(str(generator.model_path))} has no tokenizer.chat_template in its GGUF "
                    f"and specgen has no built-in one for its architecture; pass a template with --chat-template FILE "
                    f"(or chat_template=...; specgen ships {shipped_templates()})")
            source, origin = load_template_source(builtin), f"builtin:{builtin}"
    core = generator._g
    bos = core.token_bytes(core.bos_id).decode("utf-8", "replace") if core.bos_id >= 0 else ""
    eos = core.token_bytes(core.eos_id).decode("utf-8", "replace") if core.eos_id >= 0 else ""
    template = ChatTemplate(source, bos, eos, budget)
    template.origin = origin  # "gguf", "builtin:NAME" or "file:PATH": what the server states in /props
    return template


def builtin_template_name(generator) -> Optional[str]:
    """The shipped template for a model whose GGUF has no chat template, by general.architecture (as
    llama.cpp falls back to a built-in format): Gemma -> gemma3, Qwen2/3 -> chatml; "llama" files are
    told apart by their vocabulary (Llama 3's header tokens, Mistral's [INST], else Llama 2). None for
    other architectures."""
    arch = generator.metadata.get("general.architecture", "")
    if arch in ("gemma", "gemma2", "gemma3"):
        return "gemma3"
    if arch in ("qwen2", "qwen3"):
        return "chatml"
    if arch == "llama":
        if _is_one_token(generator, "<|start_header_id|>"):
            return "llama3"
        if _is_one_token(generator, "[INST]"):
            return "mistral"
        return "llama2"
    return None


def _is_one_token(generator, text: str) -> bool:
    return len(generator.tokenize(text, add_bos=False, special=True)) == 1
