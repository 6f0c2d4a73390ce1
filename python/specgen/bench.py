"""specgen bench: measures configurations of the engine against each other in one run.

    python -m specgen.bench --configs ar,ngram:block,ngram:token,self6:block --prompts code,edit \\
        --draft-max 4,8 -t 1,2 --temp 0,1 --repeats 2 --json out.json --markdown out.md --plot out.png
    python -m specgen.bench core            # prefill/decode tokens/s, bytes/token, bandwidth fraction

(the native CLI forwards ``specgen bench ARGS`` here). From Python: ``specgen.bench.run(...)`` returns
the same dict ``--json`` writes; ``specgen.bench.core(...)`` the core-runtime numbers.

A configuration spec is ``NAME[:OPTION]...``:

- NAME: ``ar`` (plain decoding), ``ngram`` (prompt lookup), ``self`` / ``selfL`` (the target's own
  first L layers; ``self`` = all of them), ``nanospecL`` (self-drafting with the NanoSpec head),
  ``ssdL`` (self-drafting under SSD/Saguaro), ``frspecK`` (FR-Spec head of K frequent tokens, self
  drafting), or ``model=PATH`` (a draft GGUF or Hub reference).
- OPTION: ``block`` or ``token`` (verifier; default block), ``gN`` (gamma = draft_max, overriding
  ``--draft-max``), ``ns`` (the NanoSpec head for a ``self``/``ssd`` drafter), ``kN``
  (``nanospec_topk = N``; NanoSpec configurations only), ``fN`` (``ssd_fanout = N``) and ``fast``
  (``ssd_backup="fast"``), SSD configurations only.

An SSD configuration at ``-t T`` runs T threads in all: the drafter gets T // 2 (at least 1), the
target the rest (Generator's split).

Every configuration runs at every ``--draft-max`` (not AR), ``--threads`` and ``--temp`` value.
Plain decoding is always measured too: speedups are ratios of median decode tokens/s against it in
the same run, per prompt set, at the same threads and temperature. Runs are interleaved round-robin
(per repeat and prompt, every configuration once, the starting configuration rotating) so that drift
in the machine's speed hits every configuration alike. Each distinct Generator is loaded once.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import resource
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from specgen.bench_stats import pool_runs, ratio, speed_of_light, spread

__all__ = ["Config", "parse_config", "load_prompts", "run", "core", "main", "PROMPT_SETS"]

PROMPT_DIR = Path(__file__).with_name("prompts")
PROMPT_SETS = ("text", "edit", "code", "chat")
# What works on the reference model (docs/bench/REPORT.md); partial self drafters (selfL) are slower here.
DEFAULT_CONFIGS = "ar,ngram:token,ngram:block,self:block,nanospec:block,nanospec:k16:block,ssd:ns:k16:f1:fast:g3"
NOT_IMPLEMENTED = "n/a (not implemented)"


# -- configurations ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Config:
    """One engine configuration (before the threads / temperature / gamma matrix is applied)."""

    name: str                 # canonical spec, e.g. "self6:block"
    draft: Optional[str]      # Generator(draft=...)
    verify: str = "block"
    self_layers: int = 0
    nanospec: bool = False
    ssd: bool = False
    frspec: int = 0
    nanospec_topk: int = 3
    ssd_fanout: int = 4
    ssd_backup: str = "neural"
    gamma: Optional[int] = None  # fixed by a gN option; else from --draft-max

    @property
    def is_ar(self) -> bool:
        return self.draft is None


_OPTION = re.compile(r"^(block|token|g\d+|k\d+|f\d+|ns|fast)$")


def parse_config(spec: str) -> Config:
    """Parses one spec (see the module docstring). Raises ValueError on an unknown name."""
    parts = spec.strip().split(":")
    opts: List[str] = []
    while len(parts) > 1 and _OPTION.match(parts[-1]):
        opts.insert(0, parts.pop())
    name = ":".join(parts)
    verify, gamma, topk, ns, fanout, fast = "block", None, None, False, None, False
    for o in opts:
        if o in ("block", "token"):
            verify = o
        elif o == "ns":
            ns = True
        elif o == "fast":
            fast = True
        elif o.startswith("k"):
            topk = int(o[1:])
        elif o.startswith("f"):
            fanout = int(o[1:])
        else:
            gamma = int(o[1:])
            if gamma < 1:
                raise ValueError(f"config {spec!r}: gamma must be >= 1")
    kw: Dict[str, Any]
    m = re.fullmatch(r"(self|nanospec|ssd|frspec)(\d*)", name)
    if name == "ar":
        if opts:
            raise ValueError(f"config {spec!r}: plain decoding takes no options")
        return Config(name="ar", draft=None)
    elif name == "ngram":
        kw = dict(draft="ngram")
    elif m:
        n = int(m.group(2)) if m.group(2) else 0
        kw = dict(draft="self")
        if m.group(1) == "frspec":
            kw["frspec"] = n or 16384
        else:
            kw["self_layers"] = n
            kw["nanospec"] = m.group(1) == "nanospec" or (ns and m.group(1) in ("self", "ssd"))
            kw["ssd"] = m.group(1) == "ssd"
    elif name.startswith("model="):
        kw = dict(draft=name[len("model="):])
    else:
        raise ValueError(
            f"unknown configuration {spec!r}: expected ar, ngram, self[L], nanospec[L], ssd[L], "
            "frspec[K] or model=PATH, then options (:block/:token, :gN, :ns, :kN, :fN, :fast)"
        )
    if (ns or topk is not None) and not kw.get("nanospec"):
        raise ValueError(f"config {spec!r}: ns/kN apply to self, ssd and nanospec drafters only")
    if (fanout is not None or fast) and not kw.get("ssd"):
        raise ValueError(f"config {spec!r}: fN/fast apply to ssd drafters only")
    for letter, value, key in (("k", topk, "nanospec_topk"), ("f", fanout, "ssd_fanout")):
        if value is not None:
            if not 1 <= value <= 64:
                raise ValueError(f"config {spec!r}: {letter} must be in [1, 64]")
            kw[key] = value
    if fast:
        kw["ssd_backup"] = "fast"
    canon = (name + (":ns" if ns and m and m.group(1) != "nanospec" else "") + (f":k{topk}" if topk is not None else "")
             + (f":f{fanout}" if fanout is not None else "") + (":fast" if fast else "")
             + ":" + verify + (f":g{gamma}" if gamma else ""))
    return Config(name=canon, verify=verify, gamma=gamma, **kw)


def parse_list(text: Union[str, Sequence, None], conv) -> List:
    """'1,2' -> [1, 2]; a list passes through converted."""
    if text is None:
        return []
    items = text.split(",") if isinstance(text, str) else list(text)
    return [conv(x) for x in items if str(x).strip() != ""]


@dataclass(frozen=True)
class Cell:
    """A configuration at one gamma, thread count and temperature: one column of the matrix."""

    config: Config
    gamma: Optional[int]
    threads: int
    temperature: float

    @property
    def label(self) -> str:
        g = f" g{self.gamma}" if self.gamma else ""
        return f"{self.config.name.replace(':g' + str(self.gamma), '')}{g} t{self.threads} T{self.temperature:g}"

    @property
    def generator_key(self) -> Tuple:
        return (self.config.draft, self.config.verify, self.config.self_layers, self.config.nanospec,
                self.config.nanospec_topk, self.config.ssd, self.config.ssd_fanout, self.config.ssd_backup,
                self.config.frspec, self.gamma, self.threads)

    @property
    def baseline_key(self) -> Tuple:
        return (self.threads, self.temperature)


def expand(configs: Sequence[Config], gammas: Sequence[int], threads: Sequence[int],
           temps: Sequence[float]) -> List[Cell]:
    """The matrix, AR first. AR is added when missing: every speedup needs its baseline."""
    if not any(c.is_ar for c in configs):
        configs = [parse_config("ar")] + list(configs)
    cells = []
    for c in configs:
        for g in ([None] if c.is_ar else ([c.gamma] if c.gamma else gammas)):
            for t in threads:
                for temp in temps:
                    cells.append(Cell(c, g, t, temp))
    seen, out = set(), []
    for cell in cells:
        if (cell.config.name, cell.gamma, cell.threads, cell.temperature) not in seen:
            seen.add((cell.config.name, cell.gamma, cell.threads, cell.temperature))
            out.append(cell)
    return out


# -- prompts -------------------------------------------------------------------------------------
def load_prompts(sets: Union[str, Sequence[str], None] = None, n_per_set: Optional[int] = None) -> List[Dict[str, str]]:
    """Prompts as dicts {set, id, prompt}. ``sets``: names of the shipped sets (text, edit, code,
    chat) and/or paths of JSONL files with one {"prompt": ...} (optional "id") per line; None = all
    shipped sets. A file's set name is its stem."""
    names = PROMPT_SETS if sets is None else parse_list(sets, str)
    out = []
    for name in names:
        path = Path(name)
        if name in PROMPT_SETS and not path.exists():
            path, set_name = PROMPT_DIR / f"{name}.jsonl", name
        else:
            set_name = path.stem
        if not path.exists():
            raise FileNotFoundError(f"prompt set {name!r}: no such shipped set ({', '.join(PROMPT_SETS)}) or file")
        rows = []
        with open(path, encoding="utf-8") as f:
            for i, line in enumerate(f):
                if not line.strip():
                    continue
                obj = json.loads(line)
                if not isinstance(obj, dict) or not isinstance(obj.get("prompt"), str):
                    raise ValueError(f"{path}:{i + 1}: expected an object with a string \"prompt\"")
                rows.append({"set": set_name, "id": str(obj.get("id", f"{set_name}{i}")), "prompt": obj["prompt"]})
        out.extend(rows[:n_per_set] if n_per_set else rows)
    if not out:
        raise ValueError("no prompts")
    return out


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
def _load(cell: Cell, model, n_ctx: int):
    from specgen import Generator

    c = cell.config
    kw: Dict[str, Any] = dict(n_ctx=n_ctx, n_threads=cell.threads)
    if not c.is_ar:
        kw.update(draft=c.draft, verify=c.verify, draft_max=cell.gamma, self_layers=c.self_layers,
                  nanospec=c.nanospec, nanospec_topk=c.nanospec_topk, ssd=c.ssd, frspec=c.frspec)
        if c.ssd:
            kw.update(ssd_fanout=c.ssd_fanout, ssd_backup=c.ssd_backup)
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
    draft_max: Union[str, Sequence[int]] = (8,),
    threads: Union[str, Sequence[int], None] = None,
    temperatures: Union[str, Sequence[float]] = (0.0,),
    max_tokens: int = 64,
    repeats: int = 1,
    warmup: bool = True,
    seed: int = 1234,
    n_ctx: int = 2048,
    peer: bool = True,
    progress: bool = True,
    command: Optional[str] = None,
) -> Dict[str, Any]:
    """Runs the benchmark and returns the JSON-ready result: {"meta", "cells", "runs", "peer"}.

    ``configs``: specs (string "a,b" or a list; None = DEFAULT_CONFIGS). ``threads`` None = all CPUs
    this process may use. ``peer``: also run llama-cpp-python when it imports.
    """
    from specgen.errors import SpecgenNotImplementedError

    t_start = time.perf_counter()
    cfgs = [parse_config(s) for s in parse_list(configs if configs is not None else DEFAULT_CONFIGS, str)]
    gammas = parse_list(draft_max, int) or [8]
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
                gens[key] = _load(cell, model, n_ctx)
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

    # Warm-up: every Generator once (pages in the weights, sizes the buffers), untimed.
    if warmup:
        for key, g in gens.items():
            if isinstance(g, Exception):
                continue
            try:
                g.generate(token_ids[0], max_tokens=min(8, max_tokens), temperature=0.0, seed=seed)
            except Exception as e:
                for cell in cells:
                    if cell.generator_key == key:
                        status[cell] = f"error: {type(e).__name__}: {e}"
        live = [c for c in cells if status[c] == "ok"]

    jobs = []
    for r in range(repeats):
        for pi in range(len(prompt_rows)):
            k = (r * len(prompt_rows) + pi) % max(len(live), 1)
            for cell in live[k:] + live[:k]:
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
        from specgen.bench_peer import run_peer

        peer_result = run_peer(any_gen.model_path, prompt_rows, token_ids, thread_list, gammas, max_tokens,
                               repeats, n_ctx, progress)

    result = {
        "meta": {
            "command": command,
            "model": str(model) if model is not None else None,
            "model_path": any_gen.model_path,
            "bytes_per_token": int(any_gen._g.bytes_per_token),
            "n_vocab": any_gen.n_vocab,
            "max_tokens": max_tokens, "repeats": repeats, "warmup": warmup, "seed": seed, "n_ctx": n_ctx,
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
        from specgen.bench_peer import attach_counterparts

        attach_counterparts(peer_result, result["cells"])
    return _finite(result)


def summarise(cells: Sequence[Cell], status: Dict[Cell, str], runs: Sequence[Dict[str, Any]],
              load_rss: Optional[Dict[Cell, Optional[float]]] = None) -> List[Dict[str, Any]]:
    """Per cell and prompt set (plus "all"): timing spreads, pooled statistics, bounds, speedup vs AR."""
    sets = sorted({r["set"] for r in runs}) + ["all"]

    def runs_of(cell: Cell, s: str):
        return [r for r in runs if r["label"] == cell.label and (s == "all" or r["set"] == s)]

    ar_median: Dict[Tuple, float] = {}
    for cell in cells:
        if cell.config.is_ar and status.get(cell) == "ok":
            for s in sets:
                ar_median[cell.baseline_key + (s,)] = spread(
                    r["stats"]["decode_tokens_per_second"] for r in runs_of(cell, s))["median"]
    out = []
    for cell in cells:
        row: Dict[str, Any] = {
            "label": cell.label, "config": cell.config.name, "drafter": cell.config.draft or "none",
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
                row["sets"][s] = {
                    "n_runs": len(rs),
                    "prefill_tps": spread(st["prefill_tokens_per_second"] for st in stats),
                    "decode_tps": dec,
                    "speedup": ratio(dec["median"], ar_median.get(cell.baseline_key + (s,))),
                    "pooled": pooled,
                    "bounds": speed_of_light(pooled, cell.gamma),
                }
        out.append(row)
    return out


# -- core runtime numbers -----------------------------------------------------------------------
def core(*args, **kwargs) -> Dict[str, Any]:
    """Prefill/decode tokens/s at 1 and 2 threads, bytes per token and the fraction of measured
    memory bandwidth reached. See specgen.bench_core.run_core."""
    from specgen.bench_core import run_core

    return run_core(*args, **kwargs)


# -- command line --------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="specgen bench", description="Benchmark specgen configurations against each other and the speed-of-light bounds.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 2)[2])
    ap.add_argument("--core", action="store_true", help="core-runtime numbers only (same as the `core` subcommand)")
    ap.add_argument("-m", "--model", default=None, help="GGUF path or Hub reference (default: Gemma 3 270M)")
    ap.add_argument("-c", "--configs", default=DEFAULT_CONFIGS, help=f"comma-separated specs (default {DEFAULT_CONFIGS})")
    ap.add_argument("-p", "--prompts", default=",".join(PROMPT_SETS),
                    help="shipped sets (text,edit,code,chat) and/or JSONL files, comma-separated")
    ap.add_argument("--n-prompts", type=int, default=None, help="at most N prompts per set")
    ap.add_argument("-n", "--max-tokens", type=int, default=64)
    ap.add_argument("--draft-max", "-g", default="8", help="gamma values, e.g. 4,8")
    ap.add_argument("-t", "--threads", default=None, help="thread counts, e.g. 1,2 (default: all usable CPUs)")
    ap.add_argument("--temp", default="0", help="temperatures, e.g. 0,1")
    ap.add_argument("-r", "--repeats", type=int, default=1)
    ap.add_argument("--no-warmup", action="store_true")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--n-ctx", type=int, default=2048)
    ap.add_argument("--no-peer", action="store_true", help="skip llama-cpp-python even when installed")
    ap.add_argument("--json", help="write the full result (all runs) as JSON")
    ap.add_argument("--csv", help="write one row per configuration and prompt set")
    ap.add_argument("--plot", help="write a PNG (acceptance by position, decode tok/s, tokens/call vs bounds)")
    ap.add_argument("--markdown", help="write a Markdown report")
    ap.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    ap.add_argument("--bandwidth-mb", type=int, default=1024, help="--core: array size for the bandwidth probe")
    return ap


def main(argv: Optional[Sequence[str]] = None) -> int:
    from specgen import bench_report

    argv = list(sys.argv[1:] if argv is None else argv)
    is_core = bool(argv) and argv[0] == "core"
    if is_core:
        argv = argv[1:]
    args = build_parser().parse_args(argv)
    command = "python -m specgen.bench " + " ".join(_quote(a) for a in (["core"] if is_core else []) + argv)
    if is_core or args.core:
        res = core(args.model, threads=parse_list(args.threads or "1,2", int), max_tokens=args.max_tokens,
                   bandwidth_mb=args.bandwidth_mb, progress=not args.quiet, command=command)
        print(bench_report.core_table(res))
        if args.json:
            Path(args.json).write_text(json.dumps(_finite(res), indent=1))
        if args.markdown:
            Path(args.markdown).write_text(bench_report.core_markdown(res))
        return 0
    res = run(args.model, args.configs, args.prompts, n_prompts=args.n_prompts, draft_max=args.draft_max,
              threads=args.threads, temperatures=args.temp, max_tokens=args.max_tokens, repeats=args.repeats,
              warmup=not args.no_warmup, seed=args.seed, n_ctx=args.n_ctx, peer=not args.no_peer,
              progress=not args.quiet, command=command)
    print(bench_report.table(res))
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1))
    if args.csv:
        bench_report.write_csv(res, args.csv)
    if args.plot:
        bench_report.plot(res, args.plot)
    if args.markdown:
        Path(args.markdown).write_text(bench_report.markdown(res, plot_path=args.plot, md_path=args.markdown))
    return 0


def _quote(a: str) -> str:
    import shlex

    return shlex.quote(a)


if __name__ == "__main__":
    sys.exit(main())
