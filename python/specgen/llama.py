"""``specgen.Llama``: llama-cpp-python's ``Llama`` class over specgen's engine, so that a script written
for llama-cpp-python runs after changing its import (``from specgen import Llama``).

It is a thin layer over ``specgen.Generator`` (available as ``llm.generator`` for specgen's own API and
its statistics): the constructor maps llama-cpp-python's keywords onto Generator arguments, and the
calls return llama-cpp-python's dicts and chunk dicts (OpenAI's shapes, built by specgen.openai_compat).

Constructor keywords, by what happens to them:

- used: ``model_path`` (a .gguf path, or a Hub reference as Generator takes it), ``n_ctx`` (0: the
  model's training context), ``n_threads``, ``seed`` (-1 or LLAMA_DEFAULT_SEED: a fresh one per call),
  ``n_gpu_layers`` / ``main_gpu`` (non-zero: the whole model on CUDA device ``main_gpu`` when one is
  usable, else the CPU with a warning, as llama.cpp does), ``type_k`` / ``type_v`` (GGML type ids 0
  f32, 1 f16, 8 q8_0, or those names), ``chat_format``, ``draft_model`` (a LlamaPromptLookupDecoding
  runs as specgen's n-gram drafter; specgen also takes "ngram", "self", "auto" or a draft GGUF),
  ``last_n_tokens_size`` (the repeat penalty's window), ``verbose`` (a load line and per-call timings
  on stderr), ``no_perf`` (no timings);
- accepted without effect on the output, as they only tune llama.cpp's memory and speed: ``n_batch``,
  ``n_ubatch``, ``n_threads_batch`` (specgen's prompt pass uses ``n_threads``), ``use_mmap``,
  ``use_mlock``, ``split_mode``, ``tensor_split``, ``offload_kqv``, ``flash_attn``, ``op_offload``,
  ``swa_full``, ``numa``, ``logits_all`` (log-probabilities are always available), ``spm_infill``, and the
  old keywords llama-cpp-python itself ignores (``f16_kv``, ``mul_mat_q``, ``low_vram``, ``n_gqa``,
  ``rms_norm_eps``);
- refused when not at their default (SpecgenNotImplementedError naming them), because the output
  would differ: ``embedding``, ``vocab_only``, ``kv_overrides``, ``rope_*`` / ``yarn_*``,
  ``pooling_type``, ``attention_type``, ``lora_*``, ``chat_handler``, ``tokenizer``;
- anything else is a TypeError naming it (llama-cpp-python would ignore a misspelt keyword silently).

Per-call parameters follow the same rule: ``tfs_z`` is ignored as llama-cpp-python ignores it;
``typical_p`` != 1, mirostat, ``grammar``, ``logits_processor``, ``stopping_criteria``, ``logit_bias``,
penalties other than ``repeat_penalty``, tools / functions and JSON mode raise InvalidParameterError.
"""
from __future__ import annotations

import os
import sys
import warnings
from typing import Any, Dict, Iterator, List, Optional, Sequence, Union

from specgen import openai_compat as oc
from specgen.errors import InvalidParameterError, SpecgenNotImplementedError
from specgen.generator import Generator
from specgen.request import Request

__all__ = ["Llama", "LLAMA_DEFAULT_SEED"]

#: llama.cpp's "no seed given": a fresh random seed for every call.
LLAMA_DEFAULT_SEED = 0xFFFFFFFF

# Keywords that only tune llama.cpp's memory use and speed: accepted, the output is the same without them.
_NO_EFFECT = ("n_batch", "n_ubatch", "n_threads_batch", "use_mmap", "use_mlock", "split_mode", "tensor_split",
              "offload_kqv", "flash_attn", "op_offload", "swa_full", "numa", "logits_all", "spm_infill",
              # removed from llama-cpp-python, which still swallows them: old scripts pass them
              "f16_kv", "mul_mat_q", "low_vram", "n_gqa", "rms_norm_eps")

# Keywords that change the output and that specgen does not implement: accepted at these defaults only.
_AT_DEFAULT_ONLY: Dict[str, Any] = {
    "embedding": False, "vocab_only": False, "kv_overrides": None, "rope_scaling_type": -1, "pooling_type": -1,
    "attention_type": -1, "rope_freq_base": 0.0, "rope_freq_scale": 0.0, "yarn_ext_factor": -1.0,
    "yarn_attn_factor": 1.0, "yarn_beta_fast": 32.0, "yarn_beta_slow": 1.0, "yarn_orig_ctx": 0,
    "lora_base": None, "lora_scale": 1.0, "lora_path": None, "chat_handler": None, "tokenizer": None,
}

# llama-cpp-python's chat_format names -> specgen's shipped templates (None: the GGUF's, else the built-in).
_CHAT_FORMATS = {"chat_template.default": None, "gemma": "gemma3", "chatml": "chatml", "qwen": "chatml",
                 "llama-3": "llama3", "llama-2": "llama2", "mistral-instruct": "mistral"}

# GGML type ids of the KV cache types specgen has.
_GGML_KV_TYPES = {0: "f32", 1: "f16", 8: "q8_0"}


def _is_default(value: Any, default: Any) -> bool:
    if default is None:
        return value is None or value == {}
    return value == default


class Llama:
    """llama-cpp-python's ``Llama`` over specgen's engine (see the module docstring for the keywords)."""

    def __init__(
        self,
        model_path: Union[str, os.PathLike],
        *,
        n_gpu_layers: int = 0,
        main_gpu: int = 0,
        seed: int = LLAMA_DEFAULT_SEED,
        n_ctx: int = 512,
        n_threads: Optional[int] = None,
        last_n_tokens_size: int = 64,
        chat_format: Optional[str] = None,
        draft_model: Any = None,
        type_k: Optional[Union[int, str]] = None,
        type_v: Optional[Union[int, str]] = None,
        no_perf: bool = False,
        verbose: bool = True,
        **kwargs: Any,
    ) -> None:
        # The rest of llama-cpp-python's keywords, checked against the two tables above (not threaded on).
        unknown = sorted(k for k in kwargs if k not in _NO_EFFECT and k not in _AT_DEFAULT_ONLY)
        if unknown:
            raise TypeError(f"Llama() got unexpected keyword argument(s) {', '.join(map(repr, unknown))} "
                            "(specgen.Llama takes llama-cpp-python's keywords; see help(specgen.llama))")
        unsupported = sorted(k for k, default in _AT_DEFAULT_ONLY.items()
                             if k in kwargs and not _is_default(kwargs[k], default))
        if unsupported:
            raise SpecgenNotImplementedError(
                f"Llama(): {', '.join(f'{k}={kwargs[k]!r}' for k in unsupported)} is not supported by specgen "
                "(leave it at llama-cpp-python's default)")
        self.verbose = bool(verbose)
        self.no_perf = bool(no_perf)
        self.chat_format = chat_format
        self.draft_model = draft_model
        self.last_n_tokens_size = last_n_tokens_size
        self.n_batch = kwargs.get("n_batch", 512)
        self._seed = seed
        self._template_spec = self._chat_template_spec(chat_format)
        self._template = None

        gen_kw: Dict[str, Any] = dict(n_threads=n_threads, device=self._device(n_gpu_layers, main_gpu),
                                      type_k=self._kv_type("type_k", type_k), type_v=self._kv_type("type_v", type_v))
        gen_kw.update(self._draft_kwargs(draft_model))
        if isinstance(n_ctx, bool) or not isinstance(n_ctx, int) or n_ctx < 0:
            raise InvalidParameterError(f"n_ctx must be an integer >= 0 (0: the model's), got {n_ctx!r}")
        if n_ctx == 0:
            n_ctx = self._training_context(model_path, gen_kw)
        self.generator = Generator(model_path, n_ctx=n_ctx, **gen_kw)
        self.model_path = self.generator.model_path
        self.n_threads = self.generator.n_threads
        self.n_tokens = 0
        if self.verbose:
            print(f"specgen.Llama: {self.model_path}: n_ctx {self.generator.n_ctx}, {self.n_threads} threads, "
                  f"device {self.generator.device}, draft {self.generator.draft or 'none'}", file=sys.stderr)

    # -- constructor helpers --------------------------------------------------------------------
    @staticmethod
    def _device(n_gpu_layers: int, main_gpu: int) -> str:
        """llama.cpp offloads n_gpu_layers layers; specgen runs the whole model on one device: CUDA
        device main_gpu for any non-zero value when one is usable, else the CPU with a warning."""
        from specgen import _core

        if isinstance(n_gpu_layers, bool) or not isinstance(n_gpu_layers, int):
            raise InvalidParameterError(f"n_gpu_layers must be an integer, got {n_gpu_layers!r}")
        if n_gpu_layers == 0:
            return "cpu"
        n_devices = _core.cuda_device_count()
        if n_devices == 0:
            warnings.warn(f"n_gpu_layers={n_gpu_layers}: no usable CUDA device (or a build without CUDA); "
                          "running on the CPU", RuntimeWarning, stacklevel=3)
            return "cpu"
        if isinstance(main_gpu, bool) or not isinstance(main_gpu, int) or not 0 <= main_gpu < n_devices:
            raise InvalidParameterError(f"main_gpu must be in [0, {n_devices}), got {main_gpu!r}")
        return f"cuda:{main_gpu}"

    @staticmethod
    def _kv_type(name: str, value: Optional[Union[int, str]]) -> Optional[str]:
        if value is None or isinstance(value, str):
            return value
        if isinstance(value, int) and not isinstance(value, bool) and value in _GGML_KV_TYPES:
            return _GGML_KV_TYPES[value]
        raise InvalidParameterError(f"{name} must be one of the GGML types {sorted(_GGML_KV_TYPES)} "
                                    f"({', '.join(_GGML_KV_TYPES.values())}), got {value!r}")

    @staticmethod
    def _draft_kwargs(draft_model: Any) -> Dict[str, Any]:
        from specgen.llama_speculative import LlamaDraftModel

        if draft_model is None:
            return {}
        if isinstance(draft_model, (str, os.PathLike)):
            return {"draft": draft_model}
        # llama-cpp-python's own LlamaPromptLookupDecoding too (an import left unchanged): same fields.
        if type(draft_model).__name__ == "LlamaPromptLookupDecoding" and hasattr(draft_model, "num_pred_tokens"):
            return {"draft": "ngram", "draft_max": int(draft_model.num_pred_tokens),
                    "ngram_max": int(getattr(draft_model, "max_ngram_size", 2)), "ngram_min": 1}
        what = "a LlamaDraftModel subclass" if isinstance(draft_model, LlamaDraftModel) else type(draft_model).__name__
        raise SpecgenNotImplementedError(
            f"draft_model: {what} is Python code the engine cannot call while it decodes; use "
            "LlamaPromptLookupDecoding(...), 'ngram', 'self', 'auto' or a draft GGUF path")

    @staticmethod
    def _chat_template_spec(chat_format: Optional[str]) -> Optional[str]:
        from specgen.chat_template import shipped_templates

        if chat_format is None:
            return None
        if not isinstance(chat_format, str):
            raise InvalidParameterError(f"chat_format must be a string, got {type(chat_format).__name__}")
        if chat_format in _CHAT_FORMATS:
            return _CHAT_FORMATS[chat_format]
        if chat_format in shipped_templates() or os.path.isfile(chat_format):
            return chat_format
        raise InvalidParameterError(
            f"chat_format {chat_format!r} is not available in specgen; use one of {sorted(_CHAT_FORMATS)}, a shipped "
            f"template {shipped_templates()}, a Jinja template file, or None (the GGUF's template, else the built-in "
            "one of its architecture)")

    @staticmethod
    def _training_context(model_path, gen_kw: Dict[str, Any]) -> int:
        """n_ctx=0: the context the model was trained with (its GGUF's {arch}.context_length), read from a
        short-lived load (the weights are mapped, not read)."""
        probe = Generator(model_path, n_ctx=16, n_threads=gen_kw.get("n_threads"))
        try:
            meta = probe.metadata
            value = meta.get(f"{meta.get('general.architecture', '')}.context_length")
        finally:
            probe.close()
        if not value or not str(value).isdigit():
            raise InvalidParameterError("n_ctx=0: the GGUF states no context_length; pass n_ctx explicitly")
        return int(value)

    # -- model facts ----------------------------------------------------------------------------
    @property
    def metadata(self) -> Dict[str, str]:
        return self.generator.metadata

    def n_ctx(self) -> int:
        """The context window in tokens."""
        return self.generator.n_ctx

    def n_vocab(self) -> int:
        return self.generator.n_vocab

    def n_embd(self) -> int:
        meta = self.metadata
        return int(meta[f"{meta['general.architecture']}.embedding_length"])

    def token_bos(self) -> int:
        return self.generator._g.bos_id

    def token_eos(self) -> int:
        return self.generator._g.eos_id

    def token_nl(self) -> int:
        return self.generator.tokenize("\n", add_bos=False)[-1]

    # -- tokens ---------------------------------------------------------------------------------
    def tokenize(self, text: Union[bytes, str], add_bos: bool = True, special: bool = False) -> List[int]:
        """Token ids of UTF-8 ``text``; ``add_bos`` prepends BOS where the model wants one; ``special``
        parses control tokens written as text."""
        return self.generator.tokenize(text, add_bos=add_bos, special=special)

    def detokenize(self, tokens: Sequence[int], prev_tokens: Optional[Sequence[int]] = None,
                   special: bool = False) -> bytes:
        """The bytes of ``tokens`` (control tokens such as BOS left out unless ``special``); with
        ``prev_tokens``, only what ``tokens`` add after them."""
        def raw(ids: Sequence[int]) -> bytes:
            return bytes(self.generator._g.detokenize(self.generator._token_ids(ids, "detokenize"), not special))

        if not prev_tokens:
            return raw(tokens)
        before = raw(prev_tokens)
        return raw(list(prev_tokens) + list(tokens))[len(before):]

    # -- state ----------------------------------------------------------------------------------
    def reset(self) -> None:
        """llama-cpp-python forgets its evaluated tokens here. specgen's slots keep their KV rows and reuse
        a matching prompt prefix on their own (the output does not depend on it), so only the count resets."""
        self.n_tokens = 0

    def set_seed(self, seed: int) -> None:
        """The seed of every later call that passes none (-1 or LLAMA_DEFAULT_SEED: a fresh one each call)."""
        self._seed = seed

    def close(self) -> None:
        """Frees the model now."""
        self.generator.close()

    def __enter__(self) -> "Llama":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- per-call parameters --------------------------------------------------------------------
    def _call_seed(self, seed: Optional[int]) -> Optional[int]:
        seed = self._seed if seed is None else seed
        return None if seed in (-1, LLAMA_DEFAULT_SEED) else seed

    @staticmethod
    def _refuse(typical_p: float, mirostat_mode: int, **named: Any) -> None:
        if typical_p != 1.0:
            raise InvalidParameterError(f"typical_p={typical_p} is not supported by specgen's sampler (leave it at 1.0)")
        if mirostat_mode:
            raise InvalidParameterError(f"mirostat_mode={mirostat_mode} is not supported by specgen's sampler (0)")
        for name, value in named.items():
            if value is not None:
                raise InvalidParameterError(f"{name} is not supported by specgen")

    def _params(self, *, max_tokens, temperature, top_p, top_k, min_p, repeat_penalty, frequency_penalty,
                presence_penalty, stop, seed, logit_bias, logprobs) -> Dict[str, Any]:
        if isinstance(max_tokens, int) and not isinstance(max_tokens, bool) and max_tokens <= 0:
            max_tokens = None  # llama-cpp-python: <= 0 or None is "until the context is full"
        params = oc.generation_params(max_tokens=max_tokens, temperature=temperature, top_p=top_p, top_k=top_k,
                                      min_p=min_p, repeat_penalty=repeat_penalty, frequency_penalty=frequency_penalty,
                                      presence_penalty=presence_penalty, stop=stop, seed=self._call_seed(seed),
                                      logit_bias=logit_bias, logprobs=logprobs)
        params["repeat_last_n"] = self.last_n_tokens_size
        return params

    # -- completions ----------------------------------------------------------------------------
    def create_completion(
        self,
        prompt: Union[str, List[int]],
        suffix: Optional[str] = None,
        max_tokens: Optional[int] = 16,
        temperature: float = 0.8,
        top_p: float = 0.95,
        min_p: float = 0.05,
        typical_p: float = 1.0,
        logprobs: Optional[int] = None,
        echo: bool = False,
        stop: Optional[Union[str, List[str]]] = None,
        frequency_penalty: float = 0.0,
        presence_penalty: float = 0.0,
        repeat_penalty: float = 1.0,
        top_k: int = 40,
        stream: bool = False,
        seed: Optional[int] = None,
        tfs_z: float = 1.0,
        mirostat_mode: int = 0,
        mirostat_tau: float = 5.0,
        mirostat_eta: float = 0.1,
        model: Optional[str] = None,
        stopping_criteria: Any = None,
        logits_processor: Any = None,
        grammar: Any = None,
        logit_bias: Optional[Dict[int, float]] = None,
    ) -> Union[Dict[str, Any], Iterator[Dict[str, Any]]]:
        """A ``text_completion`` dict for ``prompt`` (text or token ids); ``stream=True``: an iterator of
        chunk dicts. ``echo`` puts the prompt's text before the completion. ``tfs_z`` is ignored, as
        llama-cpp-python ignores it."""
        oc.check_unsupported(suffix=suffix)
        self._refuse(typical_p, mirostat_mode, stopping_criteria=stopping_criteria,
                     logits_processor=logits_processor, grammar=grammar)
        n_top = oc.completion_logprobs(logprobs)
        if echo and n_top is not None:
            raise InvalidParameterError("echo=True with logprobs is not supported: specgen computes no log-probabilities "
                                        "for prompt tokens")
        params = self._params(max_tokens=max_tokens, temperature=temperature, top_p=top_p, top_k=top_k, min_p=min_p,
                              repeat_penalty=repeat_penalty, frequency_penalty=frequency_penalty,
                              presence_penalty=presence_penalty, stop=stop, seed=seed, logit_bias=logit_bias,
                              logprobs=n_top)
        tokens = oc.prompt_tokens(self.generator, prompt)
        echoed = ""
        if echo:
            echoed = prompt if isinstance(prompt, str) else self.detokenize(tokens).decode("utf-8", "replace")
        builder = oc.ResponseBuilder(self.generator, "completion", model or self.model_path, n_top)
        return self._run(builder, tokens, params, stream, echoed)

    def __call__(self, prompt: Union[str, List[int]], *args: Any, **kwargs: Any) -> Union[Dict[str, Any], Iterator[Dict[str, Any]]]:
        """create_completion (same arguments)."""
        return self.create_completion(prompt, *args, **kwargs)

    def create_chat_completion(
        self,
        messages: List[Dict[str, Any]],
        functions: Optional[list] = None,
        function_call: Any = None,
        tools: Optional[list] = None,
        tool_choice: Any = None,
        temperature: float = 0.2,
        top_p: float = 0.95,
        top_k: int = 40,
        min_p: float = 0.05,
        typical_p: float = 1.0,
        stream: bool = False,
        stop: Optional[Union[str, List[str]]] = None,
        seed: Optional[int] = None,
        response_format: Optional[Dict[str, Any]] = None,
        max_tokens: Optional[int] = None,
        presence_penalty: float = 0.0,
        frequency_penalty: float = 0.0,
        repeat_penalty: float = 1.0,
        tfs_z: float = 1.0,
        mirostat_mode: int = 0,
        mirostat_tau: float = 5.0,
        mirostat_eta: float = 0.1,
        model: Optional[str] = None,
        logits_processor: Any = None,
        grammar: Any = None,
        logit_bias: Optional[Dict[int, float]] = None,
        logprobs: Optional[bool] = None,
        top_logprobs: Optional[int] = None,
    ) -> Union[Dict[str, Any], Iterator[Dict[str, Any]]]:
        """A ``chat.completion`` dict for ``messages`` rendered with the chat template (``chat_format``,
        else the GGUF's, else the built-in one of the model's architecture); ``stream=True``: an iterator
        of chunk dicts."""
        oc.check_unsupported(functions=functions, function_call=function_call, tools=tools,
                             tool_choice=None if tool_choice == "none" else tool_choice)
        if response_format and response_format.get("type", "text") != "text":
            raise InvalidParameterError(f"response_format {response_format.get('type')!r} is not supported (only 'text')")
        self._refuse(typical_p, mirostat_mode, logits_processor=logits_processor, grammar=grammar)
        n_top = oc.chat_logprobs(logprobs, top_logprobs)
        params = self._params(max_tokens=max_tokens, temperature=temperature, top_p=top_p, top_k=top_k, min_p=min_p,
                              repeat_penalty=repeat_penalty, frequency_penalty=frequency_penalty,
                              presence_penalty=presence_penalty, stop=stop, seed=seed, logit_bias=logit_bias,
                              logprobs=n_top)
        tokens = oc.chat_prompt_tokens(self.generator, self.chat_template, messages)
        builder = oc.ResponseBuilder(self.generator, "chat", model or self.model_path, n_top)
        return self._run(builder, tokens, params, stream, "")

    def create_chat_completion_openai_v1(self, *args: Any, **kwargs: Any):
        """create_chat_completion's result as the openai package's ChatCompletion (or ChatCompletionChunk
        objects when streaming)."""
        try:
            from openai.types.chat import ChatCompletion, ChatCompletionChunk
        except ImportError as e:
            raise ImportError("create_chat_completion_openai_v1 needs the openai package: pip install openai") from e
        result = self.create_chat_completion(*args, **kwargs)
        if kwargs.get("stream", False):
            return (ChatCompletionChunk(**chunk) for chunk in result)
        return ChatCompletion(**result)

    @property
    def chat_template(self):
        """The chat template (specgen.chat_template.ChatTemplate; ``.origin`` says where it came from)."""
        if self._template is None:
            from specgen.chat_template import template_for

            self._template = template_for(self.generator, self._template_spec)
        return self._template

    def generate(self, tokens: Sequence[int], top_k: int = 40, top_p: float = 0.95, min_p: float = 0.05,
                 typical_p: float = 1.0, temp: float = 0.80, repeat_penalty: float = 1.0, reset: bool = True,
                 frequency_penalty: float = 0.0, presence_penalty: float = 0.0, tfs_z: float = 1.0,
                 mirostat_mode: int = 0, mirostat_tau: float = 5.0, mirostat_eta: float = 0.1,
                 penalize_nl: bool = True, logits_processor: Any = None, stopping_criteria: Any = None,
                 grammar: Any = None) -> Iterator[int]:
        """Token ids continuing ``tokens``, one at a time, until the caller stops iterating (or the context
        is full): end-of-generation tokens are yielded too, as llama-cpp-python does."""
        self._refuse(typical_p, mirostat_mode, logits_processor=logits_processor,
                     stopping_criteria=stopping_criteria, grammar=grammar)
        params = self._params(max_tokens=-1, temperature=temp, top_p=top_p, top_k=top_k, min_p=min_p,
                              repeat_penalty=repeat_penalty, frequency_penalty=frequency_penalty,
                              presence_penalty=presence_penalty, stop=None, seed=None, logit_bias=None, logprobs=None)
        ids = self.generator._token_ids(tokens, "tokens")
        oc.check_context(self.generator, ids)

        def run() -> Iterator[int]:
            for ev in self.generator._start(ids, ignore_eos=True, **params).events():
                yield from ev.tokens

        return run()

    # -- embeddings -----------------------------------------------------------------------------
    def embed(self, input: Union[str, List[str]], *args: Any, **kwargs: Any):
        raise SpecgenNotImplementedError("embeddings are not computed by specgen (a text-generation engine)")

    def create_embedding(self, input: Union[str, List[str]], model: Optional[str] = None):
        raise SpecgenNotImplementedError("embeddings are not computed by specgen (a text-generation engine)")

    # -- running a request ----------------------------------------------------------------------
    def _run(self, builder: oc.ResponseBuilder, tokens: List[int], params: Dict[str, Any], stream: bool,
             echoed: str):
        if not stream:
            request = self.generator._start(tokens, **params)
            for ev in request.events():
                builder.add(ev)
            out = builder.response(request.finish_reason, request.stats, request.n_prompt_tokens)
            out["usage"] = _llama_usage(out["usage"])
            if echoed:
                out["choices"][0]["text"] = echoed + out["choices"][0]["text"]
            self._timings(request)
            return out
        return self._chunks(builder, tokens, params, echoed)

    def _chunks(self, builder: oc.ResponseBuilder, tokens: List[int], params: Dict[str, Any],
                echoed: str) -> Iterator[Dict[str, Any]]:
        # Started on the first next(), as llama-cpp-python's generator does; a stream dropped early
        # ends its request (closing its events() iterator cancels it).
        request = self.generator._start(tokens, **params)

        def prefix(chunk: Dict[str, Any]) -> Dict[str, Any]:
            nonlocal echoed
            if echoed:
                chunk["choices"][0]["text"] = echoed + chunk["choices"][0]["text"]
                echoed = ""
            return chunk

        yield from (prefix(c) for c in builder.first_chunks())
        for ev in request.events():
            yield prefix(builder.chunk(ev))
        last = builder.final_chunk(request.finish_reason, request.stats, request.n_prompt_tokens)
        last.pop("usage", None)  # llama-cpp-python's chunks carry no usage
        yield prefix(last)
        self._timings(request)

    def _timings(self, request: Request) -> None:
        if not self.verbose or self.no_perf:
            return
        s = request.stats
        print(f"specgen.Llama: prompt {s['n_prompt_tokens']} tokens ({s['prefill_tokens_per_second']:.1f} tokens/s), "
              f"generated {s['n_generated']} tokens ({s['decode_tokens_per_second']:.1f} tokens/s)", file=sys.stderr)

    # -- the Hub --------------------------------------------------------------------------------
    @classmethod
    def from_pretrained(cls, repo_id: str, filename: Optional[str], additional_files: Optional[List[str]] = None,
                        local_dir: Optional[Union[str, os.PathLike]] = None, local_dir_use_symlinks: Any = "auto",
                        cache_dir: Optional[Union[str, os.PathLike]] = None, **kwargs: Any) -> "Llama":
        """A Llama over the file of Hub repo ``repo_id`` that matches the glob ``filename`` (e.g.
        "*Q4_K_M.gguf"; None: the repo's Q4_K_M or only .gguf), downloaded with huggingface_hub into its
        cache (or ``local_dir``); ``additional_files`` (globs) are fetched next to it. Offline mode
        (HF_HUB_OFFLINE=1) resolves from the cache. ``local_dir_use_symlinks`` is accepted and ignored,
        as recent huggingface_hub releases ignore it."""
        from specgen.hub import resolve_hub_glob, resolve_model

        if filename is None:
            path = resolve_model(repo_id, cache_dir=cache_dir)
        else:
            path = resolve_hub_glob(repo_id, filename, cache_dir=cache_dir, local_dir=local_dir)
        for extra in additional_files or ():
            resolve_hub_glob(repo_id, extra, cache_dir=cache_dir, local_dir=local_dir)
        return cls(model_path=path, **kwargs)


def _llama_usage(usage: Dict[str, Any]) -> Dict[str, Any]:
    """llama-cpp-python's usage keys (specgen's ``speculation`` counts stay in ``llm.generator``'s stats)."""
    return {k: usage[k] for k in ("prompt_tokens", "completion_tokens", "total_tokens")}
