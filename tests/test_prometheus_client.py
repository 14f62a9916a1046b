"""bot/metrics/prometheus.py against httpx's MockTransport (and one closed port)."""

from __future__ import annotations

import json
import socket
from typing import Any

import httpx
import pytest

from bot.metrics.prometheus import PrometheusConfig, PrometheusMetrics, open_prometheus
from handlers.runtime.source import MetricsError

SECRET = "prom-token-5e1d"


def _prom(handler: Any, **config: Any) -> PrometheusMetrics:
    cfg = PrometheusConfig("http://prom.test:9090/", **config)
    return PrometheusMetrics(cfg, transport=httpx.MockTransport(handler), clock=lambda: 1000.0)


def _ok(data: dict[str, Any]) -> httpx.Response:
    return httpx.Response(200, json={"status": "success", "data": data})


def test_instant_query_sends_auth_and_timeout_and_parses_the_vector() -> None:
    seen: list[httpx.Request] = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append(req)
        return _ok({"resultType": "vector", "result": [
            {"metric": {"Hostname": "n1", "gpu": "0"}, "value": [1000, "79"]},
            {"metric": {"Hostname": "n2", "gpu": "1"}, "value": [1000, "NaN"]}]})

    prom = _prom(handler, bearer_token=SECRET, timeout=2.5)
    samples = prom.instant("DCGM_FI_DEV_XID_ERRORS")
    assert [(dict(s.labels), s.value) for s in samples] == [
        ({"Hostname": "n1", "gpu": "0"}, 79.0), ({"Hostname": "n2", "gpu": "1"}, 0.0)]
    req = seen[0]
    assert req.url.path == "/api/v1/query"
    assert req.url.params["query"] == "DCGM_FI_DEV_XID_ERRORS"
    assert req.url.params["timeout"] == "2.5s"
    assert req.headers["authorization"] == f"Bearer {SECRET}"


def test_basic_auth() -> None:
    seen: list[str] = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append(req.headers.get("authorization", ""))
        return _ok({"resultType": "vector", "result": []})

    _prom(handler, username="gpubot", password="pw").instant("up")
    assert seen == ["Basic Z3B1Ym90OnB3"]  # base64("gpubot:pw")


def test_range_query_asks_for_the_window_and_parses_the_matrix() -> None:
    seen: list[httpx.Request] = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append(req)
        return _ok({"resultType": "matrix", "result": [
            {"metric": {}, "values": [[400, "0.5"], [700, "1"]]}]})

    series = _prom(handler).range("sum(x)", seconds=600, step=300)
    assert series[0].points == ((400.0, 0.5), (700.0, 1.0))
    params = seen[0].url.params
    assert seen[0].url.path == "/api/v1/query_range"
    assert (float(params["start"]), float(params["end"]), params["step"]) == (400.0, 1000.0, "300")


@pytest.mark.parametrize(("response", "words"), [
    (httpx.Response(401, text="unauthorized"), "refused our credentials"),
    (httpx.Response(400, json={"status": "error", "errorType": "bad_data",
                               "error": "parse error at char 3"}), "bad_data: parse error"),
    (httpx.Response(502, text="<html>bad gateway</html>"), "not Prometheus API JSON"),
    (httpx.Response(200, json={"status": "success", "data": {"resultType": "matrix",
                                                             "result": []}}), "expected a vector"),
])
def test_errors_name_the_server_and_the_problem_never_the_token(
        response: httpx.Response, words: str) -> None:
    prom = _prom(lambda req: response, bearer_token=SECRET)
    with pytest.raises(MetricsError) as err:
        prom.instant("up")
    assert words in str(err.value)
    assert "http://prom.test:9090/" in str(err.value)
    assert SECRET not in str(err.value)


def test_timeout_is_a_metrics_error() -> None:
    def handler(req: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=req)

    with pytest.raises(MetricsError, match=r"did not answer within 1\.5s"):
        _prom(handler, timeout=1.5).instant("up")


def test_unreachable_server_is_a_metrics_error() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    prom = PrometheusMetrics(PrometheusConfig(f"http://127.0.0.1:{port}", timeout=2))
    with pytest.raises(MetricsError, match="cannot be reached: ConnectError"):
        prom.instant("up")


def test_tls_options(tmp_path: Any) -> None:
    with pytest.raises(MetricsError, match="CA file"):
        PrometheusMetrics(PrometheusConfig("https://p", ca_file=str(tmp_path / "none.pem")))
    # insecure: no verification context at all (a test cluster's self-signed certificate)
    prom = PrometheusMetrics(PrometheusConfig("https://p", insecure=True))
    pool = prom._client._transport._pool  # type: ignore[attr-defined]
    assert pool._ssl_context.verify_mode.name == "CERT_NONE"


def test_open_prometheus_reads_credentials_from_the_environment_only() -> None:
    assert open_prometheus(None, {}) is None
    with pytest.raises(MetricsError, match="http:// or https://"):
        open_prometheus("prom:9090", {})
    prom = open_prometheus("http://p:9090", {"GPUBOT_PROMETHEUS_TOKEN": SECRET})
    assert prom is not None and prom.config.bearer_token == SECRET
    assert SECRET not in repr(prom.config)
    assert json.dumps(prom.source).count(SECRET) == 0


def test_prometheus_from_env_reads_the_serve_settings() -> None:
    from bot.metrics.prometheus import prometheus_from_env

    prom = prometheus_from_env("http://p:9090", {
        "GPUBOT_PROMETHEUS_TIMEOUT": "2.5", "GPUBOT_IDLE_WINDOW": "30m",
        "GPUBOT_IDLE_THRESHOLD": "10", "GPUBOT_PROMETHEUS_INSECURE": "true",
        "GPUBOT_PROMETHEUS_USER": "u", "GPUBOT_PROMETHEUS_PASSWORD": SECRET})
    assert prom is not None
    c = prom.config
    assert (c.timeout, c.idle_window, c.idle_threshold, c.insecure, c.username, c.password) == (
        2.5, "30m", 10.0, True, "u", SECRET)
    prom.close()
    for bad in ({"GPUBOT_IDLE_WINDOW": "an hour"}, {"GPUBOT_PROMETHEUS_TIMEOUT": "soon"}):
        with pytest.raises(MetricsError, match=next(iter(bad))):
            prometheus_from_env("http://p:9090", bad)
