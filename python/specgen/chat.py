"""``specgen -cnv`` / ``specgen -i`` (or ``python -m specgen.chat``): chat with a model in the terminal,
as llama.cpp's conversation mode does. The native CLI hands its whole command line here, because
chat templates are Jinja (specgen.chat_template renders them in a sandbox).

Each line read from stdin is a user turn (a line ending in ``\\`` continues on the next one); the
model's answer streams to stdout; end of input (Ctrl-D) ends the chat. ``-sys`` gives the system
message, ``-p`` a first user turn, ``--chat-template`` a template file or built-in name instead of the
GGUF's. Every engine knob is the native CLI's flag (specgen.flags, from the parameter table).
"""
from __future__ import annotations

import argparse
import sys
from typing import Any, Dict, List, Optional

from specgen import flags

PROG = "specgen -cnv"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2, as the native CLI
        print(f"specgen: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, allow_abbrev=False, description="Chat with a GGUF model (llama.cpp's -cnv).")
    a = p.add_argument
    a("-m", "--model", default=None, help="target GGUF (default: Gemma 3 270M from specgen[gemma])")
    a("-hf", "-hfr", "--hf-repo", dest="hf_repo", default=None, help="a Hub reference, org/repo:QUANT")
    a("-p", "--prompt", default=None, help="the first user turn")
    a("-f", "--file", default=None, help="read the first user turn from FILE")
    a("-sys", "--system-prompt", dest="system_prompt", default=None, help="the system message")
    a("--chat-template", default=None, help="a Jinja template FILE or a built-in name (default: the GGUF's)")
    a("-cnv", "--conversation", "-i", "--interactive", "-if", "--interactive-first", dest="conversation",
      action="store_true", help="chat (this mode)")
    a("-no-cnv", "--no-conversation", dest="conversation", action="store_false", help=argparse.SUPPRESS)
    a("--jinja", action="store_true", help="accepted (templates are always Jinja here)")
    a("-fa", "--flash-attn", nargs="?", const="on", choices=["on", "off", "auto"], default=None,
      help="accepted and ignored")
    a("-ngl", "--n-gpu-layers", "--gpu-layers", dest="n_gpu_layers", type=int, default=None,
      help="N > 0: the whole model on CUDA when a GPU is usable, else the CPU with a warning")
    a("--no-perf", action="store_true", help="no timing line after each answer")
    a("--log-disable", action="store_true", help="nothing on stderr but errors")
    flags.add_engine_flags(p, scopes=("generator", "generate"))
    return p


def _read_turn() -> Optional[str]:
    """One user turn from stdin (``\\`` at a line's end continues it); None at end of input."""
    lines: List[str] = []
    while True:
        if sys.stdin.isatty():
            print("> " if not lines else "", end="", flush=True)
        line = sys.stdin.readline()
        if not line:
            return "\n".join(lines) if lines else None
        line = line.rstrip("\n")
        if line.endswith("\\"):
            lines.append(line[:-1])
            continue
        lines.append(line)
        return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    ns = build_parser().parse_args(argv)
    quiet = ns.log_disable

    def note(text: str) -> None:
        if not quiet:
            print(f"specgen: note: {text}", file=sys.stderr)

    from specgen import Generator
    from specgen.chat_template import template_for
    from specgen.errors import SpecgenError

    notes: List[str] = []
    try:
        kw = flags.generator_kwargs(ns, notes=notes)
    except ValueError as e:
        print(f"specgen: error: {e}", file=sys.stderr)
        return 2
    kw["model"] = ns.model
    try:
        flags.fold_llama_cpp_flags(ns, kw, notes)
    except ValueError as e:
        print(f"specgen: error: {e}", file=sys.stderr)
        return 2
    for n in notes:
        note(n)
    gen_kw: Dict[str, Any] = flags.generate_kwargs(ns)
    try:
        first = ns.prompt
        if ns.file is not None:
            with open(ns.file, encoding="utf-8") as fh:
                first = fh.read().rstrip("\n")
        g = Generator(**kw)
        template = template_for(g, ns.chat_template)
    except (SpecgenError, OSError, ValueError) as e:
        print(f"specgen: error: {' '.join(str(e).split())}", file=sys.stderr)
        return 1

    messages: List[Dict[str, str]] = []
    if ns.system_prompt:
        messages.append({"role": "system", "content": ns.system_prompt})
    turn = first
    try:
        while True:
            if turn is None:
                turn = _read_turn()
                if turn is None:
                    break
            messages.append({"role": "user", "content": turn})
            text = template.render(messages, add_generation_prompt=True)
            tokens = g.tokenize(text, add_bos=False, special=True)
            stream = g.generate(tokens, stream=True, **gen_kw)
            answer = []
            for piece in stream:
                answer.append(piece)
                sys.stdout.write(piece)
                sys.stdout.flush()
            sys.stdout.write("\n")
            sys.stdout.flush()
            messages.append({"role": "assistant", "content": "".join(answer)})
            if not (ns.no_perf or quiet):
                s = stream.stats
                print(f"specgen: {s.n_generated} tokens, {s.decode_tokens_per_second:.1f} tokens per second, "
                      f"finish reason {stream.finish_reason}", file=sys.stderr)
            turn = None
    except KeyboardInterrupt:
        return 130
    except SpecgenError as e:
        print(f"specgen: error: {' '.join(str(e).split())}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
