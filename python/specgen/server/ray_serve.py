"""Scale-out on Ray Serve: N replicas of the specgen server behind Ray Serve's HTTP proxy and router
(the ``specgen[ray]`` extra). Each replica loads the model once and runs the same FastAPI app as
``specgen serve`` (specgen.server.app), so the routes, errors, streams and API keys are the same; Ray
does the routing, health checks and restarts. No cluster code of specgen's own.

    specgen serve --ray --replicas 2 -m model.gguf --port 8000     # a local Ray, every process on 127.0.0.1
    SPECGEN_SERVE_ARGS="-m model.gguf -t 1" serve run specgen.ray_serve:app
    serve run specgen.ray_serve:app_builder model=model.gguf replicas=2

(specgen.ray_serve holds the two ``serve run`` entry points: it reads ``specgen serve``'s flags, which
this module does not, so specgen.server.cli can import this one without a cycle.) /metrics is per
replica (the router picks one): scrape the replicas, or use Ray's own metrics. ``--ray`` gives Ray's
proxy TLS and the keep-alive timeout; the head timeout and --max-connections are uvicorn's in
``specgen serve`` and Ray's proxy has no equivalent (SECURITY.md).
"""
from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any, Dict, Optional

DEPLOYMENT_NAME = "specgen"
# Ray's single-machine mode (its default on macOS and Windows): the node's address is the loopback
# one, so the GCS, raylets, workers, agents and the dashboard all listen on 127.0.0.1 only. Read when
# ray is imported, and inherited by every Ray process.
LOCAL_ONLY_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}


def _replica_grpc_on_loopback() -> None:
    """In a replica of a Ray node on loopback: Ray Serve starts the replica's inter-deployment gRPC
    server on "[::]:0", every interface, whatever the node's address (ray/serve/_private/replica.py
    passes that address to its module's add_port_to_grpc_server, with no setting for it). Bind it to
    127.0.0.1, the address the node advertises and the proxy dials. Runs before the replica starts
    that server (the ingress app is built first); tests/test_ray_serve.py checks every socket."""
    import ray

    if ray.util.get_node_ip_address() not in ("127.0.0.1", "::1"):
        return  # a cluster someone else runs (serve run specgen.ray_serve:app): its addresses, its choice
    try:
        from ray.serve._private import replica
    except ImportError:
        return
    add_port = getattr(replica, "add_port_to_grpc_server", None)
    if add_port is None or getattr(add_port, "specgen_loopback", False):
        return

    def add_port_on_loopback(server, address: str):
        host, _, port = address.rpartition(":")
        return add_port(server, f"127.0.0.1:{port}" if host in ("[::]", "0.0.0.0", "") else address)

    add_port_on_loopback.specgen_loopback = True
    replica.add_port_to_grpc_server = add_port_on_loopback


def _asgi_builder(generator_kwargs: Dict[str, Any], app_kwargs: Dict[str, Any]):
    def build_asgi_app():
        # Runs in the replica: its own Generator, its own engine adapter and metrics.
        from specgen import Generator
        from specgen.server.app import create_app

        _replica_grpc_on_loopback()

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


def _start_local_ray(num_cpus: int) -> None:
    """A Ray instance on this machine with every process on loopback (LOCAL_ONLY_ENV); RuntimeError
    when ray was imported before that could take effect."""
    os.environ.update(LOCAL_ONLY_ENV)
    import ray
    from ray._private import ray_constants

    if ray_constants.ENABLE_RAY_CLUSTER:
        raise RuntimeError("ray was imported before specgen could keep it on 127.0.0.1: start specgen serve --ray "
                           "in a fresh process, or set RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0")
    ray.init(num_cpus=num_cpus, include_dashboard=False, dashboard_host="127.0.0.1", _node_ip_address="127.0.0.1",
             log_to_driver=False, configure_logging=False)
    node_ip = ray.util.get_node_ip_address()
    if node_ip not in ("127.0.0.1", "::1"):
        ray.shutdown()
        raise RuntimeError(f"Ray bound its node to {node_ip}, not 127.0.0.1")


def serve_blocking(generator_kwargs: Dict[str, Any], app_kwargs: Dict[str, Any], *, host: str, port: int,
                   replicas: int, keep_alive_s: float = 5.0, ssl_keyfile: Optional[str] = None,
                   ssl_certfile: Optional[str] = None) -> int:
    """``specgen serve --ray``: a local Ray instance on loopback (``host`` for the HTTP proxy), the
    replicas, then wait until SIGINT/SIGTERM and shut everything down."""
    num_cpus = max(2, replicas)
    _start_local_ray(num_cpus)  # before anything imports ray
    import ray
    from ray import serve

    stop = {"now": False}

    def on_signal(signum, frame):
        stop["now"] = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        http = {"host": host, "port": port, "keep_alive_timeout_s": int(max(1, round(keep_alive_s)))}
        if ssl_certfile:
            http.update(ssl_keyfile=ssl_keyfile, ssl_certfile=ssl_certfile)
        serve.start(http_options=http)
        serve.run(build_app(generator_kwargs, app_kwargs, replicas=replicas, num_cpus_per_replica=num_cpus / replicas),
                  name="specgen", route_prefix="/")
        scheme = "https" if ssl_certfile else "http"
        print(f"specgen serve --ray: {replicas} replica(s) on {scheme}://{host}:{port}", file=sys.stderr, flush=True)
        while not stop["now"]:
            time.sleep(0.2)
    finally:
        try:
            serve.shutdown()
        finally:
            ray.shutdown()
    return 0
