"""Metrics backends for handlers' ``MetricsSource`` (``handlers/runtime/source.py``)."""

from bot.metrics.prometheus import PrometheusConfig, PrometheusMetrics

# Commands whose diagnoses read metrics. pending runs why-pending per workload and shows
# each one's root cause from the cluster alone; quota has its own figures.
METRIC_COMMANDS = frozenset({"why-pending", "doctor", "nodes"})

__all__ = ["METRIC_COMMANDS", "PrometheusConfig", "PrometheusMetrics"]
