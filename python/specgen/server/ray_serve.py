"""Scale-out on Ray Serve: N replicas of the specgen server behind Ray Serve's HTTP proxy and router
(the ``specgen[ray]`` extra). Each replica loads the model once and runs the same FastAPI app as
``specgen serve`` (specgen.server.app), so the routes, errors and streams are the same; Ray does the
routing, health checks and restarts. No cluster code of specgen's own.

    specgen serve --ray --replicas 2 -m model.gguf --port 8000     # local Ray on 127.0.0.1
    SPECGEN_SERVE_ARGS="-m model.gguf -t 1" serve run specgen.ray_serve:app
    serve run specgen.ray_serve:app_builder model=model.gguf replicas=2

/metrics is per replica (the router picks one): scrape the replicas, or use Ray's own metrics.
"""
from __future__ import annotations

import os
import shlex
import signal
import sys
import time
from typing import Any, Dict, List, Optional

DEPLOYMENT_NAME = "specgen"


def _asgi_builder(generator_kwargs: Dict[str, Any], app_kwargs: Dict[str, Any]):
    def build_asgi_app():
        # Runs in the replica: its own Generator, its own engine adapter and metrics.
        from specgen import Generator
        from specgen.server.app import create_app

        return create_app(Generator(**generator_kwargs), **app_kwargs)

    return build_asgi_app


def build_app(generator_kwargs: Dict[str, Any], app_kwargs: Dict[str, Any], replicas: int = 1,
              num_cpus_per_replica: float = 1.0):
    """A Ray Serve Application of ``replicas`` specgen servers (nothing is loaded until it runs)."""
    from ray import serve

    ingress = serve.ingress(_asgi_builder(generator_kwargs, app_kwargs))()
    deployment = serve.deployment(ingress, name=DEPLOYMENT_NAME, num_replicas=replicas,
                                  ray_actor_options={"num_cpus": num_cpus_per_replica},
                                  max_ongoing_requests=max(1, app_kwargs.get("n_slots", 1) + app_kwargs.get("queue_size", 64)))
    return deployment.bind()


def app_from_args(argv: List[str]):
    """The Application for ``specgen serve`` flags (model, speculation, -np, --replicas, ...)."""
    from specgen.server.cli import app_kwargs, build_parser, generator_kwargs

    ns = build_parser().parse_args(argv)
    return build_app(generator_kwargs(ns), app_kwargs(ns), replicas=ns.replicas)


def app_builder(args: Dict[str, str]):
    """``serve run specgen.ray_serve:app_builder key=value ...``: the keys are ``specgen serve``'s long
    flags without dashes (model=..., replicas=2, threads=1, draft=ngram)."""
    argv: List[str] = []
    for key, value in args.items():
        flag = "--" + key.replace("_", "-")
        argv += [flag] if value in ("true", "True", "") else [flag, str(value)]
    return app_from_args(argv)


def serve_blocking(generator_kwargs: Dict[str, Any], app_kwargs: Dict[str, Any], *, host: str, port: int,
                   replicas: int) -> int:
    """``specgen serve --ray``: a local Ray instance on loopback (``host`` for the HTTP proxy), the
    replicas, then wait until SIGINT/SIGTERM and shut everything down."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray
    from ray import serve

    ray.init(num_cpus=max(2, replicas), include_dashboard=False, _node_ip_address="127.0.0.1",
             log_to_driver=False, configure_logging=False)
    stop = {"now": False}

    def on_signal(signum, frame):
        stop["now"] = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        serve.start(http_options={"host": host, "port": port})
        serve.run(build_app(generator_kwargs, app_kwargs, replicas=replicas, num_cpus_per_replica=max(2, replicas) / replicas),
                  name="specgen", route_prefix="/")
        print(f"specgen serve --ray: {replicas} replica(s) on http://{host}:{port}", file=sys.stderr, flush=True)
        while not stop["now"]:
            time.sleep(0.2)
    finally:
        try:
            serve.shutdown()
        finally:
            ray.shutdown()
    return 0


# `serve run specgen.ray_serve:app`: flags from $SPECGEN_SERVE_ARGS (the model loads in the replicas).
try:
    app = app_from_args(shlex.split(os.environ.get("SPECGEN_SERVE_ARGS", "")))
except ImportError:  # ray not installed: importing this module still works (app_builder etc. fail)
    app = None
