#!/usr/bin/env python3
"""Builds an FR-Spec frequency table (the NanoSpec baseline, docs/ALGORITHMS.md section 3) for a GGUF model.

The table lists token ids by descending frequency; an ``frspec = N`` drafter's head covers its first N.
With ``--corpus`` files the ids are ranked by how often the model's own tokenizer
(``specgen._core.Tokenizer``) emits them on that text; ids the corpus never produces follow in the
fallback order. Without a corpus (or for the tail) the fallback is the tokenizer's scores: for
SentencePiece vocabularies (Gemma) the score is the piece's log-probability / merge rank, a frequency
proxy. End-of-generation ids go first (a drafter must be able to propose the end of a turn); other
control and unused tokens go last.

File layout (little-endian; read by cpp/src/speculative/frspec_table.cpp): b"SGFR", u32 version = 1,
u32 n_vocab, u32 n_ids, then n_ids int32 ids.

    python tools/build_frspec_table.py MODEL.gguf --top 32768 --out table.bin [--corpus a.txt b.txt]
"""
from __future__ import annotations

import argparse
import struct
import sys
from collections import Counter
from pathlib import Path

import numpy as np

MAGIC = b"SGFR"
VERSION = 1


def score_order(model_path: str, n_vocab: int) -> np.ndarray:
    """All ids, best score first (ties: lowest id); non-normal token types last."""
    import gguf

    r = gguf.GGUFReader(model_path)
    scores = np.zeros(n_vocab, np.float64)
    if "tokenizer.ggml.scores" in r.fields:
        f = r.fields["tokenizer.ggml.scores"]
        scores = np.array([f.parts[i][0] for i in f.data], np.float64)
    # SentencePiece lists single characters after every merge (their scores are the lowest), yet
    # ASCII characters (digits, punctuation, the bare space) and whitespace runs are among the most
    # frequent tokens of any text: they go first. Control, unused and byte tokens go last.
    group = np.ones(n_vocab, np.int8)
    types = np.ones(n_vocab, np.int64)
    if "tokenizer.ggml.token_type" in r.fields:
        f = r.fields["tokenizer.ggml.token_type"]
        types = np.array([f.parts[i][0] for i in f.data])
    if "tokenizer.ggml.tokens" in r.fields:
        f = r.fields["tokenizer.ggml.tokens"]
        for i, part in enumerate(f.data):
            text = bytes(f.parts[part]).decode("utf-8", "replace").replace("\u2581", " ")
            if types[i] == 1 and len(text) == 1 and text.isascii():
                group[i] = 0
            elif types[i] == 4 and text.strip() == "":
                group[i] = 0
    group[(types != 1) & (group != 0)] = 2  # 1 = normal; control, unused, byte, other user-defined after
    return np.lexsort((np.arange(n_vocab), -scores, group))


def build(model_path: str, top: int, corpus: list[str]) -> np.ndarray:
    from specgen._core import Tokenizer

    tok = Tokenizer(model_path)
    n_vocab = tok.n_vocab
    order: list[int] = [i for i in tok.eog_ids]
    if corpus:
        counts: Counter = Counter()
        for path in corpus:
            text = Path(path).read_bytes()
            for line in text.split(b"\n"):
                if line.strip():
                    counts.update(tok.encode(line, False, False))
        order += [t for t, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
    order += score_order(model_path, n_vocab).tolist()
    seen, out = set(), []
    for t in order:
        if t not in seen:
            seen.add(t)
            out.append(t)
            if len(out) == top:
                break
    return np.asarray(out, np.int32), n_vocab


def write_table(path: str, ids: np.ndarray, n_vocab: int) -> None:
    with open(path, "wb") as f:
        f.write(MAGIC + struct.pack("<III", VERSION, n_vocab, len(ids)))
        f.write(np.asarray(ids, "<i4").tobytes())


def read_table(path: str) -> tuple[np.ndarray, int]:
    data = Path(path).read_bytes()
    if data[:4] != MAGIC:
        raise ValueError(f"{path}: not an FR-Spec table")
    version, n_vocab, n = struct.unpack("<III", data[4:16])
    return np.frombuffer(data[16 : 16 + 4 * n], "<i4"), n_vocab


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="GGUF model whose tokenizer defines the ids")
    ap.add_argument("--top", type=int, default=32768, help="ids to keep (default 32768)")
    ap.add_argument("--corpus", nargs="*", default=[], help="UTF-8 text files to count tokens on")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    ids, n_vocab = build(a.model, a.top, a.corpus)
    write_table(a.out, ids, n_vocab)
    print(f"wrote {len(ids)} ids (vocabulary {n_vocab}) to {a.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
