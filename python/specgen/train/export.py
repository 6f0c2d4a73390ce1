"""Writes a trained head as llama.cpp's eagle3 GGUF (the layout speculative/drafters/eagle3_head.h loads):
the llama keys under "eagle3.", eagle3.target_layers / target_hidden_size / norm_before_residual /
norm_before_fc, the head's tensors, and d2t as absolute target ids (I64). token_embd is left out: the
loader falls back to the target's, which is what the head was trained on. Matrices are written as F16 by
default (as llama.cpp's converter does): drafting reads every weight once per drafted token, so half the
bytes is about half the head's cost; norms and d2t keep their exact types.

The target's tokenizer.* keys are copied in (tokenizer_from): llama.cpp loads every GGUF's vocabulary,
the draft's too, and refuses a head without tokenizer.ggml.model; its eagle3 graph also sizes the
draft's logits by that vocabulary. specgen reads the target's tokenizer and ignores the head's copy."""
from __future__ import annotations

import os
from typing import Optional

import numpy as np

from specgen.train.head import Eagle3Head

ARCH = "eagle3"


OUTTYPES = ("f16", "f32")


def copy_tokenizer_keys(writer, target_path: os.PathLike) -> int:
    """Adds the target GGUF's tokenizer.* key-value pairs to `writer`; returns how many."""
    import gguf

    reader = gguf.GGUFReader(os.fspath(target_path))
    n = 0
    for key, field in reader.fields.items():
        if not key.startswith("tokenizer."):
            continue
        kind = field.types[0]
        sub = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(key, field.contents(), kind, sub_type=sub)
        n += 1
    return n


def write_head_gguf(path: os.PathLike, head: Eagle3Head, d2t: np.ndarray, n_ctx: int = 4096, outtype: str = "f16",
                    tokenizer_from: Optional[os.PathLike] = None) -> str:
    import gguf

    if outtype not in OUTTYPES:
        raise ValueError(f"outtype must be one of {', '.join(OUTTYPES)}, got {outtype!r}")
    cfg = head.cfg
    w = gguf.GGUFWriter(os.fspath(path), ARCH)
    w.add_name("specgen EAGLE-3 head")
    w.add_context_length(n_ctx)
    w.add_embedding_length(cfg.n_embd)
    w.add_block_count(1)
    w.add_feed_forward_length(cfg.n_ff)
    w.add_head_count(cfg.n_head)
    w.add_head_count_kv(cfg.n_head_kv)
    w.add_key_length(cfg.head_dim)
    w.add_value_length(cfg.head_dim)
    w.add_rope_dimension_count(cfg.head_dim)
    w.add_layer_norm_rms_eps(cfg.eps)
    w.add_rope_freq_base(cfg.rope_base)
    w.add_array(f"{ARCH}.target_layers", [int(x) for x in cfg.target_layers])
    w.add_uint32(f"{ARCH}.target_hidden_size", cfg.target_hidden)
    w.add_bool(f"{ARCH}.norm_before_residual", cfg.norm_before_residual)
    w.add_bool(f"{ARCH}.norm_before_fc", cfg.norm_before_fc)
    if tokenizer_from is not None:
        copy_tokenizer_keys(w, tokenizer_from)
    for name, x in head.gguf_tensors().items():
        w.add_tensor(name, x.astype(np.float16) if outtype == "f16" and x.ndim == 2 else x)
    w.add_tensor("d2t", np.asarray(d2t, dtype=np.int64), raw_dtype=gguf.GGMLQuantizationType.I64)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return os.fspath(path)
