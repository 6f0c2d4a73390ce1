"""The server's Prometheus metrics (GET /metrics), vLLM's names under a ``specgen:`` prefix.

Speculation counters are the engine's own per-request stats summed (the numbers each response's
``usage.speculation`` carries), so a scrape before and after some requests differs by exactly their
stats. Each app has its own registry: several servers in one process (tests, Ray replicas) never share
or clash over metrics. The gauges of running and waiting requests are set from the engine just before
each scrape (``before_scrape``, the engine adapter's update_gauges), so they always say what the engine
holds at that moment.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client import CONTENT_TYPE_LATEST  # noqa: F401  (re-exported for the route)

P = "specgen:"
# Seconds; TTFT spans queueing + prefill, ITL one token's share of a step.
_TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0)
_ITL_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5)


class ServerMetrics:
    def __init__(self, model_name: str) -> None:
        self.before_scrape: Optional[Callable[[], None]] = None
        self.registry = CollectorRegistry()
        r, m = self.registry, ["model_name"]
        self.model_name = model_name
        self.requests_running = Gauge(P + "num_requests_running", "Requests holding an engine slot now", m, registry=r).labels(model_name)
        self.requests_waiting = Gauge(P + "num_requests_waiting", "Requests queued in the engine for a slot", m, registry=r).labels(model_name)
        self.kv_cache_usage = Gauge(P + "kv_cache_usage_perc", "Fraction of the KV cache's token rows in use (0..1)", m, registry=r).labels(model_name)
        self.prompt_tokens = Counter(P + "prompt_tokens", "Prompt tokens prefilled", m, registry=r).labels(model_name)
        self.generation_tokens = Counter(P + "generation_tokens", "Tokens generated", m, registry=r).labels(model_name)
        self.request_success = Counter(P + "request_success", "Requests finished, by finish reason", m + ["finished_reason"], registry=r)
        self.requests_rejected = Counter(P + "requests_rejected", "Requests refused because every slot and the queue were full", m, registry=r).labels(model_name)
        self.ttft = Histogram(P + "time_to_first_token_seconds", "Time from arrival to the first generated token", m,
                              buckets=_TTFT_BUCKETS, registry=r).labels(model_name)
        self.itl = Histogram(P + "inter_token_latency_seconds", "Time between generated tokens (a step's time shared by its tokens)", m,
                             buckets=_ITL_BUCKETS, registry=r).labels(model_name)
        self.e2e = Histogram(P + "e2e_request_latency_seconds", "Time from arrival to the last token", m, registry=r).labels(model_name)
        self.num_drafts = Counter(P + "spec_decode_num_drafts", "Speculation rounds that drafted at least one token", m, registry=r).labels(model_name)
        self.num_draft_tokens = Counter(P + "spec_decode_num_draft_tokens", "Tokens drafted", m, registry=r).labels(model_name)
        self.num_accepted_tokens = Counter(P + "spec_decode_num_accepted_tokens", "Drafted tokens the target accepted", m, registry=r).labels(model_name)
        self.accepted_per_pos = Counter(P + "spec_decode_num_accepted_tokens_per_pos", "Accepted drafted tokens by draft position",
                                        m + ["position"], registry=r)

    def record_finished(self, stats: Dict[str, Any], finish_reason: str) -> None:
        """A finished request's stats (StepStream.stats) into the counters."""
        n = self.model_name
        self.prompt_tokens.inc(int(stats.get("n_prompt_tokens", 0)))
        drafted_at = stats.get("drafted_at", [])
        self.num_drafts.inc(int(drafted_at[0]) if drafted_at else 0)
        self.num_draft_tokens.inc(int(stats.get("n_drafted", 0)))
        self.num_accepted_tokens.inc(int(stats.get("n_accepted", 0)))
        for pos, count in enumerate(stats.get("accepted_at", [])):
            self.accepted_per_pos.labels(n, str(pos)).inc(int(count))
        self.request_success.labels(n, finish_reason or "unknown").inc()

    def render(self) -> bytes:
        if self.before_scrape is not None:
            self.before_scrape()
        return generate_latest(self.registry)
