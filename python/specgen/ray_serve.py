"""``serve run`` entry points for Ray Serve (the deployment itself is specgen.server.ray_serve):

    SPECGEN_SERVE_ARGS="-m model.gguf -t 1" serve run specgen.ray_serve:app
    serve run specgen.ray_serve:app_builder model=model.gguf replicas=2

Both read ``specgen serve``'s flags (specgen.server.cli); the deployment module does not, so the CLI
imports it without an import cycle.
"""
from __future__ import annotations

import os
import shlex
from typing import Dict, List

from specgen.server.ray_serve import DEPLOYMENT_NAME, build_app, serve_blocking  # noqa: F401  (re-exported)


def app_from_args(argv: List[str]):
    """The Application for ``specgen serve`` flags (model, speculation, -np, --replicas, --api-key, ...)."""
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


# `serve run specgen.ray_serve:app`: flags from $SPECGEN_SERVE_ARGS (the model loads in the replicas).
try:
    app = app_from_args(shlex.split(os.environ.get("SPECGEN_SERVE_ARGS", "")))
except ImportError:  # ray not installed: importing this module still works (app_builder etc. fail)
    app = None
