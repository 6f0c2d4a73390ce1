"""What the trainer reads of the target GGUF: its geometry (to size the head) and the rows of its token
embedding and LM head that the head uses (dequantized with gguf's reference code), never the whole matrix:
Gemma 3's 262k-row embedding would be 670 MB in float32."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Dict, Sequence

import numpy as np


@dataclass
class TargetFacts:
    path: str
    arch: str
    n_embd: int
    n_layer: int
    n_head: int
    n_head_kv: int
    head_dim: int
    n_ff: int
    n_vocab: int
    eps: float


class TargetGGUF:
    """A target GGUF opened for reading (memory-mapped)."""

    def __init__(self, path: str):
        import gguf

        self._gguf = gguf
        self.reader = gguf.GGUFReader(os.fspath(path))
        self.tensors: Dict[str, object] = {t.name: t for t in self.reader.tensors}
        arch = self._value("general.architecture")

        def key(name, default=None):
            v = self._value(f"{arch}.{name}")
            return default if v is None else v

        n_embd, n_head = int(key("embedding_length")), int(key("attention.head_count"))
        embd = self.tensors["token_embd.weight"]
        self.facts = TargetFacts(
            path=os.fspath(path), arch=str(arch), n_embd=n_embd, n_layer=int(key("block_count")), n_head=n_head,
            n_head_kv=int(key("attention.head_count_kv", n_head)),
            head_dim=int(key("attention.key_length", n_embd // n_head)), n_ff=int(key("feed_forward_length")),
            n_vocab=int(embd.shape[1]), eps=float(key("attention.layer_norm_rms_epsilon", 1e-5)))

    def _value(self, name: str):
        f = self.reader.fields.get(name)
        if f is None or not f.data:
            return None
        v = f.parts[f.data[0]]
        if f.types and f.types[0] == self._gguf.GGUFValueType.STRING:
            return bytes(v).decode("utf-8")
        return v[0]

    def rows(self, name: str, ids: Sequence[int]) -> np.ndarray:
        """Rows ``ids`` of matrix ``name`` as float32 [len(ids), n_embd]."""
        t = self.tensors[name]
        data = np.asarray(t.data)[np.asarray(ids, dtype=np.int64)]
        return np.asarray(self._gguf.quants.dequantize(data, t.tensor_type), dtype=np.float32).reshape(len(ids), -1)

    def embedding_rows(self, ids: Sequence[int]) -> np.ndarray:
        """The token embedding's rows, unscaled: the head reads the target's token_embd as it is stored."""
        return self.rows("token_embd.weight", ids)

    def output_rows(self, ids: Sequence[int]) -> np.ndarray:
        """The LM head's rows (a tied model's are its embedding's)."""
        return self.rows("output.weight" if "output.weight" in self.tensors else "token_embd.weight", ids)
