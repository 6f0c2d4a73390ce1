"""``specgen serve`` / ``python -m specgen.server``: command line (llama-server's and the specgen CLI's
flag names), one Generator, uvicorn on the chosen address; ``--ray`` runs Ray Serve replicas instead
(specgen.ray_serve)."""
from __future__ import annotations

import argparse
import sys
from typing import Any, Dict, List, Optional

from specgen import flags


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="specgen serve", allow_abbrev=False,
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
    r = p.add_argument_group("scale-out (specgen[ray])")
    r.add_argument("--ray", action="store_true", help="serve through Ray Serve replicas (local Ray on loopback)")
    r.add_argument("--replicas", type=int, default=1, help="Ray Serve replicas, each one model and one server")
    p.add_argument("--log-level", default="warning", choices=["critical", "error", "warning", "info", "debug"])
    return p


def generator_kwargs(ns: argparse.Namespace, notes: Optional[List[str]] = None) -> Dict[str, Any]:
    """specgen.Generator keyword arguments from the parsed flags: without -md or --draft the server
    decodes with draft "auto"."""
    try:
        kw = flags.generator_kwargs(ns, default_draft="auto", notes=notes)
    except ValueError as e:
        raise SystemExit(f"specgen serve: error: {e}") from None
    return dict(model=ns.model, seed=None if ns.seed < 0 else ns.seed, **kw)


def app_kwargs(ns: argparse.Namespace) -> Dict[str, Any]:
    return dict(model_name=ns.alias, chat_template=ns.chat_template, n_slots=_engine_value(ns, "n_parallel"),
                queue_size=_engine_value(ns, "max_queued"), max_tokens_limit=ns.n_predict,
                max_request_bytes=ns.max_request_bytes)


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
        import fastapi  # noqa: F401
        import uvicorn
    except ImportError as e:
        return _fail(f'the server needs the server extra: pip install "specgen[server]" ({e})')
    from specgen.errors import SpecgenError

    notes: List[str] = []
    gen_kwargs = generator_kwargs(ns, notes)
    for note in notes:
        print(f"specgen serve: note: {note}", file=sys.stderr)
    if ns.ray:
        from specgen import ray_serve

        try:
            return ray_serve.serve_blocking(gen_kwargs, app_kwargs(ns), host=ns.host, port=ns.port, replicas=ns.replicas)
        except ImportError as e:
            return _fail(f'--ray needs the ray extra: pip install "specgen[ray]" ({e})')
    from specgen import Generator
    from specgen.server.app import create_app

    try:
        generator = Generator(**gen_kwargs)
        app = create_app(generator, **app_kwargs(ns))
    except (SpecgenError, ValueError, OSError) as e:
        return _fail(str(e))
    print(f"specgen serve: {app.state.specgen.model_name} on http://{ns.host}:{ns.port} "
          f"({_engine_value(ns, 'n_parallel')} slot(s), n_ctx {generator.n_ctx}, draft {generator.draft or 'none'})", file=sys.stderr, flush=True)
    uvicorn.run(app, host=ns.host, port=ns.port, log_level=ns.log_level, access_log=False,
                timeout_graceful_shutdown=5)
    return 0
