"""``specgen serve``'s llama-server habits: its command-line flags, parsed the way llama.cpp users type
them, and the checks that run before the model is loaded.

- ``StrictArgumentParser``: no option is matched by a prefix, and a multi-letter single-dash flag is
  never read as a one-letter flag plus text (argparse read ``-ngl 99`` as ``-n gl`` and ``-hf x`` as
  ``-h`` with "f"); ``-n16`` / ``-t2`` still work. A usage error is one line and exit code 2.
- ``add_llama_server_flags``: ``-hf/--hf-repo`` (a Hub reference, as ``-m org/repo:QUANT``),
  ``--allowed-origins`` (CORS, off without it), ``--strict-model`` (404 for another model name; by default
  any name is served, as llama-server serves whatever it loaded), ``-ngl/--n-gpu-layers`` (N != 0: the
  whole model on CUDA when a device is usable, else the CPU with a note), ``-fa`` (accepted and ignored
  with a note), ``--jinja`` (accepted: templates are always Jinja), ``--log-disable``, ``--no-perf``.
- ``check_port``: binds host:port the way uvicorn will, before the model loads, so a port in use is one
  line at once instead of an error after the load and the announced URL.
"""
from __future__ import annotations

import argparse
import errno
import socket
import sys
from typing import Any, List, Optional

from specgen.flags import fold_llama_cpp_flags


class StrictArgumentParser(argparse.ArgumentParser):
    """argparse without prefix matching or one-letter flags glued to letters (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)

    def _get_option_tuples(self, option_string: str):
        # argparse's candidates are prefix matches and "-x" + attached text; only the attached form with a
        # value that does not start with a letter survives ("-n16", "-t=2" is handled before this).
        kept = []
        for candidate in super()._get_option_tuples(option_string):
            flag, attached = candidate[1], candidate[-1]
            if flag == option_string[:2] and attached and attached == option_string[2:] and not attached[0].isalpha():
                kept.append(candidate)
        return kept

    def error(self, message: str):
        print(f"{self.prog}: error: {message} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(2)


def add_llama_server_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("llama-server compatibility")
    g.add_argument("-hf", "-hfr", "--hf-repo", dest="hf_repo", default=None, metavar="ORG/REPO[:QUANT]",
                   help="a model on the Hugging Face Hub (as -m ORG/REPO:QUANT; QUANT defaults to Q4_K_M)")
    g.add_argument("--allowed-origins", action="append", default=None, metavar="ORIGINS",
                   help="browser origins allowed to call the API (CORS), comma-separated or repeated; '*' for any "
                        "(default: none, CORS off)")
    g.add_argument("--strict-model", action="store_true",
                   help="a request naming another model than -a/--alias (or the GGUF's file name) gets 404, for "
                        "multi-model setups behind a router (default: any name is served, as llama-server does)")
    g.add_argument("-ngl", "--n-gpu-layers", "--gpu-layers", dest="n_gpu_layers", type=int, default=None, metavar="N",
                   help="N != 0: the whole model on CUDA when a device is usable, else the CPU with a note")
    g.add_argument("-fa", "--flash-attn", dest="flash_attn", nargs="?", const="on", choices=["on", "off", "auto"],
                   default=None, help="accepted and ignored (attention is one fused pass here)")
    g.add_argument("--jinja", action="store_true", help="accepted: chat templates are always Jinja here")
    g.add_argument("--log-disable", action="store_true", help="print nothing but errors")
    g.add_argument("--no-perf", action="store_true", help="accepted: the server prints no per-request timings")


def allowed_origins(ns: argparse.Namespace) -> List[str]:
    return [o.strip() for value in ns.allowed_origins or () for o in value.split(",") if o.strip()]


# -hf, -fa and -ngl fold into the Generator's keywords as in the CLI's chat mode (one place).
apply = fold_llama_cpp_flags


def check_port(host: str, port: int) -> Optional[str]:
    """None when uvicorn will be able to listen on host:port, else why not (one line). Binds with
    SO_REUSEADDR as uvicorn does, so only a live listener counts as "in use"."""
    if port == 0:
        return None
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as e:
        return f"--host {host}: cannot resolve it ({e.strerror})"
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(address)
        except OSError as e:
            why = "already in use" if e.errno == errno.EADDRINUSE else e.strerror
            return f"cannot listen on {host}:{port}: {why} (choose another --port)"
    return None
