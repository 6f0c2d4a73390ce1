"""Convert a Hugging Face checkpoint directory to a GGUF file that specgen (and llama.cpp) can load.

    specgen-convert HF_DIR --outfile model.gguf --outtype q8_0
    python -m specgen.convert HF_DIR --outfile model.gguf

Supported architectures (config.json "architectures"):
    LlamaForCausalLM                 -> general.architecture = "llama" (Llama 2 / 3.x, llama3 rope scaling)
    MistralForCausalLM               -> "llama" (as llama.cpp converts Mistral 7B)
    Qwen2ForCausalLM                 -> "qwen2" (with linear / YaRN rope scaling)
    Qwen3ForCausalLM                 -> "qwen3" (dense: per-head q/k RMSNorm, head_dim from the config)
    Gemma3ForCausalLM                -> "gemma3"
    Gemma3ForConditionalGeneration   -> "gemma3" (text tower only; vision tensors are skipped)

What the file holds, in llama.cpp's conventions (the runtime follows the GGUF convention, not HF's):
- Metadata under llama.cpp's key names: {arch}.context_length, .embedding_length, .block_count,
  .feed_forward_length, .attention.head_count / head_count_kv / key_length / value_length /
  layer_norm_rms_epsilon, .rope.freq_base, .rope.scaling.* and, for gemma3, .attention.sliding_window.
- Tensors under llama.cpp's names (token_embd.weight, blk.N.attn_q.weight, ..., output.weight only when the
  LM head is not tied to the embeddings). A weight of HF shape [out, in] is stored as ggml ne = [in, out].
- RoPE scaling: llama3 as the rope_freqs.weight tensor of per-pair frequency divisors; linear and yarn as
  {arch}.rope.scaling.type / factor / original_context_length, and for yarn an explicit attention_factor
  or beta_fast / beta_slow as rope.scaling.yarn_attn_factor / yarn_beta_fast / yarn_beta_slow.
- llama: the q/k projection rows are permuted from HF's half-split ("rotate_half", NeoX) RoPE layout back to
  the interleaved layout of the original checkpoints, because GGUF llama uses interleaved (GPT-J style,
  adjacent pairs) RoPE. qwen2 and gemma3 are NOT permuted: llama.cpp runs them with NeoX RoPE.
- gemma3: HF's Gemma3RMSNorm computes x_hat * (1 + w). Every *norm.weight is stored as (1 + w), so the runtime
  applies a plain RMSNorm multiply for every architecture.
- Tokenizer: tokenizer.ggml.model "llama" (SentencePiece: tokens, scores, token_type) or "gpt2" (byte-level
  BPE: tokens, token_type, merges, tokenizer.ggml.pre), special token ids and add_bos/add_eos flags.
  The token list is padded with "[PAD<i>]" UNUSED tokens up to the embedding's row count.

Tensor types for each --outtype (1-D tensors, i.e. norms and biases, are always F32):
    f32, f16, bf16   every matrix in that type
    q8_0             every matrix Q8_0 (gguf.quants, bit-identical to ggml's reference quantizer)
    q4_k, q6_k       every matrix in that K-quant (specgen's native quantizer); under q4_k the output projection
                     (output.weight, or token_embd.weight when tied) is Q6_K, as llama-quantize does.
    q4_k_m           llama-quantize's Q4_K_M mix: q4_k, with attn_v and ffn_down Q6_K in the first and last
                     eighth of the layers and every third layer between.
Fallback for rows that do not fill whole blocks, as llama.cpp does: a K-quant needs a row length that is a
multiple of 256, Q8_0 a multiple of 32; a matrix that cannot be quantized falls back to Q8_0 when its rows are a
multiple of 32, otherwise to F16.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import struct
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from specgen.errors import ModelLoadError

__all__ = [
    "OUTTYPES",
    "SUPPORTED_ARCHITECTURES",
    "UnsupportedArchitectureError",
    "convert",
    "main",
]

#: HF architecture class name -> GGUF general.architecture.
SUPPORTED_ARCHITECTURES: dict[str, str] = {
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "llama",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3",
    "Gemma3ForCausalLM": "gemma3",
    "Gemma3ForConditionalGeneration": "gemma3",
}

OUTTYPES = ("f32", "f16", "bf16", "q8_0", "q4_k", "q4_k_m", "q6_k")

# ggml type ids (ggml.h); spelled out so that the native quantizer can be called without gguf's enum.
_GGML_F32, _GGML_F16, _GGML_Q8_0, _GGML_Q4_K, _GGML_Q6_K, _GGML_BF16 = 0, 1, 8, 12, 14, 30
_QK_K = 256
_QK8_0 = 32


class UnsupportedArchitectureError(ModelLoadError, ValueError):
    """The checkpoint's architecture is not one the converter knows."""

    def __init__(self, architecture: str):
        self.architecture = architecture
        supported = ", ".join(sorted(SUPPORTED_ARCHITECTURES))
        super().__init__(f"unsupported architecture {architecture!r}; supported: {supported}")


# --------------------------------------------------------------------------------------------------------------
# Reading safetensors without torch (so that BF16 checkpoints convert with numpy alone)
# --------------------------------------------------------------------------------------------------------------

_ST_DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": np.uint16,
              "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}


@dataclass
class _StTensor:
    path: Path
    dtype: str
    shape: tuple[int, ...]
    begin: int  # absolute byte offset in the file
    end: int

    def load(self) -> np.ndarray:
        """The tensor as float32 (BF16 widened exactly), read from a memory map."""
        if self.dtype not in _ST_DTYPES:
            raise ModelLoadError(f"{self.path}: unsupported safetensors dtype {self.dtype}")
        count = int(np.prod(self.shape, dtype=np.int64))
        mm = np.memmap(self.path, dtype=np.uint8, mode="r", offset=self.begin, shape=(self.end - self.begin,))
        raw = mm.view(_ST_DTYPES[self.dtype])[:count].reshape(self.shape)
        if self.dtype == "BF16":
            return (raw.astype(np.uint32) << 16).view(np.float32)
        return raw.astype(np.float32)


def _read_safetensors_header(path: Path) -> dict[str, _StTensor]:
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) != 8:
            raise ModelLoadError(f"{path}: not a safetensors file (shorter than 8 bytes)")
        (n,) = struct.unpack("<Q", head)
        try:
            header = json.loads(f.read(n))
        except ValueError as e:
            raise ModelLoadError(f"{path}: corrupt safetensors header: {e}") from e
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        out[name] = _StTensor(path, info["dtype"], tuple(info["shape"]), base + b, base + e)
    return out


def _index_checkpoint(model_dir: Path) -> dict[str, _StTensor]:
    """Every tensor of the checkpoint: single file, sharded (model.safetensors.index.json) or a set of shards."""
    index = model_dir / "model.safetensors.index.json"
    if index.is_file():
        weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
        files = sorted(set(weight_map.values()))
    elif (model_dir / "model.safetensors").is_file():
        files = ["model.safetensors"]
    else:
        files = sorted(p.name for p in model_dir.glob("*.safetensors"))
    if not files:
        hint = " (PyTorch .bin checkpoints are not supported: re-save with safe_serialization=True)" \
            if any(model_dir.glob("*.bin")) else ""
        raise ModelLoadError(f"{model_dir}: no .safetensors weights found{hint}")
    tensors: dict[str, _StTensor] = {}
    for name in files:
        path = model_dir / name
        if not path.is_file():
            raise ModelLoadError(f"{model_dir}: shard {name} listed in the index is missing")
        tensors.update(_read_safetensors_header(path))
    return tensors


# --------------------------------------------------------------------------------------------------------------
# Hyperparameters
# --------------------------------------------------------------------------------------------------------------

# Gemma3TextConfig's defaults, for fields that Gemma 3 configs (notably multimodal text_config) leave out.
_GEMMA3_DEFAULTS = {
    "max_position_embeddings": 131072, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
    "rms_norm_eps": 1e-6, "rope_theta": 1_000_000.0, "rope_local_base_freq": 10_000.0, "sliding_window": 4096,
    "query_pre_attn_scalar": 256, "sliding_window_pattern": 6, "tie_word_embeddings": True,
}
_LLAMA_DEFAULTS = {"rms_norm_eps": 1e-6, "rope_theta": 10_000.0, "max_position_embeddings": 2048,
                   "tie_word_embeddings": False}
_QWEN2_DEFAULTS = {"rms_norm_eps": 1e-6, "rope_theta": 10_000.0, "max_position_embeddings": 32768,
                   "tie_word_embeddings": False}
_QWEN3_DEFAULTS = {"rms_norm_eps": 1e-6, "rope_theta": 10_000.0, "max_position_embeddings": 32768,
                   "tie_word_embeddings": False, "head_dim": 128}


@dataclass
class HParams:
    arch: str
    hf_arch: str
    n_vocab: int
    n_embd: int
    n_ff: int
    n_layer: int
    n_head: int
    n_head_kv: int
    head_dim: int
    n_ctx_train: int
    rms_eps: float
    rope_theta: float
    rope_scaling: dict[str, Any] | None
    tied: bool
    raw: dict[str, Any] = field(repr=False, default_factory=dict)


def _rope_params(cfg: dict[str, Any], layer_type: str | None) -> dict[str, Any]:
    """rope_theta + scaling from either config format: transformers>=5 `rope_parameters` (optionally keyed by
    layer type) or the older `rope_theta` / `rope_scaling` pair."""
    rp = cfg.get("rope_parameters")
    if isinstance(rp, dict) and layer_type is not None and layer_type in rp:
        rp = rp[layer_type]
    if isinstance(rp, dict) and ("rope_theta" in rp or "rope_type" in rp):
        return dict(rp)
    out = dict(cfg.get("rope_scaling") or {})
    if "rope_theta" in cfg:
        out["rope_theta"] = cfg["rope_theta"]
    return out


def _read_hparams(model_dir: Path, tensors: dict[str, _StTensor]) -> HParams:
    cfg_path = model_dir / "config.json"
    if not cfg_path.is_file():
        raise ModelLoadError(f"{model_dir}: config.json not found")
    cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
    archs = cfg.get("architectures") or []
    if not archs:
        raise UnsupportedArchitectureError(f"<none: config.json has no 'architectures', model_type="
                                           f"{cfg.get('model_type')!r}>")
    hf_arch = archs[0]
    if hf_arch not in SUPPORTED_ARCHITECTURES:
        raise UnsupportedArchitectureError(hf_arch)
    arch = SUPPORTED_ARCHITECTURES[hf_arch]
    tied_top = cfg.get("tie_word_embeddings")
    if hf_arch == "Gemma3ForConditionalGeneration":
        cfg = dict(cfg.get("text_config") or {})
        if tied_top is not None and "tie_word_embeddings" not in cfg:
            cfg["tie_word_embeddings"] = tied_top
    defaults = {"llama": _LLAMA_DEFAULTS, "qwen2": _QWEN2_DEFAULTS, "qwen3": _QWEN3_DEFAULTS,
                "gemma3": _GEMMA3_DEFAULTS}[arch]
    for k, v in defaults.items():
        cfg.setdefault(k, v)

    # Shapes that configs may omit are read off the weights themselves.
    emb = next((t for n, t in tensors.items() if n.endswith("embed_tokens.weight")), None)
    if emb is None:
        raise ModelLoadError(f"{model_dir}: no embed_tokens.weight tensor in the checkpoint")
    up = next((t for n, t in tensors.items() if n.endswith("layers.0.mlp.up_proj.weight")), None)
    n_vocab, n_embd = emb.shape
    n_ff = cfg.get("intermediate_size") or (up.shape[0] if up is not None else 0)
    n_head = int(cfg["num_attention_heads"])
    n_head_kv = int(cfg.get("num_key_value_heads") or n_head)
    head_dim = int(cfg.get("head_dim") or n_embd // n_head)
    n_layer = int(cfg.get("num_hidden_layers") or 1 + max(
        int(m.group(1)) for n in tensors if (m := re.search(r"layers\.(\d+)\.", n))))

    layer_type = "full_attention" if arch == "gemma3" else None
    rope = _rope_params(cfg, layer_type)
    rope_theta = float(rope.get("rope_theta", cfg["rope_theta"]))
    rope_type = rope.get("rope_type") or rope.get("type") or "default"
    scaling = None if rope_type == "default" else {**rope, "rope_type": rope_type}

    return HParams(
        arch=arch, hf_arch=hf_arch, n_vocab=int(n_vocab), n_embd=int(n_embd), n_ff=int(n_ff),
        n_layer=n_layer, n_head=n_head, n_head_kv=n_head_kv, head_dim=head_dim,
        n_ctx_train=int(cfg["max_position_embeddings"]), rms_eps=float(cfg["rms_norm_eps"]),
        rope_theta=rope_theta, rope_scaling=scaling, tied=bool(cfg["tie_word_embeddings"]), raw=cfg,
    )


def _llama3_rope_freq_factors(hp: HParams) -> np.ndarray:
    """Per-frequency divisors for Llama 3.x "llama3" RoPE scaling, as llama.cpp's rope_freqs.weight holds them:
    the runtime divides each base frequency theta^(-2i/d) by factors[i]. Same piecewise rule as transformers'
    _compute_llama3_parameters: long wavelengths scaled by `factor`, short ones kept, a smooth ramp between."""
    s = hp.rope_scaling or {}
    factor = float(s["factor"])
    low, high = float(s.get("low_freq_factor", 1.0)), float(s.get("high_freq_factor", 4.0))
    old_ctx = float(s.get("original_max_position_embeddings", 8192))
    inv_freq = 1.0 / hp.rope_theta ** (np.arange(0, hp.head_dim, 2, dtype=np.float64) / hp.head_dim)
    wavelen = 2 * math.pi / inv_freq
    smooth = np.clip((old_ctx / wavelen - low) / (high - low), 0.0, 1.0)
    factors = 1.0 / ((1 - smooth) / factor + smooth)
    factors = np.where(wavelen < old_ctx / high, 1.0, np.where(wavelen > old_ctx / low, factor, factors))
    return factors.astype(np.float32)


# --------------------------------------------------------------------------------------------------------------
# Tensor names and transforms
# --------------------------------------------------------------------------------------------------------------

_SKIP_PREFIXES = ("vision_tower.", "multi_modal_projector.", "model.vision_tower.", "model.multi_modal_projector.",
                  "vision_model.", "model.vision_model.")
_STRIP_PREFIXES = ("model.language_model.model.", "model.language_model.", "language_model.model.",
                   "language_model.", "model.")

_LAYER_MAP_COMMON = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_proj.bias": "attn_q.bias",
    "self_attn.k_proj.bias": "attn_k.bias",
    "self_attn.v_proj.bias": "attn_v.bias",
    "self_attn.o_proj.bias": "attn_output.bias",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}
_LAYER_MAP = {
    "llama": {**_LAYER_MAP_COMMON, "post_attention_layernorm.weight": "ffn_norm.weight"},
    "qwen2": {**_LAYER_MAP_COMMON, "post_attention_layernorm.weight": "ffn_norm.weight"},
    "qwen3": {**_LAYER_MAP_COMMON, "post_attention_layernorm.weight": "ffn_norm.weight",
              "self_attn.q_norm.weight": "attn_q_norm.weight",
              "self_attn.k_norm.weight": "attn_k_norm.weight"},
    # Gemma 3 has four norms per block: pre/post attention and pre/post FFN ("sandwich" norms).
    "gemma3": {**_LAYER_MAP_COMMON,
               "self_attn.q_norm.weight": "attn_q_norm.weight",
               "self_attn.k_norm.weight": "attn_k_norm.weight",
               "post_attention_layernorm.weight": "post_attention_norm.weight",
               "pre_feedforward_layernorm.weight": "ffn_norm.weight",
               "post_feedforward_layernorm.weight": "post_ffw_norm.weight"},
}


def _gguf_name(hf_name: str, arch: str) -> str | None:
    """llama.cpp's name for an HF tensor; None for tensors the text model does not use."""
    if hf_name.startswith(_SKIP_PREFIXES) or hf_name.endswith("rotary_emb.inv_freq"):
        return None
    if hf_name in ("lm_head.weight", "language_model.lm_head.weight", "model.lm_head.weight"):
        return "output.weight"
    name = hf_name
    for p in _STRIP_PREFIXES:
        if name.startswith(p):
            name = name[len(p):]
            break
    if name == "embed_tokens.weight":
        return "token_embd.weight"
    if name == "norm.weight":
        return "output_norm.weight"
    m = re.fullmatch(r"layers\.(\d+)\.(.+)", name)
    if m and m.group(2) in _LAYER_MAP[arch]:
        return f"blk.{m.group(1)}.{_LAYER_MAP[arch][m.group(2)]}"
    raise ModelLoadError(f"tensor {hf_name!r}: no GGUF name for it in architecture {arch!r}")


def _permute_rope_rows(w: np.ndarray, n_head: int) -> np.ndarray:
    """HF half-split RoPE rows -> interleaved (GGUF llama) rows, per head.

    Within each head HF orders the rotated pairs as (i, i + d/2); the original layout, which llama.cpp's LLAMA
    RoPE expects, orders them as (2i, 2i + 1). w: [n_head * head_dim, ...] (a weight or a bias)."""
    shape = w.shape
    return w.reshape(n_head, 2, shape[0] // n_head // 2, *shape[1:]).swapaxes(1, 2).reshape(shape)


def _transform(gname: str, w: np.ndarray, hp: HParams) -> np.ndarray:
    if hp.arch == "llama":
        if gname.endswith("attn_q.weight") or gname.endswith("attn_q.bias"):
            w = _permute_rope_rows(w, hp.n_head)
        elif gname.endswith("attn_k.weight") or gname.endswith("attn_k.bias"):
            w = _permute_rope_rows(w, hp.n_head_kv)
    if hp.arch == "gemma3" and gname.endswith("norm.weight"):
        # Gemma3RMSNorm scales by (1 + w); GGUF stores the effective multiplier.
        w = w + np.float32(1.0)
    return w


# --------------------------------------------------------------------------------------------------------------
# Tensor types and quantization
# --------------------------------------------------------------------------------------------------------------

def _more_bits_layer(il: int, n_layer: int) -> bool:
    """llama-quantize's Q4_K_M rule for the layers whose attn_v / ffn_down get Q6_K."""
    return il < n_layer // 8 or il >= 7 * n_layer // 8 or (il - n_layer // 8) % 3 == 2


def _tensor_type(gname: str, shape: Sequence[int], outtype: str, tied: bool, n_layer: int = 0) -> int:
    """ggml type for one tensor. shape is the numpy shape; rows are its last dimension."""
    if len(shape) < 2:
        return _GGML_F32
    row = shape[-1]
    want = {"f32": _GGML_F32, "f16": _GGML_F16, "bf16": _GGML_BF16, "q8_0": _GGML_Q8_0,
            "q4_k": _GGML_Q4_K, "q4_k_m": _GGML_Q4_K, "q6_k": _GGML_Q6_K}[outtype]
    is_output = gname == "output.weight" or (tied and gname == "token_embd.weight")
    if want == _GGML_Q4_K and is_output:
        want = _GGML_Q6_K
    m = re.fullmatch(r"blk\.(\d+)\.(attn_v|ffn_down)\.weight", gname)
    if outtype == "q4_k_m" and m and _more_bits_layer(int(m.group(1)), max(n_layer, 1)):
        want = _GGML_Q6_K
    if want in (_GGML_Q4_K, _GGML_Q6_K) and row % _QK_K != 0:
        want = _GGML_Q8_0
    if want == _GGML_Q8_0 and row % _QK8_0 != 0:
        want = _GGML_F16
    return want


def _native_quantize_row() -> Callable[[int, np.ndarray], np.ndarray]:
    try:
        from specgen import _core  # noqa: PLC0415
    except ImportError as e:
        raise ModelLoadError(f"K-quant output needs specgen's native extension (specgen._core): {e}") from e
    fn = getattr(_core, "quantize_row", None)
    if fn is None:
        raise ModelLoadError("K-quant output needs specgen._core.quantize_row, which this build of specgen "
                             "lacks; convert to f16/q8_0 instead or rebuild specgen")
    return fn


def _quantize(w: np.ndarray, ggml_type: int) -> np.ndarray:
    """w (float32, numpy shape [..., row]) -> the array that goes into the file: float32/float16 values, or
    uint8 blocks shaped [..., row_bytes] for block formats (BF16 included)."""
    import gguf  # noqa: PLC0415

    if ggml_type == _GGML_F32:
        return np.ascontiguousarray(w, dtype=np.float32)
    if ggml_type == _GGML_F16:
        return np.ascontiguousarray(w, dtype=np.float16)
    if ggml_type in (_GGML_BF16, _GGML_Q8_0):
        return gguf.quants.quantize(np.ascontiguousarray(w, dtype=np.float32), gguf.GGMLQuantizationType(ggml_type))
    quantize_row = _native_quantize_row()
    qt = gguf.GGMLQuantizationType(ggml_type)
    # Blocks never straddle rows (row % 256 == 0 here), so the whole tensor is one call.
    flat = np.ascontiguousarray(w, dtype=np.float32).reshape(-1)
    out = np.asarray(quantize_row(int(ggml_type), flat), dtype=np.uint8)
    byte_shape = gguf.quant_shape_to_byte_shape(w.shape, qt)
    if out.size != int(np.prod(byte_shape)):
        raise ModelLoadError(f"specgen._core.quantize_row({qt.name}) returned {out.size} bytes for "
                             f"{w.size} values, expected {int(np.prod(byte_shape))}")
    return out.reshape(byte_shape)


def _stored_shape_and_nbytes(shape: Sequence[int], ggml_type: int) -> tuple[tuple[int, ...], np.dtype, int]:
    import gguf  # noqa: PLC0415

    n = int(np.prod(shape))
    if ggml_type == _GGML_F32:
        return tuple(shape), np.dtype(np.float32), 4 * n
    if ggml_type == _GGML_F16:
        return tuple(shape), np.dtype(np.float16), 2 * n
    byte_shape = tuple(gguf.quant_shape_to_byte_shape(shape, gguf.GGMLQuantizationType(ggml_type)))
    return byte_shape, np.dtype(np.uint8), int(np.prod(byte_shape))


# --------------------------------------------------------------------------------------------------------------
# Tokenizer
# --------------------------------------------------------------------------------------------------------------

# Pre-tokenizer split regexes of known byte-level BPE tokenizers -> llama.cpp's tokenizer.ggml.pre name.
# llama.cpp identifies them by hashing a tokenization; reading the regex from tokenizer.json is enough for the
# families this converter supports and needs no network access.
_PRE_BY_REGEX = {
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+":
        "llama-bpe",
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+":
        "qwen2",
    # Qwen3.5: qwen2's rule with combining marks joined to letters
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+":
        "qwen35",
}


@dataclass
class _Vocab:
    model: str                      # tokenizer.ggml.model
    pre: str                        # tokenizer.ggml.pre
    tokens: list[bytes]
    types: list[int]
    scores: list[float] | None = None
    merges: list[str] | None = None
    add_space_prefix: bool | None = None


def _added_tokens(model_dir: Path) -> list[tuple[int, str, bool]]:
    """(id, content, special) for tokens added on top of the base model, from tokenizer.json or
    tokenizer_config.json's added_tokens_decoder."""
    out: dict[int, tuple[int, str, bool]] = {}
    tj = model_dir / "tokenizer.json"
    if tj.is_file():
        for t in json.loads(tj.read_text(encoding="utf-8")).get("added_tokens", []):
            out[int(t["id"])] = (int(t["id"]), t["content"], bool(t.get("special", False)))
    tc = model_dir / "tokenizer_config.json"
    if tc.is_file():
        for tid, t in (json.loads(tc.read_text(encoding="utf-8")).get("added_tokens_decoder") or {}).items():
            out.setdefault(int(tid), (int(tid), t["content"], bool(t.get("special", False))))
    return sorted(out.values())


def _spm_vocab(model_dir: Path, spm_path: Path) -> _Vocab:
    import gguf  # noqa: PLC0415
    try:
        import sentencepiece as spm  # noqa: PLC0415
    except ImportError as e:
        raise ModelLoadError("converting a SentencePiece tokenizer needs `pip install sentencepiece`") from e
    sp = spm.SentencePieceProcessor()
    sp.LoadFromFile(str(spm_path))
    tokens, scores, types = [], [], []
    for i in range(sp.vocab_size()):
        tokens.append(sp.IdToPiece(i).encode("utf-8"))
        scores.append(float(sp.GetScore(i)))
        t = gguf.TokenType.NORMAL
        if sp.IsUnknown(i):
            t = gguf.TokenType.UNKNOWN
        elif sp.IsControl(i):
            t = gguf.TokenType.CONTROL
        elif sp.IsUnused(i):
            t = gguf.TokenType.UNUSED
        elif sp.IsByte(i):
            t = gguf.TokenType.BYTE
        types.append(int(t))
    for tid, content, special in _added_tokens(model_dir):
        ttype = int(gguf.TokenType.CONTROL if special else gguf.TokenType.USER_DEFINED)
        if tid < len(tokens):
            if types[tid] in (gguf.TokenType.NORMAL, gguf.TokenType.UNUSED, gguf.TokenType.USER_DEFINED):
                tokens[tid], types[tid] = content.encode("utf-8"), ttype
        elif tid == len(tokens):
            tokens.append(content.encode("utf-8"))
            scores.append(-1000.0)
            types.append(ttype)
        else:
            raise ModelLoadError(f"{model_dir}: added token id {tid} leaves a gap after {len(tokens)} tokens")
    add_space_prefix = None
    try:
        from sentencepiece import sentencepiece_model_pb2  # noqa: PLC0415
        proto = sentencepiece_model_pb2.ModelProto()
        proto.ParseFromString(spm_path.read_bytes())
        add_space_prefix = bool(proto.normalizer_spec.add_dummy_prefix)
    except Exception:  # noqa: BLE001 - protobuf missing or an unusual model: keep the runtime's default
        pass
    return _Vocab("llama", "default", tokens, types, scores=scores, add_space_prefix=add_space_prefix)


def _pre_tokenizer_name(pt: dict[str, Any]) -> str:
    """llama.cpp's tokenizer.ggml.pre for a tokenizer.json pre_tokenizer: one known Split regex, or the regex
    sequences of the deepseek pair, or starcoder's Digits + ByteLevel; "default" when unrecognized."""
    parts = pt.get("pretokenizers", [pt]) if pt.get("type") == "Sequence" else [pt]
    splits = [(p.get("pattern") or {}).get("Regex") for p in parts if p.get("type") == "Split"]
    digits = [p for p in parts if p.get("type") == "Digits"]
    byte_regex = any(p.get("type") == "ByteLevel" and p.get("use_regex", True) for p in parts)
    if len(splits) == 1 and splits[0] in _PRE_BY_REGEX:
        return _PRE_BY_REGEX[splits[0]]
    if len(splits) >= 3 and splits[0] in ("[\r\n]", "[\\r\\n]"):
        if splits[1] == "\\s?\\p{L}+" and splits[2] == "\\s?\\p{P}+":
            return "deepseek-coder"
        if splits[1].startswith("\\s?[A-Za-z"):
            return "deepseek-llm"
    if not splits and byte_regex and digits and digits[0].get("individual_digits"):
        return "starcoder"
    if not splits and byte_regex:
        return "gpt-2"
    return "default"


def _bpe_vocab(model_dir: Path, tj: dict[str, Any]) -> _Vocab:
    import gguf  # noqa: PLC0415

    vocab: dict[str, int] = tj["model"]["vocab"]
    n = max(max(vocab.values(), default=-1), max((t["id"] for t in tj.get("added_tokens", [])), default=-1)) + 1
    tokens: list[bytes | None] = [None] * n
    types = [int(gguf.TokenType.NORMAL)] * n
    for text, tid in vocab.items():
        tokens[tid] = text.encode("utf-8")
    for tid, content, special in _added_tokens(model_dir):
        if tid >= n:
            tokens.extend([None] * (tid + 1 - n))
            types.extend([int(gguf.TokenType.NORMAL)] * (tid + 1 - n))
            n = tid + 1
        tokens[tid] = content.encode("utf-8")
        types[tid] = int(gguf.TokenType.CONTROL if special else gguf.TokenType.USER_DEFINED)
    for i, t in enumerate(tokens):
        if t is None:
            tokens[i] = f"[PAD{i}]".encode()
            types[i] = int(gguf.TokenType.UNUSED)
    merges = tj["model"].get("merges") or []
    merges = [m if isinstance(m, str) else " ".join(m) for m in merges]

    pre = _pre_tokenizer_name(tj.get("pre_tokenizer") or {})
    if pre == "default":
        print(f"specgen-convert: warning: unrecognized BPE pre-tokenizer in {model_dir / 'tokenizer.json'}; "
              "writing tokenizer.ggml.pre = 'default'", file=sys.stderr)
    return _Vocab("gpt2", pre, tokens, types, merges=merges)  # type: ignore[arg-type]


def _load_vocab(model_dir: Path, hp: HParams) -> _Vocab:
    import gguf  # noqa: PLC0415

    spm_path = model_dir / "tokenizer.model"
    tj_path = model_dir / "tokenizer.json"
    tj = json.loads(tj_path.read_text(encoding="utf-8")) if tj_path.is_file() else None
    tj_model = (tj or {}).get("model", {})
    if tj is not None and tj_model.get("type") == "BPE" and not tj_model.get("byte_fallback", False):
        v = _bpe_vocab(model_dir, tj)
    elif spm_path.is_file():
        v = _spm_vocab(model_dir, spm_path)
    elif tj is not None and tj_model.get("type") == "BPE":
        # A SentencePiece-BPE model exported only as tokenizer.json (byte_fallback); gguf-py reads those.
        hf = gguf.vocab.LlamaHfVocab(model_dir)
        toks = list(hf.all_tokens())
        v = _Vocab("llama", "default", [t for t, _, _ in toks], [int(k) for _, _, k in toks],
                   scores=[float(s) for _, s, _ in toks])
    else:
        raise ModelLoadError(f"{model_dir}: no tokenizer found (need tokenizer.model or a BPE tokenizer.json)")

    if len(v.tokens) > hp.n_vocab:
        raise ModelLoadError(f"{model_dir}: the tokenizer has {len(v.tokens)} tokens but the embedding only "
                             f"{hp.n_vocab} rows")
    for i in range(len(v.tokens), hp.n_vocab):
        v.tokens.append(f"[PAD{i}]".encode())
        v.types.append(int(gguf.TokenType.UNUSED))
        if v.scores is not None:
            v.scores.append(-1000.0)
    return v


def _no_op_merge(tokens: Sequence[str]) -> str:
    """A merge no tokenizer can apply: its pieces are not in the vocabulary. A BPE tokenizer whose merges
    list is empty is written with this one merge, because gguf-py cannot write an empty array and a BPE
    GGUF without tokenizer.ggml.merges is refused (by llama.cpp and specgen alike); readers skip a merge
    of unknown pieces, so the file tokenizes exactly as the empty list does."""
    vocab = set(tokens)
    piece = "<specgen:no-merges>"
    while piece in vocab or piece + piece in vocab:
        piece += "_"
    return f"{piece} {piece}"


def _write_vocab(w: Any, model_dir: Path, hp: HParams, v: _Vocab) -> None:
    import gguf  # noqa: PLC0415

    w.add_tokenizer_model(v.model)
    w.add_tokenizer_pre(v.pre)
    w.add_token_list(v.tokens)
    if v.scores is not None:
        w.add_token_scores(v.scores)
    w.add_token_types(v.types)
    if v.model == "gpt2":
        w.add_token_merges(v.merges or [_no_op_merge(v.tokens)])
    if v.add_space_prefix is not None:
        w.add_add_space_prefix(v.add_space_prefix)
    special = gguf.SpecialVocab(model_dir, load_merges=False, n_vocab=hp.n_vocab)
    if "bos" not in special.add_special_token:
        # transformers>=5 no longer stores add_bos_token; these are the families' own defaults.
        special.add_special_token["bos"] = v.model == "llama" and "bos" in special.special_token_ids
    special.add_special_token.setdefault("eos", False)
    special.add_to_gguf(w, quiet=True)


# --------------------------------------------------------------------------------------------------------------
# Metadata
# --------------------------------------------------------------------------------------------------------------

_FILE_TYPE = {"f32": 0, "f16": 1, "q8_0": 7, "q4_k": 15, "q4_k_m": 15, "q6_k": 18, "bf16": 32}


def _write_hparams(w: Any, hp: HParams, outtype: str, name: str) -> None:
    import gguf  # noqa: PLC0415

    w.add_name(name)
    w.add_context_length(hp.n_ctx_train)
    w.add_embedding_length(hp.n_embd)
    w.add_block_count(hp.n_layer)
    w.add_feed_forward_length(hp.n_ff)
    w.add_head_count(hp.n_head)
    w.add_head_count_kv(hp.n_head_kv)
    w.add_key_length(hp.head_dim)
    w.add_value_length(hp.head_dim)
    w.add_layer_norm_rms_eps(hp.rms_eps)
    w.add_rope_freq_base(hp.rope_theta)
    if hp.arch == "llama":
        w.add_vocab_size(hp.n_vocab)
        w.add_rope_dimension_count(hp.head_dim)
    w.add_file_type(_FILE_TYPE[outtype])
    if outtype not in ("f32", "f16", "bf16"):
        w.add_quantization_version(gguf.GGML_QUANT_VERSION)

    s = hp.rope_scaling
    if s is not None:
        kind = s["rope_type"]
        if kind == "linear":
            w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
            w.add_rope_scaling_factor(float(s["factor"]))
        elif kind == "yarn":
            _write_yarn(w, hp, s)
        elif kind == "llama3":
            pass  # carried by the rope_freqs.weight tensor, as llama.cpp does
        else:
            raise ModelLoadError(f"RoPE scaling type {kind!r} is not supported by the converter "
                                 "(supported: linear, yarn, llama3)")

    if hp.arch == "gemma3":
        cfg = hp.raw
        if cfg.get("attn_logit_softcapping") is not None:
            raise ModelLoadError("gemma3 with attn_logit_softcapping is not supported")
        if cfg.get("final_logit_softcapping") is not None:
            w.add_final_logit_softcapping(float(cfg["final_logit_softcapping"]))
        w.add_sliding_window(int(cfg["sliding_window"]))
        # llama.cpp hard-codes the next three for gemma3 (every 6th layer global, local base 10000, scale by
        # head_dim); they are written explicitly so that the runtime need not guess.
        w.add_sliding_window_pattern([t == "sliding_attention" for t in _gemma3_layer_types(cfg, hp.n_layer)])
        local = _rope_params(cfg, "sliding_attention")
        w.add_rope_freq_base_swa(float(local.get("rope_theta", cfg.get("rope_local_base_freq", 10_000.0))))
        w.add_float32(gguf.Keys.Attention.SCALE.format(arch=hp.arch),
                      float(cfg["query_pre_attn_scalar"]) ** -0.5)


def _write_yarn(w: Any, hp: HParams, s: dict[str, Any]) -> None:
    """YaRN as llama.cpp's keys hold it. The runtime multiplies cos/sin by yarn_attn_factor * (0.1 ln(factor) + 1)
    (llama.cpp's rule), so an explicit HF attention_factor is stored divided by that default."""
    import gguf  # noqa: PLC0415

    orig = int(s.get("original_max_position_embeddings") or hp.n_ctx_train)
    factor = s.get("factor")
    factor = float(factor) if factor is not None else hp.n_ctx_train / orig
    w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
    w.add_rope_scaling_factor(factor)
    w.add_rope_scaling_orig_ctx_len(orig)
    if s.get("mscale") or s.get("mscale_all_dim"):
        raise ModelLoadError("YaRN with mscale / mscale_all_dim (DeepSeek style) is not supported by the converter")
    if s.get("truncate") is False:
        raise ModelLoadError("YaRN with truncate=False is not supported by the converter")
    default = 0.1 * math.log(factor) + 1.0 if factor > 1 else 1.0
    if s.get("attention_factor") is not None:
        w.add_float32(gguf.Keys.Rope.SCALING_YARN_ATTN_FACTOR.format(arch=hp.arch), float(s["attention_factor"]) / default)
    for key, gkey, dflt in (("beta_fast", gguf.Keys.Rope.SCALING_YARN_BETA_FAST, 32.0),
                            ("beta_slow", gguf.Keys.Rope.SCALING_YARN_BETA_SLOW, 1.0)):
        if s.get(key) and float(s[key]) != dflt:
            w.add_float32(gkey.format(arch=hp.arch), float(s[key]))


def _gemma3_layer_types(cfg: dict[str, Any], n_layer: int) -> list[str]:
    types = cfg.get("layer_types")
    if types and len(types) == n_layer:
        return list(types)
    pattern = int(cfg.get("sliding_window_pattern") or cfg.get("_sliding_window_pattern") or 6)
    return ["full_attention" if (i + 1) % pattern == 0 else "sliding_attention" for i in range(n_layer)]


# --------------------------------------------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------------------------------------------

class _Progress:
    """tqdm when installed, otherwise one line per tensor on stderr."""

    def __init__(self, total: int, enabled: bool):
        self.bar = None
        self.enabled = enabled
        self.total = total
        self.i = 0
        if enabled:
            try:
                from tqdm import tqdm  # noqa: PLC0415
                self.bar = tqdm(total=total, unit="tensor", desc="converting", file=sys.stderr)
            except ImportError:
                pass

    def step(self, label: str) -> None:
        self.i += 1
        if self.bar is not None:
            self.bar.set_postfix_str(label, refresh=False)
            self.bar.update(1)
        elif self.enabled:
            print(f"[{self.i:4d}/{self.total}] {label}", file=sys.stderr)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _plan(tensors: dict[str, _StTensor], hp: HParams) -> list[tuple[str, Callable[[], np.ndarray], tuple[int, ...]]]:
    """(gguf name, loader, numpy shape) for every tensor to write, in a stable order."""
    plan: dict[str, tuple[str, Callable[[], np.ndarray], tuple[int, ...]]] = {}
    for hf_name, t in tensors.items():
        gname = _gguf_name(hf_name, hp.arch)
        if gname is None:
            continue
        if gname in plan:
            raise ModelLoadError(f"two checkpoint tensors map to {gname!r} (second: {hf_name!r})")
        plan[gname] = (gname, (lambda t=t, g=gname: _transform(g, t.load(), hp)), t.shape)
    if hp.tied:
        plan.pop("output.weight", None)  # a tied head that was saved anyway is the embedding itself
    elif "output.weight" not in plan:
        hp.tied = True  # some checkpoints omit the head without declaring the tie
    if hp.rope_scaling is not None and hp.rope_scaling["rope_type"] == "llama3":
        factors = _llama3_rope_freq_factors(hp)
        plan["rope_freqs.weight"] = ("rope_freqs.weight", lambda: factors, factors.shape)
    missing = [n for n in ("token_embd.weight", "output_norm.weight") if n not in plan]
    if missing:
        raise ModelLoadError(f"checkpoint lacks {', '.join(missing)}")

    def key(name: str) -> tuple[int, str]:
        m = re.match(r"blk\.(\d+)\.", name)
        return (int(m.group(1)) + 1 if m else (0 if name.startswith("token_embd") else 10**9), name)
    return [plan[n] for n in sorted(plan, key=key)]


def convert(model_dir: str | os.PathLike[str], outfile: str | os.PathLike[str], outtype: str = "f16",
            *, progress: bool = True) -> Path:
    """Convert the Hugging Face checkpoint in `model_dir` to a GGUF file at `outfile`; returns its path.

    Raises UnsupportedArchitectureError (a ModelLoadError and ValueError) for architectures other than
    SUPPORTED_ARCHITECTURES, ModelLoadError for missing or inconsistent files, ValueError for a bad outtype.
    The output is written to `outfile` + ".tmp" first and renamed when complete."""
    import gguf  # noqa: PLC0415

    if outtype not in OUTTYPES:
        raise ValueError(f"unknown outtype {outtype!r}; choose one of {', '.join(OUTTYPES)}")
    model_dir = Path(model_dir)
    outfile = Path(outfile)
    if not model_dir.is_dir():
        raise ModelLoadError(f"{model_dir}: not a directory")

    tensors = _index_checkpoint(model_dir)
    hp = _read_hparams(model_dir, tensors)
    plan = _plan(tensors, hp)
    vocab = _load_vocab(model_dir, hp)

    # Fail before writing anything when a K-quant is requested without the native quantizer.
    types = [_tensor_type(g, shape, outtype, hp.tied, hp.n_layer) for g, _, shape in plan]
    if any(t in (_GGML_Q4_K, _GGML_Q6_K) for t in types):
        _native_quantize_row()

    tmp = outfile.with_name(outfile.name + ".tmp")
    w = gguf.GGUFWriter(tmp, hp.arch)
    try:
        _write_hparams(w, hp, outtype, model_dir.resolve().name)
        _write_vocab(w, model_dir, hp, vocab)
        for (gname, _, shape), ggml_type in zip(plan, types):
            stored_shape, dtype, nbytes = _stored_shape_and_nbytes(shape, ggml_type)
            raw = None if ggml_type in (_GGML_F32, _GGML_F16) else gguf.GGMLQuantizationType(ggml_type)
            w.add_tensor_info(gname, stored_shape, dtype, nbytes, raw_dtype=raw)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_ti_data_to_file()
        bar = _Progress(len(plan), progress)
        try:
            for (gname, load, _), ggml_type in zip(plan, types):
                # One tensor in memory at a time: load, transform, quantize, append.
                w.write_tensor_data(_quantize(load(), ggml_type))
                bar.step(f"{gname} {gguf.GGMLQuantizationType(ggml_type).name}")
        finally:
            bar.close()
        w.close()
    except BaseException:
        w.close()
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, outfile)
    return outfile


# The modules of the `convert` extra (pyproject.toml): checked before anything is read.
_EXTRA_MODULES = ("gguf", "safetensors")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, as every specgen entry point
        _fail(message)
        sys.exit(2)


def _fail(message: str) -> None:
    print(f"specgen-convert: error: {' '.join(str(message).split())}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """The specgen-convert command line. Every failure is one line on stderr and exit code 1 (2 for a
    bad command line)."""
    import importlib  # noqa: PLC0415

    ap = _Parser(prog="specgen-convert", description="Convert a Hugging Face checkpoint (safetensors) to GGUF.")
    ap.add_argument("model_dir", help="directory with config.json, *.safetensors and tokenizer files")
    ap.add_argument("--outfile", required=True, help="path of the .gguf file to write")
    ap.add_argument("--outtype", default="f16", choices=OUTTYPES, help="tensor type of the matrices (default f16)")
    ap.add_argument("--no-progress", action="store_true", help="do not show a progress bar")
    args = ap.parse_args(argv)
    model_dir = Path(args.model_dir).expanduser()
    if not model_dir.exists():
        _fail(f"{args.model_dir}: no such directory")
        return 1
    if not model_dir.is_dir():
        _fail(f"{args.model_dir}: not a directory (give the folder with config.json and *.safetensors)")
        return 1
    for name in _EXTRA_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            _fail(f"the converter needs the 'convert' extra ({name} is not installed): pip install \"specgen[convert]\"")
            return 1
    try:
        path = convert(model_dir, args.outfile, args.outtype, progress=not args.no_progress)
    except (ModelLoadError, ValueError, OSError) as e:
        _fail(str(e))
        return 1
    except KeyboardInterrupt:
        _fail("interrupted")
        return 130
    except Exception as e:  # noqa: BLE001  (a checkpoint we did not foresee: still one line, no traceback)
        _fail(f"{type(e).__name__}: {e}")
        return 1
    print(f"specgen-convert: wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
