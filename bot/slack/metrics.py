"""Prometheus metrics, all named ``gpubot_*``, in a registry of their own (one per bot, so
tests can run several)."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

# outcome label values of gpubot_commands_total
OUTCOMES = ("answered", "usage_error", "not_found", "refused", "rate_limited", "busy",
            "timeout", "error", "duplicate", "help")


class Metrics:
    content_type = CONTENT_TYPE_LATEST

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry(auto_describe=True)
        r = self.registry
        self.commands = Counter(
            "gpubot_commands", "Slash commands and buttons, by subcommand and outcome.",
            ("command", "outcome"), registry=r)
        self.diagnosis_seconds = Histogram(
            "gpubot_diagnosis_seconds", "Time a diagnosis ran (queue wait excluded).",
            ("command",), registry=r,
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120))
        self.answer_seconds = Histogram(
            "gpubot_answer_seconds", "From the request to the answer posted in Slack.",
            ("command",), registry=r, buckets=(0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120))
        self.slack_api_errors = Counter(
            "gpubot_slack_api_errors", "Slack Web API calls that failed, by method and error.",
            ("method", "error"), registry=r)
        self.slack_api_retries = Counter(
            "gpubot_slack_api_retries", "Slack Web API calls retried (429 and connection errors).",
            ("reason",), registry=r)
        self.duplicates = Counter(
            "gpubot_duplicate_deliveries", "Requests dropped as repeated deliveries.",
            ("why",), registry=r)
        self.truncated = Counter(
            "gpubot_truncated_messages", "Messages cut to Block Kit limits (full report attached).",
            registry=r)
        self.queue_depth = Gauge("gpubot_pool_queued", "Diagnoses waiting for a worker.",
                                 registry=r)
        self.busy_workers = Gauge("gpubot_pool_running", "Diagnoses running.", registry=r)
        self.stuck_workers = Gauge("gpubot_pool_stuck",
                                   "Workers stuck past their deadline (replaced).", registry=r)
        self.slack_connected = Gauge("gpubot_slack_connected",
                                     "1 when Slack is connected (Socket Mode) or reachable.",
                                     registry=r)
        self.cluster_reachable = Gauge("gpubot_cluster_reachable",
                                       "1 when the last cluster probe succeeded.", registry=r)

    def watch_pool(self, queued: Callable[[], float], running: Callable[[], float],
                   stuck: Callable[[], float]) -> None:
        self.queue_depth.set_function(queued)
        self.busy_workers.set_function(running)
        self.stuck_workers.set_function(stuck)

    def count(self, command: str, outcome: str) -> None:
        self.commands.labels(command=command, outcome=outcome).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)
