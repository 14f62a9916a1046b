"""Prometheus metrics, in a registry of their own (one per bot, so tests can run several):
``gpubot_*``, the process and Python collectors (``process_*``, ``python_*``), and, read at
scrape time, the Kubernetes API requests, the watch cache's figures and the sentinel's (GPUs
lost per node, open incidents, its detectors' CPU time)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Info,
    generate_latest,
)
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
    SummaryMetricFamily,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

from bot.version import version

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
        Info("gpubot_build", "The running gpubot.", registry=r).info({"version": version()})
        # What prometheus_client's default registry has: process_* (CPU, memory, open
        # file descriptors, start time), python_info, python_gc_*.
        if registry is None:
            ProcessCollector(registry=r)
            PlatformCollector(registry=r)
            GCCollector(registry=r)
        self.kube = KubeCollector()
        r.register(self.kube)
        self.sentinel = SentinelCollector()
        r.register(self.sentinel)

    def watch_pool(self, queued: Callable[[], float], running: Callable[[], float],
                   stuck: Callable[[], float]) -> None:
        self.queue_depth.set_function(queued)
        self.busy_workers.set_function(running)
        self.stuck_workers.set_function(stuck)

    def watch_cluster(self, view: Any) -> None:
        """Export the API requests and watch cache of ``view`` (a LiveView, or a wrapper
        of one with ``.view``); a snapshot has neither and exports nothing."""
        self.kube.view = view

    def watch_sentinel(self, sentinels: Callable[[], Mapping[str, Any]]) -> None:
        """Export the sentinels ``sentinels()`` returns (cluster name, ``""`` for the one
        cluster -> ``bot.sentinel.service.Sentinel``; empty while there is none) at each
        scrape."""
        self.sentinel.sentinels = sentinels

    def count(self, command: str, outcome: str) -> None:
        self.commands.labels(command=command, outcome=outcome).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)


class KubeCollector:
    """Read at each scrape from the live view's transports (the view's own and the watch
    cache's) and the watch cache's stores: counters live where the requests are made."""

    def __init__(self) -> None:
        self.view: Any = None

    def _live(self) -> Any:
        view = self.view
        for _ in range(4):  # SharedReads(LiveView), GuardedView(...): unwrap to the LiveView
            if view is None or hasattr(view, "transport"):
                return view
            view = getattr(view, "view", None)
        return None

    def describe(self) -> list[Metric]:
        return list(self._families())

    def collect(self) -> Iterator[Metric]:
        live = self._live()
        families = self._families()
        requests, retries, objects, synced, nbytes, relists = families
        if live is not None:
            cache = getattr(live, "cache", None)
            transports = [live.transport]
            if cache is not None and getattr(cache, "transport", None) is not live.transport:
                transports.append(cache.transport)
            totals: dict[tuple[str, str], int] = {}
            retried: dict[tuple[str, str], int] = {}
            for t in transports:
                by_code, by_reason = t.counts()
                for k, v in by_code.items():
                    totals[k] = totals.get(k, 0) + v
                for k, v in by_reason.items():
                    retried[k] = retried.get(k, 0) + v
            for (verb, code), n in sorted(totals.items()):
                requests.add_metric([verb, code], n)
            for (verb, reason), n in sorted(retried.items()):
                retries.add_metric([verb, reason], n)
            if cache is not None:
                for kind, figures in sorted(cache.stats()["kinds"].items()):
                    objects.add_metric([kind], figures["objects"])
                    synced.add_metric([kind], 1 if figures["synced"] else 0)
                    nbytes.add_metric([kind], figures["bytes"])
                    relists.add_metric([kind], figures["lists"])
        yield from families

    @staticmethod
    def _families() -> tuple[CounterMetricFamily, CounterMetricFamily, GaugeMetricFamily,
                             GaugeMetricFamily, GaugeMetricFamily, CounterMetricFamily]:
        return (
            CounterMetricFamily("gpubot_kube_api_requests",
                                "Kubernetes API requests, by verb (list, get, watch) and HTTP "
                                "code (error: no answer).", labels=("verb", "code")),
            CounterMetricFamily("gpubot_kube_api_retries",
                                "Kubernetes API requests retried, by verb and reason (429, "
                                "5xx code, dropped).", labels=("verb", "reason")),
            GaugeMetricFamily("gpubot_cache_objects",
                              "Objects the watch cache holds, by kind.", labels=("kind",)),
            GaugeMetricFamily("gpubot_cache_synced",
                              "1 when the watch cache's kind is listed and watched.",
                              labels=("kind",)),
            GaugeMetricFamily("gpubot_cache_bytes",
                              "Approximate JSON bytes the watch cache holds, by kind.",
                              labels=("kind",)),
            CounterMetricFamily("gpubot_cache_relists",
                                "Full lists of a kind: the first, and every one after a watch "
                                "expired (410 Gone) or broke.", labels=("kind",)),
        )


class SentinelCollector:
    """Read at each scrape from the sentinels: what their watchers see now, the open
    incidents they read from the store after their last tick, and their detectors' CPU
    time. Nothing while none runs. Several clusters: each series has a ``cluster`` label
    (two clusters may have a node of the same name)."""

    LOST = "gpu-capacity-lost"

    def __init__(self) -> None:
        self.sentinels: Callable[[], Mapping[str, Any]] = dict

    def describe(self) -> list[Metric]:
        return list(self._families(()))

    def collect(self) -> Iterator[Metric]:
        sentinels = dict(self.sentinels())
        by = ("cluster",) if any(sentinels) else ()
        lost, open_, seconds = families = self._families(by)
        for cluster, s in sentinels.items():
            first = [cluster] if by else []
            watcher = s.watcher
            # The sentinel's thread changes them: copied first (one C-level copy each).
            for obs in sorted((x.obs for x in dict(watcher.seen.get(self.LOST) or {}).values()),
                              key=lambda o: o.subject):
                lost.add_metric([*first, obs.node or "", obs.pool or ""], obs.gpus)
            counts = dict.fromkeys(watcher.seen, 0)
            for inc in s.open_now:
                counts[inc.detector] = counts.get(inc.detector, 0) + 1
            for name, n in sorted(counts.items()):
                open_.add_metric([*first, name], n)
            stats = watcher.stats
            for name, runs in sorted(dict(stats.runs).items()):
                seconds.add_metric([*first, name], count_value=runs,
                                   sum_value=stats.by_detector.get(name, 0.0))
        yield from families

    @staticmethod
    def _families(by: tuple[str, ...]
                  ) -> tuple[GaugeMetricFamily, GaugeMetricFamily, SummaryMetricFamily]:
        return (
            GaugeMetricFamily("gpubot_gpus_lost",
                              "GPUs a node has but does not offer to the scheduler, as the "
                              "sentinel sees them now (before lost_after opens an incident).",
                              labels=(*by, "node", "pool")),
            GaugeMetricFamily("gpubot_incidents_open",
                              "Open sentinel incidents by detector, as the store held them "
                              "after the sentinel's last tick.", labels=(*by, "detector")),
            SummaryMetricFamily("gpubot_sentinel_detector_seconds",
                                "Thread CPU time of each sentinel detector: one observation "
                                "per evaluation of the changed objects, or per Prometheus "
                                "poll.", labels=(*by, "detector")),
        )
