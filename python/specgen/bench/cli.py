"""The `specgen bench` command line (the native CLI forwards ``specgen bench ARGS`` to
``python -m specgen.bench``). Every failure is one line ``specgen bench: error: ...`` on stderr and a
non-zero exit (2 for a bad command line, 1 at run time), as for the native CLI; optional
dependencies of the requested outputs (matplotlib for --plot) are checked before anything runs.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from pathlib import Path
from typing import List, Optional, Sequence

from specgen import flags
from specgen.bench import grammar, presets

PROG = "specgen bench"


class UsageError(Exception):
    """A bad command line: exit code 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line instead of argparse's usage block
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    ap = _Parser(
        prog=PROG, description="Benchmark specgen configurations against each other and the speed-of-light bounds.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=grammar.__doc__.split("\n\n", 1)[1] + "\npresets (--preset NAME):\n" + presets.describe())
    ap.add_argument("--core", action="store_true", help="core-runtime numbers only (same as the `core` subcommand)")
    ap.add_argument("--preset", choices=sorted(presets.PRESETS), help="a named study: its options, overridable")
    ap.add_argument("-m", "--model", default=None, help="GGUF path or Hub reference (default: Gemma 3 270M)")
    ap.add_argument("-c", "--configs", default=grammar.DEFAULT_CONFIGS,
                    help=f"comma-separated specs (default {grammar.DEFAULT_CONFIGS})")
    ap.add_argument("-p", "--prompts", default=",".join(grammar.PROMPT_SETS),
                    help="shipped sets (text,edit,code,chat) and/or JSONL files, comma-separated")
    ap.add_argument("--n-prompts", type=int, default=None, help="at most N prompts per set")
    ap.add_argument("-n", "--max-tokens", type=int, default=64)
    ap.add_argument("--draft-max", "-g", default=flags.default("draft_max"),
                    help="gamma values, e.g. 4,8 (default: the engine's draft_max)")
    ap.add_argument("-t", "--threads", default=None, help="thread counts, e.g. 1,2 (default: all usable CPUs)")
    ap.add_argument("--temp", default="0", help="temperatures, e.g. 0,1")
    ap.add_argument("-r", "--repeats", type=int, default=1)
    ap.add_argument("--repeats-sampled", type=int, default=None,
                    help="repeats (seeds) of the cells at temperature > 0 (default: --repeats): each configuration "
                         "samples its own texts, so a sampled cell needs more draws than a greedy one")
    ap.add_argument("--no-warmup", action="store_true")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--n-ctx", type=int, default=2048)
    ap.add_argument("--no-peer", dest="peer", action="store_false", help="skip llama-cpp-python even when installed")
    ap.add_argument("--json", help="write the full result (all runs) as JSON")
    ap.add_argument("--csv", help="write one row per configuration and prompt set")
    ap.add_argument("--plot", help="write a PNG (acceptance by position, decode tok/s, tokens/call vs bounds); "
                                   "needs matplotlib (pip install \"specgen[bench]\")")
    ap.add_argument("--markdown", help="write a Markdown report")
    ap.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    ap.add_argument("--parallel", default=None,
                    help="batch sizes, e.g. 1,2,4,8,16: N concurrent requests on one Generator (plain vs ngram and "
                         "draft=auto speculation under the batch policy; specgen.bench.parallel)")
    ap.add_argument("--bandwidth-mb", type=int, default=1024, help="--core: array size for the bandwidth probe")
    # The pair study (--preset pair, specgen.bench.pair): a target with its draft model against llama-server.
    ap.add_argument("--draft-head", default=None, help="the EAGLE-3 head GGUF of the head and auto:head configurations")
    ap.add_argument("-md", "--draft-model", default=None, help="--preset pair: the draft GGUF (default: the fetched pair's)")
    ap.add_argument("--peer-server", default=None,
                    help="--preset pair: a llama-server binary (default $SPECGEN_LLAMA_SERVER; specgen never builds it)")
    ap.add_argument("--peer-sweep", default="", help="--preset pair: llama-server n-max values tried for llama:draft:best")
    ap.set_defaults(then_core=False, study=None)
    return ap


def parse(argv: Sequence[str]) -> argparse.Namespace:
    """Parses the command line with the chosen preset's values as defaults; checks every list
    option and the optional dependencies of the outputs, so that a bad value fails before the run."""
    ap = build_parser()
    first, _ = ap.parse_known_args(argv)
    if first.preset:
        ap.set_defaults(**presets.PRESETS[first.preset])
    args = ap.parse_args(argv)
    try:
        if args.study == "pair":  # its own configuration names (specgen.bench.pair)
            from specgen.bench import pair

            args.config_list = pair.parse_configs(args.configs)
        else:
            args.config_list = [grammar.parse_config(s) for s in grammar.parse_list(args.configs, str)]
        args.gamma_list = grammar.parse_list(args.draft_max, int)
        args.thread_list = grammar.parse_list(args.threads, int) if args.threads else None
        args.temp_list = grammar.parse_list(args.temp, float)
    except ValueError as e:
        raise UsageError(str(e)) from None
    for flag, values, lo in (("--draft-max", args.gamma_list, 1), ("--threads", args.thread_list or [], 0),
                             ("--max-tokens", [args.max_tokens], -1), ("--repeats", [args.repeats], 1),
                             ("--repeats-sampled", [args.repeats_sampled] if args.repeats_sampled is not None else [], 1)):
        bad = [v for v in values if v < lo]
        if bad:
            raise UsageError(f"{flag} values must be >= {lo}, got {bad[0]}")
    if not args.config_list:
        raise UsageError("--configs is empty")
    if args.study != "pair":
        try:
            grammar.check_draft_head(args.config_list, args.draft_head)
        except ValueError as e:
            raise UsageError(str(e)) from None
        if args.draft_head and not os.path.isfile(args.draft_head):
            raise UsageError(f"--draft-head {args.draft_head}: no such file")
    if args.plot and not args.core:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise UsageError("--plot needs matplotlib, which is not installed: pip install \"specgen[bench]\"") from None
    return args


def _run(argv: List[str]) -> int:
    from specgen.bench import report
    from specgen.bench.runtime import run_core
    from specgen.bench.runner import _finite, run

    is_core = bool(argv) and argv[0] == "core"
    if is_core:
        argv = argv[1:]
    args = parse(argv)
    command = "specgen bench " + " ".join(shlex.quote(a) for a in (["core"] if is_core else []) + argv)
    if args.study == "pair" and not is_core:
        from specgen.bench import pair

        return pair.run_from_args(args, command)
    if is_core or args.core:
        res = run_core(args.model, threads=grammar.parse_list(args.threads or "1,2", int), max_tokens=args.max_tokens,
                       bandwidth_mb=args.bandwidth_mb, progress=not args.quiet, command=command)
        print(report.core_table(res))
        if args.json:
            Path(args.json).write_text(json.dumps(_finite(res), indent=1))
            _wrote("JSON result", args.json)
        if args.markdown:
            Path(args.markdown).write_text(report.core_markdown(res))
            _wrote("Markdown report", args.markdown)
        return 0
    if args.parallel:
        from specgen.bench import parallel

        try:
            sizes = grammar.parse_list(args.parallel, int)
        except ValueError as e:
            raise UsageError(str(e)) from None
        if not sizes or min(sizes) < 1:
            raise UsageError("--parallel values must be >= 1")
        t = args.thread_list[0] if args.thread_list else None
        res = parallel.run_parallel(args.model, sizes, max_tokens=args.max_tokens, threads=t, repeats=args.repeats,
                                    progress=not args.quiet)
        print(parallel.table(res))
        if args.json:
            Path(args.json).write_text(json.dumps(res, indent=1))
            _wrote("JSON result", args.json)
        return 0
    # Prompt files are read before the run too: a missing set is a usage error.
    try:
        grammar.load_prompts(args.prompts, args.n_prompts)
    except (FileNotFoundError, ValueError) as e:
        raise UsageError(str(e)) from None
    res = run(args.model, args.configs, args.prompts, n_prompts=args.n_prompts, draft_max=args.draft_max,
              threads=args.threads, temperatures=args.temp, max_tokens=args.max_tokens, repeats=args.repeats,
              repeats_sampled=args.repeats_sampled, warmup=not args.no_warmup, seed=args.seed, n_ctx=args.n_ctx, peer=args.peer,
              draft_head=args.draft_head, progress=not args.quiet, command=command)
    print(report.table(res))
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1))
        _wrote("JSON result", args.json)
    if args.csv:
        report.write_csv(res, args.csv)
        _wrote("CSV table", args.csv)
    if args.markdown:  # before the plot: the report does not depend on matplotlib
        Path(args.markdown).write_text(report.markdown(res, plot_path=args.plot, md_path=args.markdown))
        _wrote("Markdown report", args.markdown)
    if args.plot:
        report.plot(res, args.plot)
        _wrote("plot", args.plot)
    if args.then_core:
        core = run_core(args.model, threads=[1, 2], max_tokens=16, bandwidth_mb=512, progress=not args.quiet,
                        command=command + " (then core -t 1,2 --max-tokens 16 --bandwidth-mb 512)")
        if args.markdown:
            with open(args.markdown, "a") as f:
                f.write("\n## Core runtime (`specgen bench core`)\n" + report.core_markdown(core).split("\n", 1)[1])
                f.write(f"\nRegenerate everything here with `specgen bench --preset {args.preset}`.\n")
            _wrote("core-runtime section", args.markdown)
        else:
            print(report.core_table(core))
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs `specgen bench`; returns the exit code. Errors are one line on stderr."""
    from specgen.errors import SpecgenError

    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return _run(argv)
    except UsageError as e:
        return _fail(str(e), 2)
    except (SpecgenError, OSError, RuntimeError, ValueError) as e:
        return _fail(str(e), 1)
    except KeyboardInterrupt:
        return _fail("interrupted", 130)


def _wrote(what: str, path: str) -> None:
    """Says where an output file went (stderr: stdout keeps only the tables)."""
    sys.stdout.flush()
    print(f"{PROG}: wrote the {what} to {Path(path).resolve()}", file=sys.stderr)


def _fail(message: str, code: int) -> int:
    sys.stdout.flush()
    print(f"{PROG}: error: {' '.join(str(message).split())}", file=sys.stderr)
    return code
