"""The Generator: load a GGUF model once, generate text from it (plainly or speculatively)."""
from __future__ import annotations

import os
import re
import secrets
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Sequence, Union

import numpy as np

from specgen.errors import InvalidParameterError, ModelLoadError
from specgen.hub import resolve_model
from specgen.logprobs import TokenLogprob, from_core

_VERIFY = ("token", "block")
_DRAFT_KINDS = ("self", "ngram")
_SSD_SCHEDULES = ("uniform", "geometric")
_SSD_BACKUPS = ("neural", "fast")


def default_frspec_table() -> str:
    """The FR-Spec table shipped for the Gemma 3 tokenizer (top 32768 ids; tools/build_frspec_table.py)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "frspec_gemma3_top32768.bin")


@dataclass
class GenerationResult:
    """What generate() returns. finish_reason is "stop" (a stop string), "length" (max_tokens or
    the context is full) or "eos" (the model ended its turn). ``logprobs``: one entry per token
    when generate() was given ``logprobs=N`` (specgen.logprobs), else None."""

    text: str
    tokens: List[int]
    finish_reason: str
    stats: Dict[str, Any] = field(default_factory=dict)
    logprobs: Optional[List[TokenLogprob]] = None


def _check_int(name: str, value: Any, lo: int, hi: Optional[int] = None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise InvalidParameterError(f"{name} must be an integer, got {value!r}")
    value = int(value)
    if value < lo or (hi is not None and value > hi):
        bound = f"[{lo}, {hi}]" if hi is not None else f">= {lo}"
        raise InvalidParameterError(f"{name} must be {bound}, got {value}")
    return value


def _check_float(name: str, value: Any, lo: float, hi: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise InvalidParameterError(f"{name} must be a number, got {value!r}")
    value = float(value)
    if not (lo <= value <= hi):  # also rejects NaN
        raise InvalidParameterError(f"{name} must be in [{lo}, {hi}], got {value}")
    return value


class Generator:
    """A loaded model that generates text.

    ``model`` is a local .gguf path, a Hub reference (``org/repo:QUANT`` or ``org/repo/file.gguf``,
    resolved with huggingface_hub, honouring HF_HUB_OFFLINE and ``cache_dir``), or None for the
    default model (Gemma 3 270M from the ``specgen[gemma]`` extra).

    Speculative decoding: ``draft`` is None (plain decoding), "ngram" (prompt lookup), "self" (the
    target's own first ``self_layers`` layers) or a path/Hub reference to a draft GGUF with the same
    vocabulary. ``verify`` is "block" (hierarchical/HSD, the default) or "token". ``draft_max`` is
    the most tokens drafted per round (gamma), ``draft_min`` the fewest worth verifying;
    ``draft_adaptive`` shrinks gamma after rejections and grows it back after full acceptances.

    SSD / Saguaro (``ssd=True``, needs ``draft="self"`` or a draft model): the drafter runs on its own
    ``n_threads_draft`` threads while the target verifies (unset: ``n_threads`` is split, half for
    the drafter, the rest for the target; the properties ``n_threads`` / ``n_threads_draft`` give the
    split in effect), pre-drafting the next round for the ``ssd_fanout`` most likely bonus tokens of
    every outcome (``ssd_fanout_schedule`` "uniform" or "geometric"), at most ``ssd_budget``
    branches per round (-1: until the verdict). A cache miss runs
    ``ssd_backup``: "neural" (draft now) or "fast" (n-gram). ``saguaro_c`` in [0, 1] down-weights the
    drafter's top-F tokens (Saguaro sampling; 1 = off). ``nanospec`` / ``frspec`` apply to the SSD
    drafter as to a sequential one (draft logits over S only). Output stays lossless.

    Draft head (self or model drafters, ALGORITHMS.md section 3): ``nanospec=True`` computes draft
    logits only over the request's in-context vocabulary (at most ``nanospec_capacity`` ids: the
    prompt, the target's top ``nanospec_topk`` ids at every prompt and verified position, and the
    drafted and emitted tokens);
    ``frspec=N`` over the N most frequent ids of ``frspec_path`` (default: the table shipped for
    Gemma 3's tokenizer, specgen/data). Both stay lossless. With ``draft="self"`` and all layers,
    verification reuses the drafter's hidden states (``reuse_draft_hidden``) and runs only the head.

    ``device`` is "cpu", "cuda" or "cuda:N": on CUDA the weights, KV caches and activations live in
    device memory and sampling/verification run on the host on downloaded logits. A build without
    CUDA, or a machine without a device, raises DeviceError.
    """

    def __init__(
        self,
        model: Optional[Union[str, os.PathLike]] = None,
        *,
        draft: Optional[Union[str, os.PathLike]] = None,
        n_ctx: int = 4096,
        n_threads: Optional[int] = None,
        n_threads_draft: Optional[int] = None,
        seed: Optional[int] = None,
        verify: str = "block",
        draft_max: int = 8,
        draft_min: int = 0,
        draft_p_min: float = 0.0,
        draft_adaptive: bool = True,
        self_layers: int = 0,
        ngram_max: int = 4,
        ngram_min: int = 1,
        nanospec: bool = False,
        nanospec_capacity: int = 3072,
        nanospec_topk: int = 3,
        frspec: int = 0,
        frspec_path: Optional[Union[str, os.PathLike]] = None,
        reuse_draft_hidden: bool = True,
        ssd: bool = False,
        ssd_fanout: int = 4,
        ssd_fanout_schedule: str = "uniform",
        ssd_backup: str = "neural",
        ssd_budget: int = -1,
        saguaro_c: float = 1.0,
        device: str = "cpu",
        cache_dir: Optional[Union[str, os.PathLike]] = None,
        model_path: Optional[Union[str, os.PathLike]] = None,
    ) -> None:
        from specgen import _core

        if model is not None and model_path is not None:
            raise InvalidParameterError("pass either model or model_path, not both")
        if model is None:
            model = model_path
        for name, ref in (("model", model), ("draft", draft)):
            if ref is not None and not isinstance(ref, (str, os.PathLike)):
                raise InvalidParameterError(f"{name} must be a path, a Hub reference or None, got {type(ref).__name__}")
        if not isinstance(device, str) or not re.fullmatch(r"cpu|cuda(:[0-9]{1,3})?", device):
            raise InvalidParameterError(f"device must be 'cpu', 'cuda' or 'cuda:N', got {device!r}")
        if verify not in _VERIFY:
            raise InvalidParameterError(f"verify must be one of {_VERIFY}, got {verify!r}")
        for name, flag in (("nanospec", nanospec), ("ssd", ssd), ("reuse_draft_hidden", reuse_draft_hidden)):
            if not isinstance(flag, bool):
                raise InvalidParameterError(f"{name} must be True or False, got {flag!r}")

        p = _core.GeneratorParams()
        p.model_path = resolve_model(model, cache_dir=cache_dir)
        p.n_ctx = _check_int("n_ctx", n_ctx, 1, 1 << 20)
        p.n_threads = 0 if n_threads is None else _check_int("n_threads", n_threads, 1, 512)
        p.device = device  # "cuda" without CUDA in the build or without a device: DeviceError
        p.n_threads_draft = 0 if n_threads_draft is None else _check_int("n_threads_draft", n_threads_draft, 1, 512)
        p.verify = getattr(_core.VerifyMode, verify)
        p.draft_max = _check_int("draft_max", draft_max, 1, 64)
        p.draft_min = _check_int("draft_min", draft_min, 0, p.draft_max)
        p.draft_p_min = _check_float("draft_p_min", draft_p_min, 0.0, 1.0)
        if not isinstance(draft_adaptive, bool):
            raise InvalidParameterError(f"draft_adaptive must be True or False, got {draft_adaptive!r}")
        p.draft_adaptive = draft_adaptive
        p.self_layers = _check_int("self_layers", self_layers, 0, 2**31 - 1)
        p.ngram_max = _check_int("ngram_max", ngram_max, 1, 64)
        p.ngram_min = _check_int("ngram_min", ngram_min, 1, p.ngram_max)
        p.nanospec = nanospec
        p.nanospec_capacity = _check_int("nanospec_capacity", nanospec_capacity, 16, 1 << 20)
        p.nanospec_topk = _check_int("nanospec_topk", nanospec_topk, 1, 64)
        p.frspec = _check_int("frspec", frspec, 0, 2**31 - 1)
        if p.frspec > 0:
            p.frspec_path = str(frspec_path) if frspec_path is not None else default_frspec_table()
        p.reuse_draft_hidden = reuse_draft_hidden
        p.ssd = ssd
        if ssd_fanout_schedule not in _SSD_SCHEDULES:
            raise InvalidParameterError(f"ssd_fanout_schedule must be one of {_SSD_SCHEDULES}, got {ssd_fanout_schedule!r}")
        if ssd_backup not in _SSD_BACKUPS:
            raise InvalidParameterError(f"ssd_backup must be one of {_SSD_BACKUPS}, got {ssd_backup!r}")
        p.ssd_fanout = _check_int("ssd_fanout", ssd_fanout, 1, 64)
        p.ssd_fanout_schedule = getattr(_core.SsdSchedule, ssd_fanout_schedule)
        p.ssd_backup = getattr(_core.SsdBackup, ssd_backup)
        p.ssd_budget = _check_int("ssd_budget", ssd_budget, -1)
        p.saguaro_c = _check_float("saguaro_c", saguaro_c, 0.0, 1.0)
        if ssd and (draft is None or str(draft) == "ngram"):
            raise InvalidParameterError("ssd=True needs a neural drafter: draft='self' or a draft model")
        if draft is None:
            p.draft = ""
        elif str(draft) in _DRAFT_KINDS:
            p.draft = str(draft)
        else:
            p.draft = resolve_model(draft, cache_dir=cache_dir)
        self.seed = None if seed is None else _check_int("seed", seed, 0, 2**64 - 1)
        self.model_path = p.model_path
        self.device = device
        self.draft = draft
        self._core = _core.Generator(p)

    # -- lifetime -------------------------------------------------------------------------------
    def close(self) -> None:
        """Frees the model and unmaps its file. The Generator is unusable afterwards; a stream still
        open on it stops (finish_reason "cancelled") and the memory goes when the stream is dropped."""
        live, self._live = getattr(self, "_live", None), None
        if live is not None:
            live.cancel()
        self._core = None

    def __enter__(self) -> "Generator":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def _g(self):
        if self._core is None:
            raise InvalidParameterError("this Generator is closed")
        return self._core

    # -- model facts ----------------------------------------------------------------------------
    @property
    def n_vocab(self) -> int:
        return self._g.n_vocab

    @property
    def n_ctx(self) -> int:
        return self._g.n_ctx

    @property
    def n_threads(self) -> int:
        """The target's threads."""
        return self._g.n_threads

    @property
    def n_threads_draft(self) -> int:
        """The SSD drafter's threads (without ``ssd``: as passed, 0 when not)."""
        return self._g.n_threads_draft

    @property
    def metadata(self) -> Dict[str, str]:
        """GGUF metadata, values rendered as strings (long arrays abbreviated)."""
        return self._g.metadata()

    # -- argument checks ------------------------------------------------------------------------
    @staticmethod
    def _text(text: Any, what: str = "text") -> str:
        """A str the C++ side can take: bytes are decoded (invalid UTF-8 replaced, as tokenize()
        always did); a str that cannot be UTF-8 encoded (lone surrogates) is refused."""
        if isinstance(text, (bytes, bytearray)):
            text = bytes(text).decode("utf-8", errors="replace")
        if not isinstance(text, str):
            raise InvalidParameterError(f"{what} must be str or bytes, got {type(text).__name__}")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as e:
            raise InvalidParameterError(
                f"{what} is not valid Unicode: lone surrogate {text[e.start]!r} at index {e.start} "
                "(pass bytes, or clean the text with .encode('utf-8', 'replace').decode())") from None
        return text

    def _token_ids(self, tokens: Any, what: str) -> List[int]:
        """Token ids as Python ints, each checked against the vocabulary (a too-large int would
        otherwise surface as the binding's TypeError)."""
        if isinstance(tokens, (str, bytes)) or not hasattr(tokens, "__iter__"):
            raise InvalidParameterError(f"{what} must be a sequence of token ids, got {type(tokens).__name__}")
        n_vocab = self.n_vocab
        out = []
        for t in tokens:
            if isinstance(t, bool) or not isinstance(t, (int, np.integer)):
                raise InvalidParameterError(f"{what}: token ids must be integers, got {t!r}")
            t = int(t)
            if not 0 <= t < n_vocab:
                raise InvalidParameterError(f"{what}: token id {t} is outside the vocabulary [0, {n_vocab})")
            out.append(t)
        return out

    # -- tokens ---------------------------------------------------------------------------------
    def tokenize(self, text: Union[str, bytes], add_bos: bool = True, special: bool = False) -> List[int]:
        """Token ids of ``text``; ``special`` parses control tokens written as text."""
        return self._g.tokenize(self._text(text), add_bos, special)

    def detokenize(self, tokens: Sequence[int], skip_special: bool = False) -> str:
        ids = self._token_ids(tokens, "detokenize")
        return bytes(self._g.detokenize(ids, skip_special)).decode("utf-8", errors="replace")

    def logits(self, tokens: Sequence[int], batch_size: int = 128) -> np.ndarray:
        """Next-token logits at every position of ``tokens`` (a fresh context): float32 [n, n_vocab].
        ``batch_size`` tokens go through each forward pass; the result does not depend on it."""
        return self._g.logits(self._token_ids(tokens, "logits"), _check_int("batch_size", batch_size, 1, 2**31 - 1))

    # -- generation -----------------------------------------------------------------------------
    def generate(
        self,
        prompt: Union[str, Sequence[int]],
        *,
        max_tokens: int = 256,
        temperature: float = 0.8,
        top_k: int = 40,
        top_p: float = 0.95,
        min_p: float = 0.05,
        repeat_penalty: float = 1.0,
        stop: Optional[Union[str, Sequence[str]]] = None,
        seed: Optional[int] = None,
        stream: bool = False,
        logprobs: Optional[int] = None,
    ) -> Union[GenerationResult, Iterator[str]]:
        """Continues ``prompt`` (text, or token ids used as they are).

        temperature 0 is greedy decoding. With ``stream=True`` returns an iterator of text pieces
        (whole UTF-8 characters only); otherwise a GenerationResult. Speculative decoding keeps the
        output distribution of plain decoding exactly (greedy: the same tokens). ``logprobs=N``
        records each token's log-probability and its N most probable alternatives
        (GenerationResult.logprobs; specgen.logprobs says from which distribution).
        """
        gen, seed = self._start(prompt, max_tokens=max_tokens, temperature=temperature, top_k=top_k, top_p=top_p,
                                min_p=min_p, repeat_penalty=repeat_penalty, stop=stop, seed=seed, logprobs=logprobs)
        if stream:
            return self._stream(gen)
        try:
            while not gen.done:
                gen.step()
        except BaseException:
            gen.cancel()
            raise
        lp = from_core(gen.logprobs()) if logprobs is not None else None
        return GenerationResult(gen.text, list(gen.tokens), gen.finish_reason, self._stats(gen, seed), lp)

    def _start(self, prompt, *, max_tokens=256, temperature=0.8, top_k=40, top_p=0.95, min_p=0.05,
               repeat_penalty=1.0, stop=None, seed=None, logprobs=None):
        """Checks generate()'s parameters and starts the request (prefill): (native generation,
        seed). specgen.steps drives it step by step for create_completion and the server."""
        from specgen import _core

        gp = _core.GenerateParams()
        gp.max_tokens = _check_int("max_tokens", max_tokens, -1, 1 << 30)
        sp = _core.SamplingParams()
        sp.temperature = _check_float("temperature", temperature, 0.0, 1e6)
        sp.top_k = _check_int("top_k", top_k, 0, 2**31 - 1)
        sp.top_p = _check_float("top_p", top_p, 0.0, 1.0)
        if sp.top_p == 0.0:
            raise InvalidParameterError("top_p must be in (0, 1], got 0")
        sp.min_p = _check_float("min_p", min_p, 0.0, 1.0)
        sp.repeat_penalty = _check_float("repeat_penalty", repeat_penalty, 1e-6, 1e6)
        gp.sampling = sp
        if stop is None:
            stop = []
        elif isinstance(stop, str):
            stop = [stop]
        elif not isinstance(stop, (list, tuple)):
            raise InvalidParameterError(f"stop must be a string or a list of strings, got {type(stop).__name__}")
        stop = list(stop)
        if not all(isinstance(s, str) for s in stop):
            raise InvalidParameterError("stop must be a string or a list of strings")
        gp.stop = [self._text(s, "stop string") for s in stop]
        if seed is None:
            seed = self.seed if self.seed is not None else secrets.randbits(63)
        gp.seed = _check_int("seed", seed, 0, 2**64 - 1)
        gp.logprobs = -1 if logprobs is None else _check_int("logprobs", logprobs, 0, 1024)
        if isinstance(prompt, (str, bytes, bytearray)):
            # Control tokens written in the prompt ("<start_of_turn>") are parsed, as chat
            # templates need (llama-cpp-python does the same for completions).
            tokens = self._g.tokenize(self._text(prompt, "prompt"), True, True)
        elif isinstance(prompt, (list, tuple, np.ndarray)):
            tokens = self._token_ids(prompt, "prompt")
        else:
            raise InvalidParameterError(f"prompt must be a str, bytes or a list of token ids, got {type(prompt).__name__}")
        gen = self._g.start(tokens, gp)
        self._live = gen
        return gen, gp.seed

    def _stream(self, gen) -> Iterator[str]:
        try:
            while not gen.done:
                piece = gen.step()
                if piece:
                    yield piece
        finally:
            gen.cancel()

    @staticmethod
    def _stats(gen, seed: int) -> Dict[str, Any]:
        stats = gen.stats()
        stats["seed"] = seed
        return stats

    # -- OpenAI-shaped results (as llama-cpp-python's Llama; specgen.openai_compat) ---------------
    def create_completion(self, prompt: Union[str, Sequence[int]], **kwargs) -> Union[Dict[str, Any], Iterator[Dict[str, Any]]]:
        """An OpenAI text completion dict (``stream=True``: an iterator of chunk dicts)."""
        from specgen.openai_compat import create_completion

        return create_completion(self, prompt, **kwargs)

    def create_chat_completion(self, messages: List[Dict[str, Any]], **kwargs) -> Union[Dict[str, Any], Iterator[Dict[str, Any]]]:
        """An OpenAI chat completion dict, the messages rendered with the model's chat template
        (``chat_template=`` overrides it; ``stream=True``: an iterator of chunk dicts)."""
        from specgen.openai_compat import create_chat_completion

        return create_chat_completion(self, messages, **kwargs)

    def __call__(self, prompt: Union[str, Sequence[int]], **kwargs) -> Union[GenerationResult, Iterator[str]]:
        return self.generate(prompt, **kwargs)
