"""Runtime health from metrics (Prometheus, DCGM, kube-state-metrics).

Handlers see metrics only through ``MetricsSource`` (``source.py``): queries in, plain
samples out. ``bot/metrics`` implements it over Prometheus's HTTP API; tests use a fake.
"""
