"""Prometheus's HTTP API (``/api/v1/query``, ``/api/v1/query_range``) over httpx.

    prom = PrometheusMetrics(PrometheusConfig("http://prometheus:9090", timeout=5))
    prom.instant('DCGM_FI_DEV_XID_ERRORS != 0')     # [Sample(labels, value)]
    prom.range("sum(kube_node_status_allocatable)", seconds=3600, step=60)

Every failure (unreachable, TLS, 401/403, timeout, a PromQL error, a body that is not the
API's JSON) raises ``MetricsError`` naming the server and what went wrong, never a token.
Each query has its own timeout; the query also carries it to Prometheus (``timeout=``) so
the server stops evaluating when we stop waiting.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from handlers.runtime.source import MetricsError, Sample, Series


@dataclass(frozen=True)
class PrometheusConfig:
    url: str
    timeout: float = 5.0  # seconds per query
    bearer_token: str | None = field(default=None, repr=False)
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    ca_file: str | None = None
    insecure: bool = False  # skip TLS verification (test clusters only)
    idle_window: str = "1h"
    idle_threshold: float = 5.0  # percent


class PrometheusMetrics:
    """A ``MetricsSource`` over one Prometheus (or a compatible API: Thanos, Mimir)."""

    def __init__(self, config: PrometheusConfig, *, transport: httpx.BaseTransport | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self._clock = clock
        auth: httpx.Auth | None = None
        headers = {"Accept": "application/json"}
        if config.bearer_token:
            headers["Authorization"] = f"Bearer {config.bearer_token}"
        elif config.username is not None:
            auth = httpx.BasicAuth(config.username, config.password or "")
        verify: Any = False if config.insecure else (config.ca_file or True)
        if isinstance(verify, str):
            import ssl

            try:
                verify = ssl.create_default_context(cafile=verify)
            except (OSError, ssl.SSLError) as err:
                raise MetricsError(f"cannot read the Prometheus CA file {config.ca_file}: "
                                   f"{err}") from err
        self._client = httpx.Client(
            base_url=config.url.rstrip("/"), headers=headers, auth=auth, verify=verify,
            timeout=httpx.Timeout(config.timeout), transport=transport,
            follow_redirects=False)

    @property
    def source(self) -> str:
        return f"prometheus {self.config.url}"

    @property
    def idle_window(self) -> str:
        return self.config.idle_window

    @property
    def idle_threshold(self) -> float:
        return self.config.idle_threshold

    def close(self) -> None:
        self._client.close()

    def instant(self, query: str) -> list[Sample]:
        data = self._get("/api/v1/query", {"query": query})
        kind, result = data.get("resultType"), data.get("result")
        if kind == "scalar" and isinstance(result, list):
            return [Sample({}, _value(result))]
        if kind != "vector" or not isinstance(result, list):
            raise MetricsError(f"{self.source}: expected a vector for {query!r}, got {kind}")
        return [Sample(_labels(r), _value(r.get("value"))) for r in result
                if isinstance(r, dict)]

    def range(self, query: str, seconds: float, step: float) -> list[Series]:
        end = self._clock()
        data = self._get("/api/v1/query_range", {
            "query": query, "start": f"{end - seconds:.3f}", "end": f"{end:.3f}",
            "step": f"{max(step, 1.0):g}"})
        result = data.get("result")
        if data.get("resultType") != "matrix" or not isinstance(result, list):
            raise MetricsError(f"{self.source}: expected a matrix for {query!r}")
        return [Series(_labels(r), tuple((float(t), _value([t, v]))
                                         for t, v in r.get("values") or []))
                for r in result if isinstance(r, dict)]

    def _get(self, path: str, params: dict[str, str]) -> dict[str, Any]:
        params = {**params, "timeout": f"{self.config.timeout:g}s"}
        try:
            resp = self._client.get(path, params=params)
        except httpx.TimeoutException as err:
            raise MetricsError(f"{self.source} did not answer within "
                               f"{self.config.timeout:g}s") from err
        except httpx.HTTPError as err:  # connection refused, DNS, TLS
            raise MetricsError(f"{self.source} cannot be reached: "
                               f"{type(err).__name__}: {_reason(err)}") from err
        if resp.status_code in (401, 403):
            raise MetricsError(f"{self.source} refused our credentials (HTTP "
                               f"{resp.status_code})")
        try:
            body = resp.json()
        except ValueError:
            raise MetricsError(f"{self.source} answered HTTP {resp.status_code} with a body "
                               "that is not Prometheus API JSON") from None
        if not isinstance(body, dict):
            raise MetricsError(f"{self.source} answered with unexpected JSON")
        if body.get("status") != "success":
            raise MetricsError(f"{self.source} answered {body.get('errorType', 'error')}: "
                               f"{str(body.get('error', ''))[:300]}")
        data = body.get("data")
        if not isinstance(data, dict):
            raise MetricsError(f"{self.source} answered without data")
        return data


def _labels(r: dict[str, Any]) -> dict[str, str]:
    m = r.get("metric")
    return {str(k): str(v) for k, v in m.items()} if isinstance(m, dict) else {}


def _value(pair: Any) -> float:
    try:
        v = float(pair[1])
    except (TypeError, ValueError, IndexError) as err:
        raise MetricsError(f"unreadable sample value {pair!r}") from err
    return 0.0 if math.isnan(v) else v


def _reason(err: Exception) -> str:
    text = str(err) or "no detail"
    return text[:200]


# Credentials only from the environment (as the Slack tokens): never a flag or a file.
ENV_TOKEN = "GPUBOT_PROMETHEUS_TOKEN"
ENV_PASSWORD = "GPUBOT_PROMETHEUS_PASSWORD"


def open_prometheus(url: str | None, env: dict[str, str] | Any, *, timeout: float = 5.0,
                    username: str | None = None, ca_file: str | None = None,
                    insecure: bool = False, idle_window: str = "1h",
                    idle_threshold: float = 5.0) -> PrometheusMetrics | None:
    """The configured Prometheus, or None when no URL is set. Raises MetricsError for an
    unusable URL or CA file."""
    if not url:
        return None
    if not url.startswith(("http://", "https://")):
        raise MetricsError(f"Prometheus URL {url!r} must start with http:// or https://")
    return PrometheusMetrics(PrometheusConfig(
        url, timeout=timeout, bearer_token=env.get(ENV_TOKEN) or None,
        username=username or env.get("GPUBOT_PROMETHEUS_USER") or None,
        password=env.get(ENV_PASSWORD) or None, ca_file=ca_file, insecure=insecure,
        idle_window=idle_window, idle_threshold=idle_threshold))


def prometheus_from_env(url: str | None, env: Any) -> PrometheusMetrics | None:
    """``open_prometheus`` with the rest of its settings from the environment, as
    ``gpubot serve`` reads them (the CLI has no config file). Raises MetricsError."""
    from handlers.runtime.checks import duration_seconds

    def number(var: str, default: float) -> float:
        try:
            return float(env.get(var) or default)
        except ValueError:
            raise MetricsError(f"{var} must be a number, not {env.get(var)!r}") from None

    window = env.get("GPUBOT_IDLE_WINDOW") or "1h"
    if duration_seconds(window) is None:
        raise MetricsError(f"GPUBOT_IDLE_WINDOW must be a PromQL duration such as 1h, "
                           f"not {window!r}")
    insecure = str(env.get("GPUBOT_PROMETHEUS_INSECURE") or "").lower() in ("1", "true",
                                                                           "yes", "on")
    return open_prometheus(url, env, timeout=number("GPUBOT_PROMETHEUS_TIMEOUT", 5.0),
                           ca_file=env.get("GPUBOT_PROMETHEUS_CA_FILE") or None,
                           insecure=insecure, idle_window=window,
                           idle_threshold=number("GPUBOT_IDLE_THRESHOLD", 5.0))
