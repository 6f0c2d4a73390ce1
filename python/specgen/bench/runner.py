"""The benchmark run: every configuration cell of the matrix, interleaved, pooled and compared.

Every configuration runs at every ``--draft-max`` (not AR), ``--threads`` and ``--temp`` value.
Plain decoding is always measured too: speedups are ratios of median decode tokens/s against it in
the same run, per prompt set, at the same threads and temperature. Runs are interleaved round-robin
(per repeat and prompt, every configuration once, the starting configuration rotating) so that drift
in the machine's speed hits every configuration alike. Each distinct Generator is loaded once.
An SSD configuration at ``-t T`` runs T threads in all: the drafter gets T // 2 (at least 1), the
target the rest (Generator's split).
"""
from __future__ import annotations

import math
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from specgen import flags
from specgen.bench.grammar import (DEFAULT_CONFIGS, NOT_IMPLEMENTED, Cell, check_draft_head, expand, load_prompts,
                                   parse_config, parse_list)
from specgen.bench.stats import pool_runs, ratio, speed_of_light, spread

__all__ = ["run", "summarise", "environment", "cpu_name", "WARMUP_PROMPT"]

#: The warm-up's prompt, shared with no measured prompt beyond BOS.
WARMUP_PROMPT = "Warm-up run: page in the weights and size the buffers before anything is timed."


# -- environment ---------------------------------------------------------------------------------
def rss_mb() -> float:
    """Current resident set size in MiB (from /proc; 0 where unavailable)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far (getrusage; KiB on Linux)."""
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r / (1024 * 1024) if sys.platform == "darwin" else r / 1024


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def git_commit() -> Optional[str]:
    try:
        here = Path(__file__).resolve().parent
        r = subprocess.run(["git", "-C", str(here), "rev-parse", "--short", "HEAD"], capture_output=True,
                           text=True, timeout=5)
        return r.stdout.strip() or None
    except Exception:
        return None


def environment() -> Dict[str, Any]:
    import specgen

    return {
        "cpu": cpu_name(),
        "n_cpus": os.cpu_count(),
        "affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "specgen_version": specgen.__version__,
        "git_commit": git_commit(),
    }


class Progress:
    """tqdm when installed, else a one-line bar on stderr."""

    def __init__(self, total: int, enabled: bool = True, desc: str = "bench"):
        self.total, self.n, self.enabled, self.desc, self._bar = total, 0, enabled, desc, None
        self.t0 = time.perf_counter()
        if enabled:
            try:
                from tqdm import tqdm

                self._bar = tqdm(total=total, desc=desc, file=sys.stderr, dynamic_ncols=True)
            except ImportError:
                self._bar = None

    def update(self, note: str = "") -> None:
        self.n += 1
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.set_postfix_str(note[:40], refresh=False)
            self._bar.update(1)
            return
        frac = self.n / max(self.total, 1)
        el = time.perf_counter() - self.t0
        eta = el / frac - el if frac > 0 else 0
        bar = "#" * int(30 * frac)
        sys.stderr.write(f"\r{self.desc} [{bar:<30}] {self.n}/{self.total} {el:5.0f}s eta {eta:4.0f}s {note[:40]:<40}")
        sys.stderr.flush()

    def close(self) -> None:
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.close()
        else:
            sys.stderr.write("\n")


# -- the run -------------------------------------------------------------------------------------
def _load(cell: Cell, model, n_ctx: int, draft_head: Optional[str] = None):
    from specgen import Generator

    c = cell.config
    kw: Dict[str, Any] = dict(n_ctx=n_ctx, n_threads=cell.threads)
    if not c.is_ar:
        kw.update(draft=c.draft, verify=c.verify, draft_max=cell.gamma, self_layers=c.self_layers,
                  nanospec=c.nanospec, nanospec_topk=c.nanospec_topk, ssd=c.ssd, frspec=c.frspec,
                  reuse_draft_hidden=c.reuse_draft_hidden, draft_p_min=c.draft_p_min)
        if c.ssd:
            kw.update(ssd_fanout=c.ssd_fanout, ssd_backup=c.ssd_backup)
        if c.draft_head:
            kw.update(draft_head=draft_head)
    return Generator(model, **kw)


def _tokens(gen, prompt: str) -> List[int]:
    return gen.tokenize(prompt, add_bos=True)


def _finite(x):
    """JSON-safe numbers: inf and NaN become strings "inf" / None."""
    if isinstance(x, float):
        if math.isnan(x):
            return None
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    return x


def run(
    model=None,
    configs: Union[str, Sequence[str], None] = None,
    prompts: Union[str, Sequence[str], None] = None,
    *,
    n_prompts: Optional[int] = None,
    draft_max: Union[str, Sequence[int], None] = None,
    threads: Union[str, Sequence[int], None] = None,
    temperatures: Union[str, Sequence[float]] = (0.0,),
    max_tokens: int = 64,
    repeats: int = 1,
    repeats_sampled: Optional[int] = None,
    warmup: bool = True,
    seed: int = 1234,
    n_ctx: int = 2048,
    peer: bool = True,
    draft_head: Optional[str] = None,
    progress: bool = True,
    command: Optional[str] = None,
) -> Dict[str, Any]:
    """Runs the benchmark and returns the JSON-ready result: {"meta", "cells", "runs", "peer"}.

    ``configs``: specs (string "a,b" or a list; None = DEFAULT_CONFIGS). ``threads`` None = all CPUs
    this process may use. ``peer``: also run llama-cpp-python when it imports. ``draft_head``: the EAGLE-3
    head GGUF of the ``head`` / ``auto:head`` configurations.
    """
    from specgen.errors import SpecgenNotImplementedError

    from specgen.hub import resolve_model

    t_start = time.perf_counter()
    cfgs = [parse_config(s) for s in parse_list(configs if configs is not None else DEFAULT_CONFIGS, str)]
    check_draft_head(cfgs, draft_head)
    # A model that cannot be found fails here, once, not as one error row per configuration.
    model_ref, model = model, resolve_model(model)
    gammas = parse_list(draft_max, int) if draft_max is not None else []
    gammas = gammas or [int(flags.default("draft_max"))]
    if threads is None:
        threads = [len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)]
    thread_list = parse_list(threads, int)
    temps = parse_list(temperatures, float) or [0.0]
    prompt_rows = load_prompts(prompts, n_prompts)
    cells = expand(cfgs, gammas, thread_list, temps)

    # Load each distinct Generator once; a configuration the engine rejects becomes an n/a row.
    gens: Dict[Tuple, Any] = {}
    status: Dict[Cell, str] = {}
    load_rss: Dict[Tuple, float] = {}
    for cell in cells:
        key = cell.generator_key
        if key not in gens:
            before = rss_mb()
            try:
                gens[key] = _load(cell, model, n_ctx, draft_head)
            except SpecgenNotImplementedError as e:
                gens[key] = e
            except Exception as e:  # a broken configuration must not sink the whole matrix
                gens[key] = e
            load_rss[key] = rss_mb() - before
        g = gens[key]
        if isinstance(g, SpecgenNotImplementedError):
            status[cell] = NOT_IMPLEMENTED
        elif isinstance(g, Exception):
            status[cell] = f"error: {type(g).__name__}: {g}"
        else:
            status[cell] = "ok"
    live = [c for c in cells if status[c] == "ok"]
    any_gen = next((g for g in gens.values() if not isinstance(g, Exception)), None)
    if any_gen is None:
        raise RuntimeError("no configuration could be loaded: " + "; ".join(sorted(set(status.values()))))
    token_ids = [_tokens(any_gen, p["prompt"]) for p in prompt_rows]

    # Warm-up: every Generator once (pages in the weights, sizes the buffers), untimed, on a prompt of its
    # own: a measured prompt would stay in the slot's KV cache and its first timed run would compute no
    # prefill rows (one token in no time: a prefill figure in the millions of tokens/s).
    if warmup:
        for key, g in gens.items():
            if isinstance(g, Exception):
                continue
            try:
                g.generate(WARMUP_PROMPT, max_tokens=min(8, max_tokens), temperature=0.0, seed=seed)
            except Exception as e:
                for cell in cells:
                    if cell.generator_key == key:
                        status[cell] = f"error: {type(e).__name__}: {e}"
        live = [c for c in cells if status[c] == "ok"]

    n_sampled = repeats if repeats_sampled is None else repeats_sampled
    jobs = []
    for r in range(max(repeats, n_sampled)):
        # A sampled cell's repeats are new seeds; a greedy cell's only re-time the same text.
        this_round = [c for c in live if r < (n_sampled if c.temperature > 0 else repeats)]
        for pi in range(len(prompt_rows)):
            k = (r * len(prompt_rows) + pi) % max(len(this_round), 1)
            for cell in this_round[k:] + this_round[:k]:
                jobs.append((r, pi, cell))
    bar = Progress(len(jobs), progress)
    runs: List[Dict[str, Any]] = []
    for r, pi, cell in jobs:
        g = gens[cell.generator_key]
        p = prompt_rows[pi]
        if status[cell] != "ok":  # failed earlier in this run: skip its remaining jobs
            bar.update(f"{cell.label} skipped")
            continue
        t0 = time.perf_counter()
        try:
            res = g.generate(token_ids[pi], max_tokens=max_tokens, temperature=cell.temperature,
                             seed=seed + 1000 * r + pi)
        except Exception as e:  # one failing configuration must not sink the matrix
            status[cell] = f"error: {type(e).__name__}: {e}"
            bar.update(f"{cell.label} failed")
            continue
        wall = time.perf_counter() - t0
        st = dict(res.stats)
        runs.append({
            "label": cell.label, "config": cell.config.name, "gamma": cell.gamma, "threads": cell.threads,
            "temperature": cell.temperature, "set": p["set"], "prompt_id": p["id"], "repeat": r,
            "wall_seconds": wall, "finish_reason": res.finish_reason, "stats": st,
        })
        bar.update(f"{cell.label} {p['id']}")
    bar.close()

    peer_result = None
    if peer:
        from specgen.bench.peer import run_peer

        peer_result = run_peer(any_gen.model_path, prompt_rows, token_ids, thread_list, gammas, max_tokens,
                               repeats, n_ctx, progress)

    result = {
        "meta": {
            "command": command,
            "model": str(model_ref) if model_ref is not None else None,
            "model_path": any_gen.model_path,
            "draft_head": draft_head,
            "bytes_per_token": int(any_gen._g.bytes_per_token),
            "n_vocab": any_gen.n_vocab,
            "max_tokens": max_tokens, "repeats": repeats, "repeats_sampled": n_sampled, "warmup": warmup, "seed": seed, "n_ctx": n_ctx,
            "configs": [c.name for c in cfgs], "draft_max": gammas, "threads": thread_list,
            "temperatures": temps,
            "prompt_sets": sorted({p["set"] for p in prompt_rows}),
            "n_prompts": len(prompt_rows),
            "peak_rss_mb": peak_rss_mb(),
            "elapsed_seconds": time.perf_counter() - t_start,
            "started": time.strftime("%Y-%m-%d %H:%M:%S"),
            **environment(),
        },
        "cells": summarise(cells, status, runs, {c: load_rss.get(c.generator_key) for c in cells}),
        "runs": runs,
        "peer": peer_result,
    }
    if peer_result is not None:
        from specgen.bench.peer import attach_counterparts

        attach_counterparts(peer_result, result["cells"])
    return _finite(result)


def prompt_computed(stats: Dict[str, Any]) -> bool:
    """The run computed its prompt: at most the BOS row came from the slot's KV cache (prompts share it)."""
    return stats.get("n_prompt_tokens_cached", 0) <= 1 and stats.get("prefill_tokens_per_second", 0) > 0


def end_to_end_tps(stats: Dict[str, Any]) -> float:
    """Generated tokens over the prefill and decode time of one run (NaN without time)."""
    t = (stats.get("prefill_seconds") or 0) + (stats.get("decode_seconds") or 0)
    return stats["n_generated"] / t if t > 0 else float("nan")


def summarise(cells: Sequence[Cell], status: Dict[Cell, str], runs: Sequence[Dict[str, Any]],
              load_rss: Optional[Dict[Cell, Optional[float]]] = None) -> List[Dict[str, Any]]:
    """Per cell and prompt set (plus "all"): timing spreads, pooled statistics, bounds, speedup vs AR."""
    sets = sorted({r["set"] for r in runs}) + ["all"]

    def runs_of(cell: Cell, s: str):
        return [r for r in runs if r["label"] == cell.label and (s == "all" or r["set"] == s)]

    ar_median: Dict[Tuple, float] = {}
    ar_e2e_median: Dict[Tuple, float] = {}
    for cell in cells:
        if cell.config.is_ar and status.get(cell) == "ok":
            for s in sets:
                ar_median[cell.baseline_key + (s,)] = spread(
                    r["stats"]["decode_tokens_per_second"] for r in runs_of(cell, s))["median"]
                ar_e2e_median[cell.baseline_key + (s,)] = spread(
                    end_to_end_tps(r["stats"]) for r in runs_of(cell, s))["median"]
    out = []
    for cell in cells:
        row: Dict[str, Any] = {
            "label": cell.label, "config": cell.config.name, "drafter": cell.config.draft or ("eagle3" if cell.config.draft_head else "none"),
            "verify": None if cell.config.is_ar else cell.config.verify, "gamma": cell.gamma,
            "threads": cell.threads, "temperature": cell.temperature, "status": status.get(cell, "ok"),
            "load_rss_mb": (load_rss or {}).get(cell), "sets": {},
        }
        if row["status"] == "ok":
            for s in sets:
                rs = runs_of(cell, s)
                if not rs:
                    continue
                stats = [r["stats"] for r in rs]
                pooled = pool_runs(stats)
                dec = spread(st["decode_tokens_per_second"] for st in stats)
                e2e = spread(end_to_end_tps(st) for st in stats)
                row["sets"][s] = {
                    "n_runs": len(rs),
                    # Only runs whose prompt was computed: a prompt the slot's cache held (a repeat of
                    # the same prompt) computed a row or none, and its figure measures no prefill.
                    "prefill_tps": spread(st["prefill_tokens_per_second"] for st in stats if prompt_computed(st)),
                    "decode_tps": dec,
                    "speedup": ratio(dec["median"], ar_median.get(cell.baseline_key + (s,))),
                    # The same over prefill + decode: where a method moves work between the two (NanoSpec's
                    # seeding of S runs in the prefill, under auto after the first token), this is the fair one.
                    "e2e_speedup": ratio(e2e["median"], ar_e2e_median.get(cell.baseline_key + (s,))),
                    "pooled": pooled,
                    "bounds": speed_of_light(pooled, cell.gamma),
                }
        out.append(row)
    return out


