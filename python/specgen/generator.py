"""The Generator: load a GGUF model once, generate text from it (plainly or speculatively)."""
from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from specgen.errors import InvalidParameterError, ModelLoadError
from specgen.hub import resolve_model
from specgen.logprobs import TokenLogprob
from specgen.request import Request

# Draft kinds accepted as words by ``draft=`` (anything else is a draft model path / Hub reference).
_DRAFT_WORDS = ("none", "ngram", "self", "auto")


def default_frspec_table() -> str:
    """The FR-Spec table shipped for the Gemma 3 tokenizer (top 32768 ids; tools/build_frspec_table.py)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "frspec_gemma3_top32768.bin")


from specgen._core import GenerationStats  # noqa: E402  (the one stats field list, cpp/src/engine/stats.h)


@dataclass
class GenerationResult:
    """What generate() returns. finish_reason is "stop" (a stop string), "length" (max_tokens or
    the context is full) or "eos" (the model ended its turn). ``stats`` is a GenerationStats: the
    documented field list (docs/DESIGN.md section 7) as attributes, ``to_dict()``, and read-only
    ``stats["name"]`` access. ``logprobs``: one entry per token when generate() was given
    ``logprobs=N`` (specgen.logprobs), else None."""

    text: str
    tokens: List[int]
    finish_reason: str
    stats: Any = None
    logprobs: Optional[List[TokenLogprob]] = None


# -- conversion to the engine's parameter structs ------------------------------------------------
# Ranges, defaults and messages come from the C++ parameter table (_core.param_specs(),
# cpp/src/engine/params.cpp); here values are only checked for their Python type and converted.
def _specs() -> Dict[str, Dict[str, Any]]:
    global _SPECS
    if _SPECS is None:
        from specgen import _core

        _SPECS = {s["name"]: s for s in _core.param_specs()}
    return _SPECS


_SPECS: Optional[Dict[str, Dict[str, Any]]] = None


def _word(name: str, value: Any, expected: str) -> str:
    """A str the engine can take (UTF-8 encodable), else InvalidParameterError naming what was expected."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
            return value
        except UnicodeEncodeError:
            pass
    raise InvalidParameterError(f"{name} must be {expected}, got {value!r}")


def _param(name: str, value: Any) -> Any:
    """``value`` as the type of parameter ``name``, range-checked by the table (InvalidParameterError)."""
    from specgen import _core

    spec = _specs()[name]
    kind = spec["type"]
    if kind == "flag":
        if not isinstance(value, (bool, np.bool_)):
            raise InvalidParameterError(f"{name} must be True or False, got {value!r}")
        return bool(value)
    if kind == "choice":
        return _core.parse_choice(name, _word(name, value, "one of " + ", ".join(spec["choices"])))
    if kind == "toggle":  # a flag that also takes "auto": True / False, or "on" / "off" / "auto"
        if isinstance(value, (bool, np.bool_)):
            value = "on" if value else "off"
        return _core.parse_choice(name, _word(name, value, "True, False, 'on', 'off' or 'auto'"))
    if kind == "integer":
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise InvalidParameterError(f"{name} must be an integer, got {value!r}")
        value = int(value)
    elif kind == "number":
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise InvalidParameterError(f"{name} must be a number, got {value!r}")
        value = float(value)
    _core.check_param(name, value)
    return value


def _choice(name: str, value: Any, enum: Any) -> Any:
    """The engine enum member of choice parameter ``name`` (its choices are the member names)."""
    return getattr(enum, _specs()[name]["choices"][_param(name, value)])


def _is_prompt_list(prompt: Any) -> bool:
    """A list of prompts (str / bytes, or token-id lists) rather than one prompt of token ids."""
    if not isinstance(prompt, (list, tuple)) or not prompt:
        return False
    return all(isinstance(p, (str, bytes, bytearray, list, tuple, np.ndarray)) for p in prompt)


def _seed(value: Any) -> int:
    """None or -1: a fresh random seed (drawn by the engine's one seed function); else the seed."""
    from specgen import _core

    if value is None:
        return _core.random_seed()
    value = _param("seed", value)
    return _core.random_seed() if value == -1 else value


def _check_int(name: str, value: Any, lo: int, hi: Optional[int] = None) -> int:
    """For arguments that are not engine parameters (batch_size)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise InvalidParameterError(f"{name} must be an integer, got {value!r}")
    value = int(value)
    if value < lo or (hi is not None and value > hi):
        bound = f"[{lo}, {hi}]" if hi is not None else f">= {lo}"
        raise InvalidParameterError(f"{name} must be {bound}, got {value}")
    return value


class Generator:
    """A loaded model that generates text.

    ``model`` is a local .gguf path, a Hub reference (``org/repo:QUANT`` or ``org/repo/file.gguf``,
    resolved with huggingface_hub, honouring HF_HUB_OFFLINE and ``cache_dir``), or None for the
    default model (Gemma 3 270M from the ``specgen[gemma]`` extra).

    Speculative decoding: ``draft_kind`` is "none" (plain decoding), "ngram" (prompt lookup), "self"
    (the target's own first ``self_layers`` layers) or "model" (``draft_model``: a path/Hub reference
    to a draft GGUF with the same vocabulary) or "auto" (per request and between rounds picks plain decoding,
    "ngram" or the all-layers self drafter with NanoSpec, and gamma, from a cost model measured on this
    machine at load and the live acceptance; docs/ALGORITHMS.md section 8). ``draft="auto"`` (or
    ``draft_kind="auto"``) with ``draft_model`` adds the draft model as a candidate (its head over
    NanoSpec's S unless ``nanospec=False``; its costs are measured beside the target's). The shorter
    ``draft=`` takes None, "ngram", "self", "auto" or the draft model's path. ``verify`` is "block" (hierarchical/HSD, the default) or "token". ``draft_max`` is
    the most tokens drafted per round (gamma), ``draft_min`` the fewest worth verifying;
    ``draft_p_min`` stops drafting before a position whose drafter top probability is below it (None
    or -1: 0.5 with a NanoSpec head, off otherwise); ``draft_adaptive`` shrinks gamma after rejections
    and grows it back after full acceptances. ``ngram_chain=N`` (with a draft model, also auto's) starts a
    round's proposal with the n-gram lookup's match where it finds one of at least N tokens, and the draft
    model drafts on after it (llama.cpp's chained spec types, lossless; 0: off; docs/ALGORITHMS.md
    section 6.1).

    Every range, default and message comes from the engine's parameter table
    (``specgen._core.param_specs()``): a keyword left at None takes the table's default;
    ``n_threads`` None or 0 means automatic, ``seed`` None or -1 a fresh random seed. With a draft
    model, ``n_threads_draft`` runs its forwards on that many of the ``n_threads`` threads (llama.cpp's
    ``-td``; unset: all of them).

    SSD / Saguaro (``ssd=True``, needs ``draft="self"`` or a draft model): the drafter runs on its own
    ``n_threads_draft`` threads while the target verifies (unset: ``n_threads`` is split, half for
    the drafter, the rest for the target; the properties ``n_threads`` / ``n_threads_draft`` give the
    split in effect), pre-drafting the next round for the ``ssd_fanout`` most likely bonus tokens of
    every outcome (``ssd_fanout_schedule`` "uniform" or "geometric"), at most ``ssd_budget``
    branches per round (-1: until the verdict). A cache miss runs
    ``ssd_backup``: "neural" (draft now) or "fast" (n-gram). ``saguaro_c`` in [0, 1] down-weights the
    drafter's top-F tokens (Saguaro sampling; 1 = off). ``nanospec`` / ``frspec`` apply to the SSD
    drafter as to a sequential one (draft logits over S only). Output stays lossless.

    Draft head (self or model drafters, docs/ALGORITHMS.md section 3): ``nanospec=True`` (or "on")
    computes draft logits only over the request's in-context vocabulary (at most ``nanospec_capacity`` ids: the
    prompt, the target's top ``nanospec_topk`` ids at every prompt and verified position, and the
    drafted and emitted tokens); the default "auto" does so for a draft model's head, where it was
    measured to pay, and not otherwise (False / "off": the full head);
    ``frspec=N`` over the N most frequent ids of ``frspec_path`` (default: the table shipped for
    Gemma 3's tokenizer, specgen/data). NanoSpec's prompt seed takes the target's top-k over the
    vocabulary's 16384 most frequent ids as the vocabulary's own order ranks them (any model; a
    vocabulary under 32768 ids: over the full head). Both stay lossless. With ``draft="self"`` and all layers,
    verification reuses the drafter's hidden states (``reuse_draft_hidden``) and runs only the head.

    EAGLE-3 (``draft_head="head.gguf"``, llama.cpp's eagle3 layout): a one-layer draft head reads the
    target's hidden states at three layers and drafts over its own reduced vocabulary (mapped to target
    ids); lossless, with ``draft_kind`` left at none and no ssd / frspec (docs/DESIGN.md section 4.1).
    ``nanospec=True`` with it drafts over the in-context ids the head has rows for. With ``draft="auto"``
    the head is one more candidate (docs/ALGORITHMS.md section 8.4).

    ``device`` is "cpu", "cuda" or "cuda:N": on CUDA the weights, KV caches and activations live in
    device memory and sampling/verification run on the host on downloaded logits. A build without
    CUDA, or a machine without a device, raises DeviceError.
    """

    def __init__(
        self,
        model: Optional[Union[str, os.PathLike]] = None,
        *,
        draft: Optional[Union[str, os.PathLike]] = None,
        draft_kind: Optional[str] = None,
        draft_model: Optional[Union[str, os.PathLike]] = None,
        draft_head: Optional[Union[str, os.PathLike]] = None,
        n_ctx: Optional[int] = None,
        n_threads: Optional[int] = None,
        n_threads_draft: Optional[int] = None,
        seed: Optional[int] = None,
        verify: Optional[str] = None,
        draft_max: Optional[int] = None,
        draft_min: Optional[int] = None,
        draft_p_min: Optional[float] = None,
        draft_adaptive: Optional[bool] = None,
        self_layers: Optional[int] = None,
        ngram_max: Optional[int] = None,
        ngram_min: Optional[int] = None,
        ngram_chain: Optional[int] = None,
        nanospec: Union[bool, str, None] = None,
        nanospec_capacity: Optional[int] = None,
        nanospec_topk: Optional[int] = None,
        frspec: Optional[int] = None,
        frspec_path: Optional[Union[str, os.PathLike]] = None,
        reuse_draft_hidden: Optional[bool] = None,
        ssd: Optional[bool] = None,
        ssd_fanout: Optional[int] = None,
        ssd_fanout_schedule: Optional[str] = None,
        ssd_backup: Optional[str] = None,
        ssd_budget: Optional[int] = None,
        saguaro_c: Optional[float] = None,
        n_parallel: Optional[int] = None,
        max_queued: Optional[int] = None,
        type_k: Optional[str] = None,
        type_v: Optional[str] = None,
        batch_draft_policy: Optional[bool] = None,
        device: Optional[str] = None,
        cache_dir: Optional[Union[str, os.PathLike]] = None,
        model_path: Optional[Union[str, os.PathLike]] = None,
    ) -> None:
        from specgen import _core

        self._core = None
        if model is not None and model_path is not None:
            raise InvalidParameterError("pass either model or model_path, not both")
        if model is None:
            model = model_path
        for name, ref in (("model", model), ("draft", draft), ("draft_model", draft_model), ("draft_head", draft_head)):
            if ref is not None and not isinstance(ref, (str, os.PathLike)):
                raise InvalidParameterError(f"{name} must be a path, a Hub reference or None, got {type(ref).__name__}")
        device = "cpu" if device is None else device
        _core.parse_device(_word("device", device, "'cpu', 'cuda' or 'cuda:N'"))
        kind, draft_ref = self._draft_choice(draft, draft_kind, draft_model)

        p = _core.GeneratorParams()
        p.model_path = resolve_model(model, cache_dir=cache_dir)
        p.device = device  # "cuda" without CUDA in the build or without a device: DeviceError
        # Every other knob of the table: None leaves the engine's default (the struct's initialiser,
        # which is the table's); a value is type-checked and range-checked by the table.
        given = dict(n_ctx=n_ctx, n_threads=n_threads, n_threads_draft=n_threads_draft, verify=verify,
                     draft_max=draft_max, draft_min=draft_min, draft_p_min=draft_p_min,
                     draft_adaptive=draft_adaptive, self_layers=self_layers, ngram_max=ngram_max,
                     ngram_min=ngram_min, ngram_chain=ngram_chain, nanospec=nanospec, nanospec_capacity=nanospec_capacity,
                     nanospec_topk=nanospec_topk, frspec=frspec, reuse_draft_hidden=reuse_draft_hidden, ssd=ssd,
                     ssd_fanout=ssd_fanout, ssd_fanout_schedule=ssd_fanout_schedule, ssd_backup=ssd_backup,
                     ssd_budget=ssd_budget, saguaro_c=saguaro_c, n_parallel=n_parallel, max_queued=max_queued,
                     type_k=type_k, type_v=type_v, batch_draft_policy=batch_draft_policy)
        for name, value in given.items():
            if value is None:
                continue
            if _specs()[name]["type"] in ("choice", "toggle"):  # the field's enum member of that name
                setattr(p, name, _choice(name, value, type(getattr(p, name))))
            else:
                setattr(p, name, _param(name, value))
        # FR-Spec's frequency table (read only when frspec > 0).
        p.frspec_path = str(frspec_path) if frspec_path is not None else default_frspec_table()
        if draft_head is not None:
            p.draft_head = os.fspath(draft_head)
        # Cross-field rules (ssd/nanospec need a neural drafter, draft_min <= draft_max, ...) before
        # a draft model is looked up.
        if kind in ("auto", "model") and draft_ref is not None:  # a draft model (its reference for now)
            p.set_draft(getattr(_core.DraftKind, kind), os.fspath(draft_ref))
        else:
            p.set_draft(getattr(_core.DraftKind, kind))
        p.validate()
        if kind == "model" or (kind == "auto" and draft_ref is not None):
            p.set_draft(getattr(_core.DraftKind, kind), self._resolve_draft(draft_ref, cache_dir))
        # The seed of every generate() call that passes none; None or -1: a fresh one per call.
        self.seed = None if seed is None or _param("seed", seed) == -1 else int(seed)
        self.model_path = p.model_path
        self.device = device
        self.draft = draft if draft is not None else (None if kind == "none" else (draft_ref if kind == "model" else kind))
        self.draft_head = None if draft_head is None else os.fspath(draft_head)
        self.draft_kind = kind
        self._core = _core.Generator(p)
        for message in self._core.load_warnings:  # e.g. a KV cache larger than the memory available
            warnings.warn(message, RuntimeWarning, stacklevel=2)

    @staticmethod
    def _draft_choice(draft, draft_kind, draft_model):
        """(kind, model reference) from ``draft`` (None, "ngram", "self" or a draft model path / Hub
        reference) or from ``draft_kind`` + ``draft_model``."""
        from specgen import _core

        if draft == "auto" and draft_kind is None and draft_model is not None:
            return "auto", draft_model  # the draft model is one of auto's candidates
        if draft is not None and (draft_kind is not None or draft_model is not None):
            raise InvalidParameterError("pass either draft or draft_kind/draft_model, not both (or draft='auto' "
                                        "with draft_model)")
        if draft_kind is not None:
            kind = _core.parse_draft_kind(_word("draft_kind", draft_kind, "one of none, ngram, self, model, auto")).name
            if kind == "model" and draft_model is None or kind not in ("model", "auto") and draft_model is not None:
                raise InvalidParameterError("draft_model goes with draft_kind='model' or 'auto' (and only with them)")
            return kind, draft_model
        if draft_model is not None:
            return "model", draft_model
        if draft is None:
            return "none", None
        text = os.fspath(draft)
        if text in _DRAFT_WORDS and not isinstance(draft, os.PathLike):
            return text, None
        # A bare word that is no file and no Hub reference is a mistyped kind: name the valid ones.
        if isinstance(draft, str) and not os.path.exists(os.path.expanduser(text)) and "/" not in text \
                and "\\" not in text and not text.lower().endswith(".gguf"):
            raise InvalidParameterError(
                f"draft must be one of none, ngram, self, auto, or a draft model (a .gguf path or a Hub reference), got {text!r}")
        return "model", draft

    @staticmethod
    def _resolve_draft(ref, cache_dir) -> str:
        try:
            return resolve_model(ref, cache_dir=cache_dir)
        except ModelLoadError as e:
            raise ModelLoadError(f"draft: {e} (draft is one of ngram, self, or a draft model path / Hub reference)") from None

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
    def n_parallel(self) -> int:
        """Sequences decoded together (slots)."""
        return self._g.n_parallel

    @property
    def n_free_slots(self) -> int:
        """Slots no request holds now."""
        return self._g.n_free_slots

    @property
    def kv_bytes_per_sequence(self) -> int:
        """KV cache memory of one slot (n_ctx rows, type_k / type_v)."""
        return self._g.kv_bytes_per_sequence

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

    def hidden_states(self, tokens: Sequence[int], layers: Sequence[int], batch_size: int = 128,
                      final: bool = False) -> Union[np.ndarray, Tuple[np.ndarray, np.ndarray]]:
        """The target's hidden states over ``tokens`` (a fresh context), as an EAGLE-3 head reads them
        (docs/DESIGN.md section 4.1): float32 [n_tokens, len(layers), n_embd], the residual stream
        entering each of ``layers`` (layer 0: the embedding, scaled as the model scales it). They come
        from the capture the EAGLE-3 speculator's rows use, so a head trained on them drafts on the
        same numbers. ``final=True`` also returns the output-normed rows the LM head reads, [n_tokens,
        n_embd]. Bad tokens or layers raise InvalidParameterError; more tokens than n_ctx
        ContextOverflowError."""
        ids = self._token_ids(tokens, "hidden_states")
        if not ids:
            raise InvalidParameterError("hidden_states needs at least one token")
        if isinstance(layers, (str, bytes)) or not hasattr(layers, "__iter__"):
            raise InvalidParameterError(f"hidden_states: layers must be a sequence of layer indices, got {layers!r}")
        n_layer = self._g.n_layer
        wanted = []
        for layer in layers:
            if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)):
                raise InvalidParameterError(f"hidden_states: layers must be integers, got {layer!r}")
            if not 0 <= int(layer) < n_layer:
                raise InvalidParameterError(f"hidden_states: layer {int(layer)} is outside the target's layers [0, {n_layer})")
            wanted.append(int(layer))
        if not wanted:
            raise InvalidParameterError("hidden_states needs at least one layer")
        features, final_rows = self._g.hidden_states(ids, wanted, _check_int("batch_size", batch_size, 1, 2**31 - 1))
        return (features, final_rows) if final else features

    # -- generation -----------------------------------------------------------------------------
    def generate(
        self,
        prompt: Union[str, Sequence[int], List[str], List[List[int]]],
        *,
        max_tokens: int = 256,
        temperature: float = 0.8,
        top_k: int = 40,
        top_p: float = 0.95,
        min_p: float = 0.05,
        repeat_penalty: float = 1.0,
        repeat_last_n: int = 64,
        stop: Optional[Union[str, Sequence[str]]] = None,
        seed: Optional[int] = None,
        ignore_eos: bool = False,
        add_bos: bool = True,
        stream: bool = False,
        logprobs: Optional[int] = None,
    ) -> Union[GenerationResult, Request]:
        """Continues ``prompt`` (text, or token ids used as they are).

        temperature 0 is greedy decoding. ``repeat_penalty`` looks back ``repeat_last_n`` tokens (-1:
        all, 0: off). ``seed`` None or -1 draws a fresh one (``stats.seed`` reports it).
        ``ignore_eos`` keeps generating past end-of-generation tokens; ``add_bos`` prepends BOS when
        the model asks for it. With ``stream=True`` returns the started specgen.Request, an iterator
        of text pieces (whole UTF-8 characters only); otherwise a GenerationResult. Speculative decoding keeps the output
        distribution of plain decoding exactly (greedy: the same tokens). ``logprobs=N`` records each
        token's log-probability and its N most probable alternatives (GenerationResult.logprobs;
        specgen.logprobs says from which distribution).
        """
        if _is_prompt_list(prompt):
            # Several prompts: all submitted at once, so the engine decodes them in the same steps
            # (up to n_parallel; the rest queue). seed: one for all, or one per prompt.
            prompts = list(prompt)
            seeds = list(seed) if isinstance(seed, (list, tuple)) else [seed] * len(prompts)
            if len(seeds) != len(prompts):
                raise InvalidParameterError(f"seed: {len(seeds)} seeds for {len(prompts)} prompts")
            if stream:
                raise InvalidParameterError("stream=True takes one prompt (call generate() once per stream)")
            from specgen.errors import QueueFullError

            started: List[Any] = []   # a Request per prompt, None once its result is collected
            results: List[Optional[GenerationResult]] = []
            try:
                for p_i, s_i in zip(prompts, seeds):
                    while True:
                        try:
                            started.append(self._start(
                                p_i, max_tokens=max_tokens, temperature=temperature, top_k=top_k,
                                top_p=top_p, min_p=min_p, repeat_penalty=repeat_penalty, repeat_last_n=repeat_last_n,
                                stop=stop, seed=s_i, ignore_eos=ignore_eos, add_bos=add_bos, logprobs=logprobs))
                            results.append(None)
                            break
                        except QueueFullError:
                            # More prompts than slots + queue: collect the oldest running one first.
                            k = next((i for i, s in enumerate(started) if s is not None), None)
                            if k is None:
                                raise
                            results[k] = self._finish(started[k], logprobs)
                            started[k] = None
                for k, s in enumerate(started):
                    if s is not None:
                        results[k] = self._finish(s, logprobs)
                        started[k] = None
                return results
            except BaseException:
                for s in started:
                    if s is not None:
                        s.cancel()
                raise
        if isinstance(seed, (list, tuple)):
            raise InvalidParameterError("a list of seeds goes with a list of prompts")
        # Concurrent calls and streams are batched by the engine; one that finds every slot busy
        # waits in its queue (engine/scheduler.h).
        request = self._start(prompt, max_tokens=max_tokens, temperature=temperature,
                              top_k=top_k, top_p=top_p, min_p=min_p, repeat_penalty=repeat_penalty,
                              repeat_last_n=repeat_last_n, stop=stop, seed=seed, ignore_eos=ignore_eos,
                              add_bos=add_bos, logprobs=logprobs)
        if stream:
            return request
        return self._finish(request, logprobs)

    @staticmethod
    def _finish(request: Request, logprobs) -> GenerationResult:
        """Waits for a started request to end (Ctrl-C cancels it at once) and packs the result."""
        request.wait()
        lp = request.logprobs() if logprobs is not None else None
        return GenerationResult(request.text, request.tokens, request.finish_reason, request.stats, lp)

    def _start(self, prompt, *, max_tokens: int = 256, temperature: float = 0.8, top_k: int = 40,
               top_p: float = 0.95, min_p: float = 0.05, repeat_penalty: float = 1.0, repeat_last_n: int = 64,
               stop=None, seed=None, ignore_eos: bool = False, add_bos: bool = True, logprobs=None):
        """Checks generate()'s parameters and submits the request: a specgen.Request (read step by
        step by create_completion, the Llama class and the server)."""
        from specgen import _core

        gp = _core.GenerateParams()
        gp.max_tokens = _param("max_tokens", max_tokens)
        sp = _core.SamplingParams()
        for name, value in (("temperature", temperature), ("top_k", top_k), ("top_p", top_p), ("min_p", min_p),
                            ("repeat_penalty", repeat_penalty), ("repeat_last_n", repeat_last_n)):
            setattr(sp, name, _param(name, value))
        gp.sampling = sp
        gp.ignore_eos = _param("ignore_eos", ignore_eos)
        gp.add_bos = _param("add_bos", add_bos)
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
        gp.seed = _seed(seed) if seed is not None else (self.seed if self.seed is not None else _core.random_seed())
        gp.logprobs = -1 if logprobs is None else _check_int("logprobs", logprobs, 0, 1024)
        if isinstance(prompt, (str, bytes, bytearray)):
            # Control tokens written in the prompt ("<start_of_turn>") are parsed, as chat
            # templates need (llama-cpp-python does the same for completions).
            tokens = self._g.tokenize(self._text(prompt, "prompt"), gp.add_bos, True)
        elif isinstance(prompt, (list, tuple, np.ndarray)):
            tokens = self._token_ids(prompt, "prompt")
        else:
            raise InvalidParameterError(f"prompt must be a str, bytes or a list of token ids, got {type(prompt).__name__}")
        native = self._g.start(tokens, gp)
        self._live = native
        return Request(self, native, gp.seed, logprobs is not None)

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
