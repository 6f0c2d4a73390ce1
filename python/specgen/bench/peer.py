"""Optional peer column: the same prompts through llama-cpp-python (plain greedy decoding and its
prompt-lookup decoding, LlamaPromptLookupDecoding) when ``llama_cpp`` imports.

Timing: the KV cache is reset before every prompt (llama-cpp-python would otherwise reuse a matching
prefix); prefill = prompt evaluation up to the first sampled token, decode = the tokens after it.
It runs after specgen's matrix, with the same token ids, threads and max_tokens, greedy only.

The `pair` preset's peer is llama-server instead (peer_server.py: a process started and stopped inside
its block of the interleaved run, with the draft model and --spec-type draft-simple), since
llama-cpp-python has no draft-model speculation.
"""
from __future__ import annotations

import time
from typing import Any, Dict, List, Optional, Sequence

from specgen.bench.stats import spread

__all__ = ["run_peer"]


def _one(llm, tokens: List[int], max_tokens: int) -> Dict[str, float]:
    llm.reset()
    eos = llm.token_eos()
    n = 0
    t0 = time.perf_counter()
    t1 = None
    for tok in llm.generate(tokens, temp=0.0, top_k=1, top_p=1.0, min_p=0.0, repeat_penalty=1.0, reset=True):
        if t1 is None:
            t1 = time.perf_counter()
        n += 1
        if tok == eos or n >= max_tokens:
            break
    t2 = time.perf_counter()
    t1 = t1 or t2
    return {
        "prefill_tps": len(tokens) / (t1 - t0) if t1 > t0 else float("nan"),
        "decode_tps": (n - 1) / (t2 - t1) if n > 1 and t2 > t1 else float("nan"),
        "n_generated": n,
    }


def run_peer(model_path: str, prompt_rows: Sequence[Dict[str, str]], token_ids: Sequence[List[int]],
             threads: Sequence[int], gammas: Sequence[int], max_tokens: int, repeats: int, n_ctx: int,
             progress: bool = True) -> Dict[str, Any]:
    """{"available": False, "reason"} without llama_cpp; else {"available", "version", "rows": [...]}
    with one row per (AR | prompt lookup at each gamma) x threads. The specgen counterpart and ratio
    are filled in by ``attach_counterparts``."""
    try:
        import llama_cpp
        from llama_cpp import Llama
        from llama_cpp.llama_speculative import LlamaPromptLookupDecoding
    except Exception as e:  # ImportError, or a broken shared library
        return {"available": False, "reason": f"llama_cpp does not import ({type(e).__name__}: {e}); "
                                              "pip install llama-cpp-python to add the column"}
    import sys

    rows = []
    variants = [("ar", None)] + [("pld", g) for g in gammas]
    for t in threads:
        for kind, g in variants:
            kw: Dict[str, Any] = dict(model_path=model_path, n_ctx=n_ctx, n_threads=t, n_threads_batch=t,
                                      n_batch=512, verbose=False, seed=0)
            if kind == "pld":
                kw["draft_model"] = LlamaPromptLookupDecoding(num_pred_tokens=g)
            llm = Llama(**kw)
            _one(llm, token_ids[0], min(8, max_tokens))  # warm-up
            res = []
            for _ in range(repeats):
                for toks in token_ids:
                    res.append(_one(llm, toks, max_tokens))
            if progress:
                sys.stderr.write(f"peer: llama.cpp {kind} g{g or '-'} t{t} done\n")
            rows.append({
                "label": ("llama.cpp ar" if kind == "ar" else f"llama.cpp prompt-lookup g{g}") + f" t{t} T0",
                "kind": kind, "gamma": g, "threads": t,
                "prefill_tps": spread(r["prefill_tps"] for r in res),
                "decode_tps": spread(r["decode_tps"] for r in res),
            })
            del llm
    return {"available": True, "version": getattr(llama_cpp, "__version__", "?"), "rows": rows}


def attach_counterparts(peer: Optional[Dict[str, Any]], cells: Sequence[Dict[str, Any]]) -> None:
    """Adds to each peer row the matching specgen cell (AR, or ngram at the same gamma; block verify
    preferred) at temperature 0 and the same threads, and specgen / llama.cpp decode tok/s."""
    if not peer or not peer.get("available"):
        return
    for row in peer["rows"]:
        match = None
        for c in cells:
            if c["status"] != "ok" or c["threads"] != row["threads"] or c["temperature"] != 0 or "all" not in c["sets"]:
                continue
            if row["kind"] == "ar" and c["drafter"] == "none":
                match = c
            elif row["kind"] == "pld" and c["drafter"] == "ngram" and c["gamma"] == row["gamma"]:
                if match is None or c["verify"] == "block":
                    match = c
        if match is not None:
            sg = match["sets"]["all"]["decode_tps"]["median"]
            lc = row["decode_tps"]["median"]
            row["specgen_label"] = match["label"]
            row["specgen_decode_tps"] = sg
            row["ratio"] = sg / lc if (sg is not None and lc) else None
