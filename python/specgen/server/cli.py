"""``specgen serve`` / ``python -m specgen.server``: command line (llama-server's and the specgen CLI's
flag names), one Generator, uvicorn on the chosen address with the limits of specgen.server.http_limits;
``--ray`` runs Ray Serve replicas instead (specgen.server.ray_serve)."""
from __future__ import annotations

import argparse
import sys
import warnings
from typing import Any, Dict, List, Optional

from specgen import flags
from specgen.server import llama_flags
from specgen.server.llama_flags import StrictArgumentParser, add_llama_server_flags
from specgen.server.security import load_api_keys


def build_parser() -> argparse.ArgumentParser:
    # Strict: `-ngl 99` is never `-n gl`, no flag matches by prefix, a usage error is one line.
    p = StrictArgumentParser(prog="specgen serve",
                             description="OpenAI-compatible HTTP server over specgen (speculative decoding).")
    a = p.add_argument
    a("-m", "--model", default=None, help="target GGUF (default: Gemma 3 270M from specgen[gemma])")
    a("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    a("--port", type=int, default=8080, help="port (default: 8080)")
    a("-a", "--alias", default=None, help="model id the API reports and accepts (default: the GGUF's file name)")
    a("-n", "--n-predict", type=int, default=-1, help="most tokens any request may generate, -1 = no cap (default: -1)")
    a("--chat-template", default=None, help="Jinja chat template FILE (or a shipped name: gemma3) instead of the GGUF's")
    a("--max-request-bytes", type=int, default=4 << 20, help="largest request body; bigger gets 413 (default: 4 MiB)")
    a("-s", "--seed", type=int, default=-1, help="default sampling seed of requests without one, -1 = random")
    # The engine's knobs, from its parameter table (sampling knobs come in each request's body).
    flags.add_engine_flags(p, scopes=("generator",))
    add_llama_server_flags(p)
    _add_security_flags(p)
    r = p.add_argument_group("scale-out (specgen[ray])")
    r.add_argument("--ray", action="store_true", help="serve through Ray Serve replicas (local Ray on loopback)")
    r.add_argument("--replicas", type=int, default=1, help="Ray Serve replicas, each one model and one server")
    p.add_argument("--log-level", default="warning", choices=["critical", "error", "warning", "info", "debug"])
    return p


def _add_security_flags(p: argparse.ArgumentParser) -> None:
    """The flags of a server you can expose (llama-server's names where it has the flag; SECURITY.md)."""
    from specgen.server.http_limits import HttpLimits

    d = HttpLimits()
    s = p.add_argument_group("security and limits")
    s.add_argument("--api-key", action="append", default=None, metavar="KEY",
                   help="require Authorization: Bearer KEY on every route but /health (repeat it, or comma-separate "
                        "keys, for several)")
    s.add_argument("--api-key-file", default=None, metavar="FNAME", help="API keys from a file, one per line")
    s.add_argument("--ssl-key-file", default=None, metavar="FNAME", help="PEM private key: serve HTTPS")
    s.add_argument("--ssl-cert-file", default=None, metavar="FNAME", help="PEM certificate chain: serve HTTPS")
    s.add_argument("-to", "--timeout", type=float, default=d.timeout, metavar="SECONDS",
                   help=f"read/write timeout: a request's head and body must arrive, and each write of the response go "
                        f"through, within it; the head within 60 s at most (default: {d.timeout:g})")
    s.add_argument("--keep-alive-timeout", type=float, default=d.keep_alive, metavar="SECONDS",
                   help=f"close an idle kept-alive connection after it (default: {d.keep_alive:g})")
    s.add_argument("--max-connections", type=int, default=d.max_connections, metavar="N",
                   help=f"open connections served; more get 503 with Retry-After (default: {d.max_connections})")
    s.add_argument("--disable-docs", action="store_true", help="no /docs, /redoc or /openapi.json")


def http_limits(ns: argparse.Namespace):
    """specgen.server.http_limits.HttpLimits from the flags (ValueError names a bad one)."""
    from specgen.server.http_limits import HttpLimits

    return HttpLimits(timeout=ns.timeout, keep_alive=ns.keep_alive_timeout, max_connections=ns.max_connections)


def tls_files(ns: argparse.Namespace) -> Dict[str, Optional[str]]:
    """--ssl-key-file and --ssl-cert-file, both or neither, both readable (ValueError otherwise)."""
    import os

    if (ns.ssl_key_file is None) != (ns.ssl_cert_file is None):
        raise ValueError("--ssl-key-file and --ssl-cert-file go together")
    for flag, path in (("--ssl-key-file", ns.ssl_key_file), ("--ssl-cert-file", ns.ssl_cert_file)):
        if path is not None and not os.path.isfile(path):
            raise ValueError(f"{flag} {path}: no such file")
    return {"ssl_keyfile": ns.ssl_key_file, "ssl_certfile": ns.ssl_cert_file}


def generator_kwargs(ns: argparse.Namespace, notes: Optional[List[str]] = None) -> Dict[str, Any]:
    """specgen.Generator keyword arguments from the parsed flags: without -md or --draft the server
    decodes with draft "auto"."""
    try:
        kw = dict(model=ns.model, seed=None if ns.seed < 0 else ns.seed,
                  **flags.generator_kwargs(ns, default_draft="auto", notes=notes))
        llama_flags.apply(ns, kw, notes if notes is not None else [])  # -hf, -ngl, -fa
    except ValueError as e:
        raise SystemExit(f"specgen serve: error: {e}") from None
    return kw


def app_kwargs(ns: argparse.Namespace) -> Dict[str, Any]:
    return dict(model_name=ns.alias, chat_template=ns.chat_template, n_slots=_engine_value(ns, "n_parallel"),
                queue_size=_engine_value(ns, "max_queued"), max_tokens_limit=ns.n_predict,
                max_request_bytes=ns.max_request_bytes, disable_docs=ns.disable_docs, timeout=ns.timeout,
                api_keys=load_api_keys(ns.api_key, ns.api_key_file),
                allowed_origins=llama_flags.allowed_origins(ns), strict_model=ns.strict_model)


def _engine_value(ns: argparse.Namespace, name: str) -> int:
    """A knob's parsed value, or the engine's default when the flag was not given."""
    value = getattr(ns, name)
    return int(value) if value is not None else int(next(s["default"] for s in flags.specs() if s["name"] == name))


def _fail(message: str, code: int = 1) -> int:
    print(f"specgen serve: error: {message}", file=sys.stderr)
    return code


def main(argv: Optional[List[str]] = None) -> int:
    ns = build_parser().parse_args(argv)
    for flag, value, lo in (("--replicas", ns.replicas, 1), ("--max-request-bytes", ns.max_request_bytes, 1),
                            ("-n/--n-predict", ns.n_predict, -1)):
        if value < lo:
            return _fail(f"{flag} must be >= {lo}, got {value}", 2)
    if not 0 <= ns.port <= 65535:
        return _fail(f"--port must be in [0, 65535], got {ns.port}", 2)
    try:
        limits, tls, served_kwargs = http_limits(ns), tls_files(ns), app_kwargs(ns)
    except ValueError as e:
        return _fail(str(e), 2)
    try:
        import fastapi  # noqa: F401
        import uvicorn
    except ImportError as e:
        return _fail(f'the server needs the server extra: pip install "specgen[server]" ({e})')
    from specgen.errors import SpecgenError

    notes: List[str] = []
    gen_kwargs = generator_kwargs(ns, notes)
    for note in notes if not ns.log_disable else ():
        print(f"specgen serve: note: {note}", file=sys.stderr)
    busy = llama_flags.check_port(ns.host, ns.port)  # before the model loads, not after
    if busy:
        return _fail(busy)
    if ns.log_disable:
        ns.log_level = "critical"
    if ns.ray:
        from specgen.server import ray_serve

        try:
            return ray_serve.serve_blocking(gen_kwargs, served_kwargs, host=ns.host, port=ns.port, replicas=ns.replicas,
                                            keep_alive_s=limits.keep_alive, **tls)
        except ImportError as e:
            return _fail(f'--ray needs the ray extra: pip install "specgen[ray]" ({e})')
        except RuntimeError as e:  # Ray could not be kept on 127.0.0.1
            return _fail(str(e))
    from specgen import Generator
    from specgen.server.app import create_app
    from specgen.server.http_limits import ensure_file_limit, uvicorn_config

    try:
        ensure_file_limit(limits)
        with warnings.catch_warnings(record=True) as load_warnings:
            warnings.simplefilter("always", RuntimeWarning)
            generator = Generator(**gen_kwargs)
        for w in load_warnings:  # one line each, as the CLI prints them
            print(f"specgen serve: warning: {w.message}", file=sys.stderr, flush=True)
        app = create_app(generator, **served_kwargs)
    except (SpecgenError, ValueError, OSError) as e:
        return _fail(str(e))
    scheme = "https" if tls["ssl_certfile"] else "http"
    if not ns.log_disable:
        print(f"specgen serve: {app.state.specgen.model_name} on {scheme}://{ns.host}:{ns.port} "
              f"({_engine_value(ns, 'n_parallel')} slot(s), n_ctx {generator.n_ctx}, draft {generator.draft or 'none'})", file=sys.stderr, flush=True)
    uvicorn.Server(uvicorn_config(app, host=ns.host, port=ns.port, limits=limits, log_level=ns.log_level, **tls)).run()
    return 0
