"""Metrics backends for handlers' ``MetricsSource`` (``handlers/runtime/source.py``)."""

from bot.metrics.prometheus import PrometheusConfig, PrometheusMetrics

__all__ = ["PrometheusConfig", "PrometheusMetrics"]
