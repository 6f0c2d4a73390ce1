"""The `pair` study (``specgen bench --preset pair``): a released target with its draft model, specgen
against llama-server from one llama.cpp build, interleaved in one run (issue 33).

    python -m specgen.bench.models fetch qwen2.5-coder-pair       # once: the pair, 1.6 GB
    specgen bench --preset pair --peer-server /path/to/llama-server --markdown pair.md

Configurations (``-c``, comma-separated; ``@0`` / ``@1`` after a name limits it to that temperature):

- specgen: ``plain``; ``draft`` (the draft model, block verification); ``draft:token`` (token-wise);
  ``draft:nanospec`` (block, the NanoSpec head on the draft model); ``ngram``; ``auto`` (draft="auto"
  with the draft model when the engine accepts it, else plain auto, and the result says so);
  ``auto:nanospec`` (auto whose draft model candidate drafts over its NanoSpec head); ``draft:ssd``
  (SSD / Saguaro: the draft model drafts the next round while the target verifies, the cores split
  between them); ``nochain`` on draft / auto: n-gram matches do not start the draft model's proposals
  (ngram_chain=0; the engine's default chains matches of 4+ tokens).
  Options ``gN`` (draft_max) and ``fixed`` (no adaptive gamma) apply to the drafting ones.
- llama-server: ``llama`` (plain); ``llama:draft`` (``-md D --spec-type draft-simple`` at its default
  n-max); ``llama:draft:nN``; ``llama:draft:best`` (the n-max that decoded fastest in a short greedy sweep
  over ``--peer-sweep`` before the rounds).

Schedule: every round runs two blocks, one per engine, their order alternating between rounds. In
specgen's block every Generator is loaded already (once for the run) and the configurations run per
prompt in an order rotated by one per prompt. In llama-server's block each configuration is one server
process, started and stopped inside the block (never alive beside specgen's block), serving every prompt;
the order of the servers rotates per round. Both temperatures run in each block. CPU use by other
processes during each block is measured (system busy time minus this run's own) and reported.

After the rounds (with specgen's Generators closed): RSS of ``Generator(T, draft=D, n_parallel=4)``
against ``n_parallel=1`` in child processes, and prefill tok/s of 512 random ids against
``llama-bench -p 512`` (from the llama-server's directory, when it is there).
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from specgen.bench.stats import pool_runs

__all__ = ["PairConfig", "parse_configs", "schedule", "load_chat_prompts", "run_pair", "summarise_pair",
           "markdown", "table", "DEFAULT_CONFIGS", "DEFAULT_PROMPTS"]

DEFAULT_PROMPTS = str(Path(__file__).resolve().parent.parent / "prompts" / "code_chat.jsonl")
DEFAULT_CONFIGS = "plain,draft,draft:token,draft:nanospec,ngram,auto,auto:nanospec,llama,llama:draft,llama:draft:best"
SPECGEN_KINDS = ("plain", "draft", "ngram", "auto")
WARMUP_USER = "Say hello in one short sentence."


@dataclass(frozen=True)
class PairConfig:
    """One configuration of the study (see the module docstring for the names)."""

    name: str
    engine: str                      # "specgen" | "llama"
    kind: str                        # specgen: plain/draft/ngram/auto; llama: plain/draft
    verify: str = "block"
    nanospec: bool = False
    ssd: bool = False                # specgen draft: SSD / Saguaro
    chain: bool = True               # specgen draft / auto: the engine's default ngram_chain; False: 0
    draft_max: Optional[int] = None  # specgen gN
    adaptive: bool = True            # specgen: False with "fixed"
    n_max: Optional[int] = None      # llama-server --spec-draft-n-max (None: its default)
    best: bool = False               # llama: n_max from the sweep
    temps: Optional[Tuple[float, ...]] = None  # None: every temperature of the run

    def runs_at(self, t: float) -> bool:
        return self.temps is None or t in self.temps


def parse_configs(text: str) -> List[PairConfig]:
    """Parses ``-c``; ValueError names a bad entry."""
    out: List[PairConfig] = []
    for raw in [s.strip() for s in str(text).split(",") if s.strip()]:
        spec, temps = raw, None
        if "@" in raw:
            spec, t = raw.split("@", 1)
            try:
                temps = tuple(float(x) for x in t.split("/"))
            except ValueError:
                raise ValueError(f"pair config {raw!r}: @ takes temperatures, e.g. @0 or @0/1") from None
        parts = spec.split(":")
        head = parts[0]
        if head == "llama":
            kind, n_max, best = "plain", None, False
            rest = parts[1:]
            if rest:
                if rest[0] != "draft":
                    raise ValueError(f"pair config {raw!r}: llama takes :draft[:nN|:best]")
                kind, rest = "draft", rest[1:]
            for o in rest:
                if o == "best":
                    best = True
                elif o.startswith("n") and o[1:].isdigit() and int(o[1:]) >= 1:
                    n_max = int(o[1:])
                else:
                    raise ValueError(f"pair config {raw!r}: unknown llama option {o!r} (nN or best)")
            if best and n_max is not None:
                raise ValueError(f"pair config {raw!r}: best and nN exclude each other")
            out.append(PairConfig(name=spec, engine="llama", kind=kind, n_max=n_max, best=best, temps=temps))
            continue
        if head not in SPECGEN_KINDS:
            raise ValueError(f"unknown pair config {raw!r}: expected plain, draft[:token|:nanospec], ngram, auto, "
                             "llama or llama:draft[:nN|:best]")
        verify, nanospec, ssd, chain, gamma, adaptive = "block", False, False, True, None, True
        for o in parts[1:]:
            if head == "plain":
                raise ValueError(f"pair config {raw!r}: plain takes no options")
            if o in ("token", "block"):
                verify = o
            elif o == "nanospec" and head in ("draft", "auto"):
                nanospec = True
            elif o == "ssd" and head == "draft":
                ssd = True
            elif o == "nochain" and head in ("draft", "auto"):
                chain = False
            elif o == "fixed":
                adaptive = False
            elif o.startswith("g") and o[1:].isdigit() and int(o[1:]) >= 1:
                gamma = int(o[1:])
            else:
                raise ValueError(f"pair config {raw!r}: unknown option {o!r}")
        out.append(PairConfig(name=spec, engine="specgen", kind=head, verify=verify, nanospec=nanospec, ssd=ssd, chain=chain,
                              draft_max=gamma, adaptive=adaptive, temps=temps))
    names = [c.name for c in out]
    if len(set(names)) != len(names):
        raise ValueError("pair configs: a configuration is listed twice")
    if not out:
        raise ValueError("no pair configurations")
    return out


def schedule(configs: Sequence[PairConfig], n_prompts: int, rounds: int, temps: Sequence[float]) -> List[Dict[str, Any]]:
    """The run as blocks: [{"round", "engine", "jobs": [(temperature, prompt index, config), ...]}].
    Two blocks per round (specgen's, llama-server's; an engine without configurations has none), their
    order alternating between rounds. specgen: per temperature and prompt every configuration once,
    the order rotated by one per prompt. llama-server: configuration-major (one server at a time), the
    order of the configurations rotated by one per round."""
    sg = [c for c in configs if c.engine == "specgen"]
    ll = [c for c in configs if c.engine == "llama"]
    blocks = []
    for r in range(rounds):
        jobs_sg, k = [], r
        for t in temps:
            live = [c for c in sg if c.runs_at(t)]
            for pi in range(n_prompts):
                s = k % max(len(live), 1)
                jobs_sg += [(t, pi, c) for c in live[s:] + live[:s]]
                k += 1
        jobs_ll = []
        s = r % max(len(ll), 1)
        for c in ll[s:] + ll[:s]:
            for t in temps:
                if c.runs_at(t):
                    jobs_ll += [(t, pi, c) for pi in range(n_prompts)]
        pair = [{"round": r, "engine": "specgen", "jobs": jobs_sg}, {"round": r, "engine": "llama", "jobs": jobs_ll}]
        blocks += [b for b in (pair if r % 2 == 0 else pair[::-1]) if b["jobs"]]
    return blocks


def load_chat_prompts(path: str = DEFAULT_PROMPTS, n: Optional[int] = None) -> List[Dict[str, Any]]:
    """Rows {"id", "kind", "messages"} of a chat prompt file (one JSON object per line)."""
    rows = []
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f):
            if not line.strip():
                continue
            obj = json.loads(line)
            msgs = obj.get("messages") if isinstance(obj, dict) else None
            if not isinstance(msgs, list) or not msgs or not all(isinstance(m, dict) and "role" in m for m in msgs):
                raise ValueError(f"{path}:{i + 1}: expected an object with a non-empty \"messages\" list")
            rows.append({"id": str(obj.get("id", f"p{i}")), "kind": str(obj.get("kind", "")), "messages": msgs})
    if not rows:
        raise ValueError(f"{path}: no prompts")
    return rows[:n] if n else rows


# -- load measurement ----------------------------------------------------------------------------
class LoadMeter:
    """CPU cores used by other processes during a block: the system's busy time minus this process's
    and the peer servers' (added with ``add_own``), over the block's wall time."""

    def __init__(self) -> None:
        import psutil

        self._psutil = psutil
        self.t0 = time.monotonic()
        self.busy0 = self._busy()
        self.own0 = self._own()
        self.extra = 0.0

    def _busy(self) -> float:
        c = self._psutil.cpu_times()
        return sum(c) - c.idle - getattr(c, "iowait", 0.0) - getattr(c, "guest", 0.0) - getattr(c, "guest_nice", 0.0)

    def _own(self) -> float:
        c = self._psutil.Process().cpu_times()
        return c.user + c.system

    def add_own(self, seconds: float) -> None:
        self.extra += seconds

    def stop(self) -> Dict[str, float]:
        wall = max(time.monotonic() - self.t0, 1e-9)
        busy = self._busy() - self.busy0
        own = self._own() - self.own0 + self.extra
        return {"seconds": wall, "busy_cores": busy / wall, "own_cores": own / wall,
                "other_cores": max(0.0, busy - own) / wall, "loadavg_1m": os.getloadavg()[0]}


# -- specgen -------------------------------------------------------------------------------------
def _generator_kwargs(c: PairConfig, draft: str, threads: int, n_ctx: int) -> Dict[str, Any]:
    kw: Dict[str, Any] = dict(n_threads=threads, n_ctx=n_ctx)
    if c.kind == "draft":
        kw.update(draft=draft, verify=c.verify, nanospec=c.nanospec)
        if c.ssd:
            kw["ssd"] = True
    if c.kind in ("draft", "auto") and not c.chain:
        kw["ngram_chain"] = 0
    elif c.kind == "ngram":
        kw.update(draft="ngram", verify=c.verify)
    elif c.kind == "auto":
        kw.update(draft_kind="auto", draft_model=draft, nanospec=c.nanospec)  # the draft model candidate's head
    if c.kind != "plain":
        if c.draft_max is not None:
            kw["draft_max"] = c.draft_max
        if not c.adaptive:
            kw["draft_adaptive"] = False
    return kw


def _load_specgen(c: PairConfig, target: str, draft: str, threads: int, n_ctx: int) -> Tuple[Any, Optional[str]]:
    """(Generator, note). auto: with the draft model when the engine takes draft="auto" together with
    draft_model; otherwise plain auto, and the note says so."""
    from specgen import Generator
    from specgen.errors import InvalidParameterError, SpecgenNotImplementedError

    kw = _generator_kwargs(c, draft, threads, n_ctx)
    if c.kind != "auto":
        return Generator(target, **kw), None
    try:
        return Generator(target, **kw), "auto with the draft model"
    except (InvalidParameterError, SpecgenNotImplementedError) as e:
        kw.pop("draft_model")
        kw.pop("draft_kind")
        kw.pop("nanospec", None)
        kw["draft"] = "auto"
        return Generator(target, **kw), ("auto WITHOUT the draft model: this engine refused draft=\"auto\" with "
                                         f"draft_model ({' '.join(str(e).split())})")


def _specgen_run(g, ids: List[int], max_tokens: int, t: float, seed: int) -> Dict[str, Any]:
    r = g.generate(ids, max_tokens=max_tokens, temperature=t, seed=seed)
    st = dict(r.stats)
    dec_s = st.get("decode_seconds") or 0.0
    dec_tps = st.get("decode_tokens_per_second") or 0.0
    pooled = pool_runs([st])
    n = st.get("n_generated") or 0
    # specgen's decode time covers every generated token (the prompt's last row runs in the first round);
    # plain decoding is one target call per token.
    return {"decode_tps": dec_tps, "decode_tokens": dec_tps * dec_s, "decode_seconds": dec_s,
            "prefill_tps": st.get("prefill_tokens_per_second"), "n_generated": n, "call_tokens": n,
            "n_drafted": st.get("n_drafted", 0), "n_accepted": st.get("n_accepted", 0),
            "n_rounds": st.get("n_rounds", 0) or n, "tokens_per_call": pooled["tokens_per_call"], "finish_reason": r.finish_reason,
            "auto_method": st.get("auto_method"), "drafted_at": st.get("drafted_at"), "accepted_at": st.get("accepted_at"),
            "text": r.text}


# -- llama-server --------------------------------------------------------------------------------
def _llama_run(server, ids: List[int], max_tokens: int, t: float, seed: int) -> Dict[str, Any]:
    out = server.complete(ids, max_tokens, t, seed)
    tm = out["timings"]
    n = int(tm.get("predicted_n") or 0)
    ms = float(tm.get("predicted_ms") or 0.0)
    drafted, accepted = int(tm.get("draft_n") or 0), int(tm.get("draft_n_accepted") or 0)
    # llama-server's first token comes with the prompt's last batch (in prompt_ms); predicted_ms covers
    # the other n - 1, and each target call among them emits its accepted draft tokens plus one.
    steps = max(n - 1, 0)
    calls = steps - accepted
    return {"decode_tps": float(tm.get("predicted_per_second") or 0.0), "decode_tokens": steps, "decode_seconds": ms / 1e3,
            "prefill_tps": tm.get("prompt_per_second"), "n_generated": n, "call_tokens": steps, "n_drafted": drafted,
            "n_accepted": accepted, "n_rounds": calls, "tokens_per_call": steps / calls if calls > 0 else None,
            "finish_reason": out.get("stop_type"), "text": out["text"]}


def _server_config(c: PairConfig, target: str, draft: str, threads: int, n_ctx: int, best: Optional[int]):
    from specgen.bench.peer_server import ServerConfig

    if c.kind == "plain":
        return ServerConfig(model=target, threads=threads, n_ctx=n_ctx)
    return ServerConfig(model=target, threads=threads, n_ctx=n_ctx, draft=draft, n_max=best if c.best else c.n_max)


def _sweep(binary, help_text, target, draft, values, ids_list, max_tokens, threads, n_ctx, progress) -> Dict[str, Any]:
    """Greedy decode tok/s of llama-server + draft at each n-max over ``ids_list``: {"rows", "best"}."""
    from specgen.bench.peer_server import LlamaServer, ServerConfig

    rows = []
    for v in values:
        cfg = ServerConfig(model=target, threads=threads, n_ctx=n_ctx, draft=draft, n_max=v)
        with LlamaServer(binary, cfg, help_text) as s:
            s.complete(ids_list[0], 8, 0.0, 1)  # warm-up
            rs = [_llama_run(s, ids, max_tokens, 0.0, 1) for ids in ids_list]
        tps = sum(r["decode_tokens"] for r in rs) / max(sum(r["decode_seconds"] for r in rs), 1e-9)
        acc = sum(r["n_accepted"] for r in rs) / max(sum(r["n_drafted"] for r in rs), 1)
        rows.append({"n_max": v, "decode_tps": tps, "acceptance": acc})
        if progress:
            print(f"pair: llama-server n-max sweep: {v}: {tps:.2f} tok/s, acceptance {acc:.2f}", file=sys.stderr)
    best = max(rows, key=lambda r: r["decode_tps"])["n_max"] if rows else None
    return {"rows": rows, "best": best, "max_tokens": max_tokens, "n_prompts": len(ids_list)}


# -- memory and prefill --------------------------------------------------------------------------
_RSS_CHILD = r"""
import json, sys, psutil
from specgen import Generator
t, d, n, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
g = Generator(t, draft=d, n_parallel=n, n_threads=threads, n_ctx=2048)
g.generate([g.tokenize("def f(x):", add_bos=True)] * n, max_tokens=4, temperature=0.0)
m = psutil.Process().memory_full_info()
print(json.dumps({"n_parallel": n, "rss_mb": m.rss / 2**20, "uss_mb": m.uss / 2**20, "pss_mb": m.pss / 2**20}))
"""


def measure_rss(target: str, draft: str, threads: int, slots: Sequence[int] = (1, 4)) -> List[Dict[str, Any]]:
    """RSS / USS / PSS of a fresh process holding Generator(target, draft=draft, n_parallel=N) after a
    4-token batch, per N (child processes: nothing else of this run in them)."""
    out = []
    for n in slots:
        r = subprocess.run([sys.executable, "-c", _RSS_CHILD, target, draft, str(n), str(threads)],
                           capture_output=True, text=True, timeout=900)
        if r.returncode != 0:
            out.append({"n_parallel": n, "error": " ".join(r.stderr.strip().splitlines()[-1:])})
        else:
            out.append(json.loads(r.stdout.strip().splitlines()[-1]))
    return out


def measure_prefill(target: str, threads: int, n_ctx: int, server_binary: Optional[str], n_tokens: int = 512,
                    repeats: int = 2, seed: int = 7) -> Dict[str, Any]:
    """specgen's prefill tok/s on ``n_tokens`` random ids (a fresh draw per repeat: nothing cached)
    against ``llama-bench -p N -n 64`` beside the llama-server binary (its tg64 too)."""
    import numpy as np

    from specgen import Generator

    g = Generator(target, n_threads=threads, n_ctx=max(n_ctx, n_tokens + 16))
    rng = np.random.default_rng(seed)
    hi = min(g.n_vocab, 151643)  # ids below the control tokens of the Qwen2 vocabulary
    g.generate([int(x) for x in rng.integers(100, hi, n_tokens)], max_tokens=1, temperature=0.0)  # warm-up
    sg = []
    for _ in range(repeats):
        r = g.generate([int(x) for x in rng.integers(100, hi, n_tokens)], max_tokens=1, temperature=0.0)
        sg.append(r.stats["prefill_tokens_per_second"])
    g.close()
    out: Dict[str, Any] = {"n_tokens": n_tokens, "specgen_prefill_tps": sg}
    bench = Path(server_binary).with_name("llama-bench") if server_binary else None
    if bench is None or not bench.is_file():
        out["llama_bench"] = None
        out["llama_bench_note"] = "no llama-bench beside llama-server"
        return out
    cmd = [str(bench), "-m", target, "-p", str(n_tokens), "-n", "64", "-t", str(threads), "-r", str(repeats), "-o", "json"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        out["llama_bench"] = None
        out["llama_bench_note"] = f"llama-bench failed: {' '.join(r.stderr.strip().splitlines()[-1:])}"
        return out
    rows = json.loads(r.stdout)
    out["llama_bench_command"] = " ".join(cmd)
    out["llama_bench"] = [{"n_prompt": x.get("n_prompt"), "n_gen": x.get("n_gen"), "avg_ts": x.get("avg_ts"),
                           "stddev_ts": x.get("stddev_ts"), "samples_ts": x.get("samples_ts")} for x in rows]
    return out


# -- the run -------------------------------------------------------------------------------------
def run_pair(target: Optional[str] = None, draft: Optional[str] = None, *, configs: str = DEFAULT_CONFIGS,
             prompts: str = DEFAULT_PROMPTS, n_prompts: Optional[int] = None, max_tokens: int = 128,
             temperatures: Sequence[float] = (0.0, 1.0), threads: int = 2, rounds: int = 2, seed: int = 1234,
             n_ctx: int = 2048, peer_server: Optional[str] = None, peer_sweep: Sequence[int] = (),
             sweep_tokens: int = 64, sweep_prompts: int = 2, extras: bool = True, progress: bool = True,
             command: Optional[str] = None) -> Dict[str, Any]:
    """Runs the study; returns the JSON-ready result {"meta", "runs", "rows", "blocks", "sweep", "rss",
    "prefill", "notes"}. ``target``/``draft`` None: the fetched Qwen2.5-Coder pair (specgen.bench.models)."""
    from specgen import Generator
    from specgen.bench.models import pair_paths
    from specgen.bench.peer_server import LlamaServer, default_draft_n_max, resolve_server, server_help, server_version
    from specgen.bench.runner import _finite, environment
    from specgen.chat_template import template_for

    t_start = time.perf_counter()
    if target is None or draft is None:
        t_def, d_def = pair_paths()
        target, draft = target or t_def, draft or d_def
    cfgs = parse_configs(configs)
    rows_p = load_chat_prompts(prompts, n_prompts)
    notes: List[str] = []
    has_llama = any(c.engine == "llama" for c in cfgs)
    binary = help_text = version = None
    default_n_max = None
    if has_llama:
        binary = resolve_server(peer_server)
        help_text = server_help(binary)
        version = server_version(binary)
        default_n_max = default_draft_n_max(help_text)

    # Token ids: the target's chat template renders each prompt (special tokens parsed), as a chat
    # request to either server would; both engines decode from the same ids.
    probe = Generator(target, n_threads=threads, n_ctx=n_ctx)
    template = template_for(probe)
    ids = [probe.tokenize(template.render(p["messages"], add_generation_prompt=True), add_bos=True, special=True)
           for p in rows_p]
    warm_ids = probe.tokenize(template.render([{"role": "user", "content": WARMUP_USER}], add_generation_prompt=True),
                              add_bos=True, special=True)
    template_origin = template.origin
    probe.close()

    sweep = None
    if has_llama and any(c.best for c in cfgs):
        values = list(peer_sweep) or ([default_n_max] if default_n_max else [3])
        sweep = _sweep(binary, help_text, target, draft, values, ids[:max(1, sweep_prompts)], sweep_tokens, threads,
                       n_ctx, progress)
        if sweep["best"] == default_n_max and any(c.engine == "llama" and c.kind == "draft" and not c.best and c.n_max is None
                                                  for c in cfgs):
            cfgs = [c for c in cfgs if not c.best]
            notes.append(f"llama-server's best n-max in the sweep was its default ({default_n_max}): "
                         "llama:draft:best is llama:draft and is not run twice")
        else:
            cfgs = [replace(c, name=f"llama:draft:n{sweep['best']} (best)") if c.best else c for c in cfgs]

    # specgen: every Generator loaded once, warmed up, alive for the whole run.
    gens: Dict[str, Any] = {}
    for c in cfgs:
        if c.engine != "specgen":
            continue
        g, note = _load_specgen(c, target, draft, threads, n_ctx)
        if note:
            notes.append(f"{c.name}: {note}")
        g.generate(warm_ids, max_tokens=8, temperature=0.0, seed=seed)
        gens[c.name] = g

    blocks = schedule(cfgs, len(rows_p), rounds, list(temperatures))
    n_jobs = sum(len(b["jobs"]) for b in blocks)
    runs: List[Dict[str, Any]] = []
    block_log: List[Dict[str, Any]] = []
    done = 0
    for b in blocks:
        meter = LoadMeter()
        if b["engine"] == "specgen":
            for t, pi, c in b["jobs"]:
                t0 = time.time()
                res = _specgen_run(gens[c.name], ids[pi], max_tokens, t, seed + 1000 * b["round"] + pi)
                runs.append({"engine": "specgen", "config": c.name, "temperature": t, "round": b["round"],
                             "prompt": rows_p[pi]["id"], "kind": rows_p[pi]["kind"], "t_start": t0, "t_end": time.time(),
                             **res})
                done += 1
                if progress:
                    print(f"\rpair: {done}/{n_jobs} specgen {c.name} T{t:g} {rows_p[pi]['id']}: "
                          f"{res['decode_tps']:.1f} tok/s".ljust(100), end="", file=sys.stderr, flush=True)
        else:
            import psutil

            current, server = None, None
            try:
                for t, pi, c in b["jobs"]:
                    if current is not c:
                        if server is not None:
                            meter.add_own(_cpu_seconds(psutil, server.proc.pid))
                            server.stop()
                        server = LlamaServer(binary, _server_config(c, target, draft, threads, n_ctx,
                                                                    sweep["best"] if sweep else None), help_text)
                        server.complete(warm_ids, 8, 0.0, seed)
                        current = c
                    t0 = time.time()
                    res = _llama_run(server, ids[pi], max_tokens, t, seed + 1000 * b["round"] + pi)
                    runs.append({"engine": "llama", "config": c.name, "temperature": t, "round": b["round"],
                                 "prompt": rows_p[pi]["id"], "kind": rows_p[pi]["kind"], "t_start": t0,
                                 "t_end": time.time(), **res})
                    done += 1
                    if progress:
                        print(f"\rpair: {done}/{n_jobs} llama-server {c.name} T{t:g} {rows_p[pi]['id']}: "
                              f"{res['decode_tps']:.1f} tok/s".ljust(100), end="", file=sys.stderr, flush=True)
            finally:
                if server is not None:
                    meter.add_own(_cpu_seconds(psutil, server.proc.pid))
                    server.stop()
        block_log.append({"round": b["round"], "engine": b["engine"], "n_jobs": len(b["jobs"]), **meter.stop()})
    if progress:
        print(file=sys.stderr)
    for g in gens.values():
        g.close()
    gens.clear()

    rss = prefill = None
    if extras:
        if progress:
            print("pair: RSS of n_parallel=1 and 4, then prefill", file=sys.stderr)
        rss = measure_rss(target, draft, threads)
        prefill = measure_prefill(target, threads, n_ctx, binary)

    result = {
        "meta": {"command": command, "target": target, "draft": draft, "prompts": prompts, "n_prompts": len(rows_p),
                 "prompt_ids": [p["id"] for p in rows_p], "prompt_tokens": [len(x) for x in ids],
                 "chat_template": template_origin, "max_tokens": max_tokens, "temperatures": list(temperatures),
                 "threads": threads, "rounds": rounds, "seed": seed, "n_ctx": n_ctx, "configs": [c.name for c in cfgs],
                 "llama_server": binary, "llama_server_version": version, "llama_default_n_max": default_n_max,
                 "elapsed_seconds": time.perf_counter() - t_start, "started": time.strftime("%Y-%m-%d %H:%M:%S"),
                 **environment()},
        "rows": summarise_pair(runs, [c.name for c in cfgs]),
        "blocks": block_log, "sweep": sweep, "rss": rss, "prefill": prefill, "notes": notes,
        "runs": [{k: v for k, v in r.items() if k != "text"} for r in runs],
    }
    return _finite(result)


def _cpu_seconds(psutil, pid: int) -> float:
    try:
        c = psutil.Process(pid).cpu_times()
        return c.user + c.system
    except psutil.Error:
        return 0.0


# -- summary -------------------------------------------------------------------------------------
def _mean_se(xs: Sequence[float]) -> Tuple[Optional[float], Optional[float]]:
    xs = [x for x in xs if x is not None and not (isinstance(x, float) and math.isnan(x))]
    if not xs:
        return None, None
    m = sum(xs) / len(xs)
    if len(xs) < 2:
        return m, None
    var = sum((x - m) ** 2 for x in xs) / (len(xs) - 1)
    return m, math.sqrt(var / len(xs))


def summarise_pair(runs: Sequence[Dict[str, Any]], order: Optional[Sequence[str]] = None) -> List[Dict[str, Any]]:
    """One row per (configuration, temperature): decode tok/s pooled over its runs (decoded tokens over
    decode seconds), the ratios to specgen plain and to llama-server plain at the same temperature,
    tokens per target call (pooled, and the per-run mean with its standard error), acceptance, and the
    per-prompt tok/s."""
    keys: List[Tuple[str, float]] = []
    for r in runs:
        k = (r["config"], r["temperature"])
        if k not in keys:
            keys.append(k)
    if order:
        rank = {n: i for i, n in enumerate(order)}
        keys.sort(key=lambda k: (k[1], rank.get(k[0], len(rank))))
    tps: Dict[Tuple[str, float], Optional[float]] = {}
    out = []
    for k in keys:
        rs = [r for r in runs if (r["config"], r["temperature"]) == k]
        secs = sum(r["decode_seconds"] or 0.0 for r in rs)
        toks = sum(r["decode_tokens"] or 0.0 for r in rs)
        tps[k] = toks / secs if secs > 0 else None
        rounds = sum(r["n_rounds"] or 0 for r in rs)
        drafted = sum(r["n_drafted"] or 0 for r in rs)
        m, se = _mean_se([r["tokens_per_call"] for r in rs])
        per_prompt: Dict[str, List[float]] = {}
        for r in rs:
            per_prompt.setdefault(r["prompt"], []).append(r["decode_tps"])
        out.append({
            "config": k[0], "engine": rs[0]["engine"], "temperature": k[1], "n_runs": len(rs),
            "decode_tps": tps[k],
            "tokens_per_call": (sum(r.get("call_tokens", r["n_generated"]) or 0 for r in rs) / rounds) if rounds else None,
            "tokens_per_call_mean": m, "tokens_per_call_se": se,
            "acceptance": (sum(r["n_accepted"] or 0 for r in rs) / drafted) if drafted else None,
            "mean_generated": sum(r["n_generated"] or 0 for r in rs) / len(rs),
            "prefill_tps_median": _median([r["prefill_tps"] for r in rs]),
            "per_prompt_tps": {p: sum(v) / len(v) for p, v in per_prompt.items()},
        })
    for row in out:
        base_sg = tps.get(("plain", row["temperature"]))
        base_ll = tps.get(("llama", row["temperature"]))
        row["vs_specgen_plain"] = row["decode_tps"] / base_sg if row["decode_tps"] and base_sg else None
        row["vs_llama_plain"] = row["decode_tps"] / base_ll if row["decode_tps"] and base_ll else None
    return out


def _median(xs) -> Optional[float]:
    xs = sorted(x for x in xs if x is not None and not (isinstance(x, float) and math.isnan(x)))
    if not xs:
        return None
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def block_vs_token(rows: Sequence[Dict[str, Any]], temperature: float = 1.0, block: str = "draft",
                   token: str = "draft:token") -> Optional[Dict[str, Optional[float]]]:
    """Tokens per target call of block over token-wise verification at ``temperature``, with the
    standard error of the ratio (delta method, independent samples: each run samples its own text)."""
    b = next((r for r in rows if r["config"] == block and r["temperature"] == temperature), None)
    t = next((r for r in rows if r["config"] == token and r["temperature"] == temperature), None)
    if not b or not t or not b["tokens_per_call_mean"] or not t["tokens_per_call_mean"]:
        return None
    ratio = b["tokens_per_call_mean"] / t["tokens_per_call_mean"]
    se = None
    if b["tokens_per_call_se"] is not None and t["tokens_per_call_se"] is not None:
        se = ratio * math.sqrt((b["tokens_per_call_se"] / b["tokens_per_call_mean"]) ** 2
                               + (t["tokens_per_call_se"] / t["tokens_per_call_mean"]) ** 2)
    return {"block": b["tokens_per_call_mean"], "block_se": b["tokens_per_call_se"], "token": t["tokens_per_call_mean"],
            "token_se": t["tokens_per_call_se"], "ratio": ratio, "ratio_se": se, "n_block": b["n_runs"], "n_token": t["n_runs"]}


def _f(x, fmt="{:.2f}", none="") -> str:
    return none if x is None else fmt.format(x)


def table(res: Dict[str, Any]) -> str:
    """The result as a text table (one row per configuration and temperature)."""
    lines = [f"{'configuration':<34} {'T':>3} {'tok/s':>7} {'vs sg plain':>11} {'vs llama':>9} {'tok/call':>9} {'accept':>7} {'runs':>5}"]
    for r in res["rows"]:
        lines.append(f"{r['config']:<34} {r['temperature']:>3g} {_f(r['decode_tps']):>7} {_f(r['vs_specgen_plain'], '{:.2f}x'):>11} "
                     f"{_f(r['vs_llama_plain'], '{:.2f}x'):>9} {_f(r['tokens_per_call']):>9} {_f(r['acceptance']):>7} {r['n_runs']:>5}")
    return "\n".join(lines)


def markdown(res: Dict[str, Any]) -> str:
    """A Markdown report: the configuration table, block vs token-wise at T=1, per-prompt tok/s at T=0,
    the n-max sweep, CPU load per block, RSS and prefill."""
    m = res["meta"]
    out = [f"# specgen vs llama-server on {Path(m['target']).name} + {Path(m['draft']).name}", "",
           f"Command: `{m['command']}`", "",
           f"{m['cpu']}, {m['threads']} threads, {m['n_prompts']} chat prompts ({', '.join(m['prompt_ids'])}; "
           f"{min(m['prompt_tokens'])}-{max(m['prompt_tokens'])} prompt tokens, template: {m['chat_template']}), "
           f"{m['max_tokens']} tokens, T = {', '.join(f'{t:g}' for t in m['temperatures'])}, {m['rounds']} rounds, "
           f"specgen {m['git_commit']}, llama-server {m['llama_server_version']}; {m['elapsed_seconds'] / 60:.1f} min.", "",
           "| configuration | T | tok/s | vs specgen plain | vs llama.cpp plain | tokens / target call (mean ± SE) | acceptance | mean tokens | runs |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in res["rows"]:
        tpc = _f(r["tokens_per_call"])
        if r["tokens_per_call_se"] is not None and r["tokens_per_call"] not in (None, 1.0):
            tpc += f" ({_f(r['tokens_per_call_mean'])} ± {_f(r['tokens_per_call_se'])})"
        out.append(f"| {r['config']} | {r['temperature']:g} | {_f(r['decode_tps'], '{:.1f}')} | {_f(r['vs_specgen_plain'], '{:.2f}x')} | "
                   f"{_f(r['vs_llama_plain'], '{:.2f}x')} | {tpc} | {_f(r['acceptance'])} | {_f(r['mean_generated'], '{:.0f}')} | {r['n_runs']} |")
    bt = block_vs_token(res["rows"])
    if bt:
        out += ["", f"T=1, draft model: block verification {bt['block']:.2f} ± {_f(bt['block_se'])} tokens per target call "
                f"({bt['n_block']} runs) vs token-wise {bt['token']:.2f} ± {_f(bt['token_se'])} ({bt['n_token']} runs): "
                f"ratio {bt['ratio']:.3f} ± {_f(bt['ratio_se'], '{:.3f}')}."]
    temps = sorted({r["temperature"] for r in res["rows"]})
    for t in temps:
        rows = [r for r in res["rows"] if r["temperature"] == t]
        prompts = m["prompt_ids"]
        out += ["", f"Per prompt, T={t:g} (decode tok/s, mean over rounds):", "",
                "| configuration | " + " | ".join(prompts) + " |", "|---|" + "---|" * len(prompts)]
        for r in rows:
            out.append(f"| {r['config']} | " + " | ".join(_f(r["per_prompt_tps"].get(p), "{:.1f}") for p in prompts) + " |")
    if res.get("sweep"):
        s = res["sweep"]
        out += ["", f"llama-server + draft n-max sweep (T=0, {s['n_prompts']} prompts, {s['max_tokens']} tokens): "
                + ", ".join(f"n-max {x['n_max']}: {x['decode_tps']:.1f} tok/s (acceptance {x['acceptance']:.2f})" for x in s["rows"])
                + f"; best {s['best']}."]
    if res.get("blocks"):
        out += ["", "CPU load per block (cores busy with other processes; this run's own use excluded):", "",
                "| round | engine | minutes | other processes (cores) | this run (cores) | load avg 1m at end |", "|---|---|---|---|---|---|"]
        for b in res["blocks"]:
            out.append(f"| {b['round']} | {b['engine']} | {b['seconds'] / 60:.1f} | {b['other_cores']:.2f} | {b['own_cores']:.2f} | {b['loadavg_1m']:.1f} |")
    if res.get("rss"):
        out += ["", "Memory of `Generator(T, draft=D, n_parallel=N)` after a 4-token batch (fresh process each): "
                + "; ".join(f"N={x['n_parallel']}: " + (f"RSS {x['rss_mb'] / 1024:.2f} GiB, USS {x['uss_mb'] / 1024:.2f} GiB"
                                                         if "rss_mb" in x else x.get("error", "?")) for x in res["rss"]) + "."]
    p = res.get("prefill")
    if p:
        line = f"Prefill of {p['n_tokens']} random ids: specgen " + ", ".join(f"{x:.1f}" for x in p["specgen_prefill_tps"]) + " tok/s"
        if p.get("llama_bench"):
            line += "; llama-bench " + ", ".join(f"{'pp' if x['n_gen'] == 0 else 'tg'}{x['n_prompt'] or x['n_gen']} "
                                                f"{x['avg_ts']:.1f} ± {x['stddev_ts']:.1f}" for x in p["llama_bench"]) + " tok/s"
        else:
            line += f" ({p.get('llama_bench_note')})"
        out += ["", line + "."]
    if res.get("notes"):
        out += ["", "Notes:", ""] + [f"- {n}" for n in res["notes"]]
    return "\n".join(out) + "\n"


def run_from_args(args, command: str) -> int:
    """`specgen bench --preset pair ...` (cli.py): runs, prints the table, writes --json / --markdown."""
    from specgen.bench.cli import _wrote
    from specgen.bench.grammar import parse_list

    threads = (args.thread_list or [2])[0]
    res = run_pair(args.model, getattr(args, "draft_model", None), configs=args.configs,
                   prompts=args.prompts if args.prompts != "pair" else DEFAULT_PROMPTS, n_prompts=args.n_prompts,
                   max_tokens=args.max_tokens, temperatures=args.temp_list or [0.0], threads=threads, rounds=args.repeats,
                   seed=args.seed, n_ctx=args.n_ctx, peer_server=args.peer_server,
                   peer_sweep=parse_list(getattr(args, "peer_sweep", "") or "", int), progress=not args.quiet,
                   command=command)
    print(table(res))
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1))
        _wrote("JSON result", args.json)
    if args.markdown:
        Path(args.markdown).write_text(markdown(res))
        _wrote("Markdown report", args.markdown)
    return 0
