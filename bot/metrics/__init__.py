"""Metrics backends for handlers' ``MetricsSource`` (``handlers/runtime/source.py``)."""

from bot.metrics.prometheus import PrometheusConfig, PrometheusMetrics
from handlers.registry import COMMANDS

# Commands whose diagnoses read metrics (``CommandSpec.metrics``).
METRIC_COMMANDS = frozenset(spec.name for spec in COMMANDS.values() if spec.metrics)

__all__ = ["METRIC_COMMANDS", "PrometheusConfig", "PrometheusMetrics"]
