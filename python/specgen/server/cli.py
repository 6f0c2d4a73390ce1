"""``specgen serve`` / ``python -m specgen.server``: command line (llama-server's and the specgen CLI's
flag names), one Generator, uvicorn on the chosen address; ``--ray`` runs Ray Serve replicas instead
(specgen.ray_serve)."""
from __future__ import annotations

import argparse
import sys
from typing import Any, Dict, List, Optional


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="specgen serve", allow_abbrev=False,
                                description="OpenAI-compatible HTTP server over specgen (speculative decoding).")
    a = p.add_argument
    a("-m", "--model", default=None, help="target GGUF (default: Gemma 3 270M from specgen[gemma])")
    a("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    a("--port", type=int, default=8080, help="port (default: 8080)")
    a("-a", "--alias", default=None, help="model id the API reports and accepts (default: the GGUF's file name)")
    a("-np", "--parallel", type=int, default=1,
      help="request slots = sequences the engine decodes together (default: 1); more requests wait in the queue")
    a("-ctk", "--cache-type-k", choices=["f32", "f16", "q8_0"], default="f32", help="KV cache key type (default: f32)")
    a("-ctv", "--cache-type-v", choices=["f32", "f16", "q8_0"], default="f32", help="KV cache value type (default: f32)")
    a("--queue-size", type=int, default=64, help="requests that may wait for a slot before new ones get 503 (default: 64)")
    a("-n", "--n-predict", type=int, default=-1, help="most tokens any request may generate, -1 = no cap (default: -1)")
    a("--chat-template", default=None, help="Jinja chat template FILE (or a shipped name: gemma3) instead of the GGUF's")
    a("--max-request-bytes", type=int, default=4 << 20, help="largest request body; bigger gets 413 (default: 4 MiB)")
    a("-c", "--ctx-size", type=int, default=4096, help="context size in tokens (default: 4096)")
    a("-t", "--threads", type=int, default=None, help="compute threads (default: all cores, at most 8)")
    a("-td", "--threads-draft", type=int, default=None, help="SSD drafter threads")
    a("--device", default="cpu", help="cpu, cuda or cuda:N")
    a("-s", "--seed", type=int, default=-1, help="default sampling seed of requests without one, -1 = random")
    g = p.add_argument_group("speculative decoding (lossless)")
    g.add_argument("-md", "--model-draft", default=None, help="draft model GGUF with the target's vocabulary")
    g.add_argument("--draft", choices=["auto", "none", "self", "ngram"], default=None,
                   help="auto (the default without -md: the policy picks the method per request and round), none "
                        "(plain decoding), the target's first layers, or prompt lookup")
    g.add_argument("--draft-max", type=int, default=8)
    g.add_argument("--draft-min", type=int, default=0)
    g.add_argument("--draft-p-min", type=float, default=-1.0)
    g.add_argument("--self-layers", type=int, default=0)
    g.add_argument("--ngram-max", type=int, default=4)
    g.add_argument("--ngram-min", type=int, default=1)
    g.add_argument("--verify", choices=["token", "block"], default="block")
    g.add_argument("--nanospec", action="store_true")
    g.add_argument("--nanospec-capacity", type=int, default=3072)
    g.add_argument("--nanospec-topk", type=int, default=16)
    g.add_argument("--frspec", type=int, default=0)
    g.add_argument("--frspec-path", default=None)
    g.add_argument("--ssd", action="store_true")
    g.add_argument("--ssd-fanout", type=int, default=4)
    g.add_argument("--ssd-schedule", choices=["uniform", "geometric"], default="uniform")
    g.add_argument("--ssd-backup", choices=["neural", "fast"], default="neural")
    g.add_argument("--ssd-budget", type=int, default=-1)
    g.add_argument("--saguaro-c", type=float, default=1.0)
    r = p.add_argument_group("scale-out (specgen[ray])")
    r.add_argument("--ray", action="store_true", help="serve through Ray Serve replicas (local Ray on loopback)")
    r.add_argument("--replicas", type=int, default=1, help="Ray Serve replicas, each one model and one server")
    p.add_argument("--log-level", default="warning", choices=["critical", "error", "warning", "info", "debug"])
    return p


def generator_kwargs(ns: argparse.Namespace) -> Dict[str, Any]:
    """specgen.Generator keyword arguments from the parsed flags."""
    if ns.model_draft and ns.draft:
        raise SystemExit("specgen serve: error: give either -md/--model-draft or --draft, not both")
    draft = ns.model_draft or ns.draft or "auto"
    return dict(
        model=ns.model, draft=None if draft == "none" else draft, n_ctx=ns.ctx_size, n_threads=ns.threads,
        n_threads_draft=ns.threads_draft, device=ns.device, seed=None if ns.seed < 0 else ns.seed,
        verify=ns.verify, draft_max=ns.draft_max, draft_min=ns.draft_min, draft_p_min=ns.draft_p_min,
        self_layers=ns.self_layers, ngram_max=ns.ngram_max, ngram_min=ns.ngram_min, nanospec=ns.nanospec,
        nanospec_capacity=ns.nanospec_capacity, nanospec_topk=ns.nanospec_topk, frspec=ns.frspec,
        frspec_path=ns.frspec_path, ssd=ns.ssd, ssd_fanout=ns.ssd_fanout, ssd_fanout_schedule=ns.ssd_schedule,
        ssd_backup=ns.ssd_backup, ssd_budget=ns.ssd_budget, saguaro_c=ns.saguaro_c,
        n_parallel=max(1, ns.parallel), type_k=ns.cache_type_k, type_v=ns.cache_type_v,
    )


def app_kwargs(ns: argparse.Namespace) -> Dict[str, Any]:
    return dict(model_name=ns.alias, chat_template=ns.chat_template, n_slots=ns.parallel, queue_size=ns.queue_size,
                max_tokens_limit=ns.n_predict, max_request_bytes=ns.max_request_bytes)


def _fail(message: str, code: int = 1) -> int:
    print(f"specgen serve: error: {message}", file=sys.stderr)
    return code


def main(argv: Optional[List[str]] = None) -> int:
    ns = build_parser().parse_args(argv)
    for flag, value, lo in (("-np/--parallel", ns.parallel, 1), ("--queue-size", ns.queue_size, 0),
                            ("--replicas", ns.replicas, 1), ("--max-request-bytes", ns.max_request_bytes, 1),
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

    gen_kwargs = generator_kwargs(ns)
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
          f"({ns.parallel} slot(s), n_ctx {generator.n_ctx}, draft {generator.draft or 'none'})", file=sys.stderr, flush=True)
    uvicorn.run(app, host=ns.host, port=ns.port, log_level=ns.log_level, access_log=False,
                timeout_graceful_shutdown=5)
    return 0
