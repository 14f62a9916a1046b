"""End to end with the real binaries: a metrics fixture makes gpubot's own rules fire in a
real Prometheus (1 s scrape and evaluation), the real Alertmanager posts its webhook to the
bot, the fake Slack gets one card per group with the diagnosis (metrics included) in its
thread; the pod then runs, the alert resolves and the card turns "Resolved" in place.
Also: ``gpubot why-pending --prometheus URL`` against that Prometheus names the idle pods.

The rules are deploy/prometheus/gpubot-rules.yaml with every ``for:`` cut to 0s (the
durations themselves are covered by the promtool unit tests).
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from bot.alerts.service import open_alerts
from bot.cli import main
from bot.metrics.prometheus import PrometheusConfig, PrometheusMetrics
from bot.store.sqlite import SqliteStore
from tests.alert_payloads import TOKEN
from tests.fake_exporter import MetricsFixture
from tests.fake_slack.harness import ROOT, BotHarness
from tests.fake_slack.server import Call
from tests.real_binaries import require
from tests.real_prometheus import start_alertmanager, start_prometheus, wait_series

HELD = "tests/scenarios/insufficient-gpu-held/cluster.yaml"
CHANNEL = "C0ALERTS"
N1, N2, N3 = ("ip-10-0-21-14.ec2.internal", "ip-10-0-22-9.ec2.internal",
              "ip-10-0-23-201.ec2.internal")
PENDING = 'kube_pod_status_phase{namespace="ml-team",pod="train-0",phase="%s"}'


def _cluster_metrics(fx: MetricsFixture) -> None:
    """What kube-state-metrics and dcgm-exporter would say about the HELD snapshot."""
    fx.set(PENDING % "Pending", 1)
    fx.set(PENDING % "Running", 0)
    fx.set('kube_pod_container_resource_requests{namespace="ml-team",pod="train-0",'
           'container="train",resource="nvidia_com_gpu",unit="integer"}', 2)
    holders = [("research", "llm-pretrain-worker-0", N1, 8),
               ("research", "llm-pretrain-worker-1", N2, 8),
               ("vision", "sdxl-train-5c7b9d-x2x8q", N3, 4),
               ("vision", "sdxl-train-5c7b9d-pl4mw", N3, 4)]
    for ns, pod, node, gpus in holders:
        fx.set(f'kube_pod_status_phase{{namespace="{ns}",pod="{pod}",phase="Running"}}', 1)
        fx.set(f'kube_pod_container_resource_requests{{namespace="{ns}",pod="{pod}",'
               f'container="main",node="{node}",resource="nvidia_com_gpu",unit="integer"}}',
               gpus)
    for node in (N1, N2, N3):
        fx.set(f'kube_node_status_allocatable{{node="{node}",resource="nvidia_com_gpu",'
               'unit="integer"}', 8)
    # dcgm-exporter, in three label dialects: relabelled by a ServiceMonitor (exported_*),
    # its old names (pod_name/pod_namespace) and its current ones (pod/namespace).
    fx.set(f'DCGM_FI_DEV_GPU_UTIL{{gpu="0",UUID="GPU-a0",Hostname="{N1}",'
           'exported_pod="llm-pretrain-worker-0",exported_namespace="research",'
           'pod="nvidia-dcgm-exporter-7x2kq",namespace="gpu-operator"}', 0)
    fx.set(f'DCGM_FI_DEV_GPU_UTIL{{gpu="4",UUID="GPU-c4",Hostname="{N3}",'
           'pod_name="sdxl-train-5c7b9d-x2x8q",pod_namespace="vision"}', 1)
    fx.set(f'DCGM_FI_DEV_GPU_UTIL{{gpu="5",UUID="GPU-c5",Hostname="{N3}",'
           'pod="sdxl-train-5c7b9d-pl4mw",namespace="vision"}', 88)
    fx.set(f'DCGM_FI_DEV_GPU_UTIL{{gpu="0",UUID="GPU-b0",Hostname="{N2}",'
           'pod="llm-pretrain-worker-1",namespace="research"}', 95)
    fx.set(f'DCGM_FI_DEV_XID_ERRORS{{gpu="0",UUID="GPU-a0",Hostname="{N1}"}}', 0)
    fx.set(f'DCGM_FI_DEV_XID_ERRORS{{gpu="0",UUID="GPU-b0",Hostname="{N2}"}}', 79)


def _rules_without_waiting() -> dict[str, Any]:
    doc = yaml.safe_load((ROOT / "deploy/prometheus/gpubot-rules.yaml").read_text())
    for g in doc["spec"]["groups"]:
        for r in g["rules"]:
            if "for" in r:
                r["for"] = "0s"
    return {"groups": doc["spec"]["groups"]}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    prometheus, alertmanager = require("prometheus", "prometheus-alertmanager")
    tmp = tmp_path_factory.mktemp("prom")
    store = SqliteStore(str(tmp / "state.db"))
    procs = []
    with MetricsFixture() as fx, BotHarness(HELD, alert_token=TOKEN,
                                            alert_channel=CHANNEL) as h:
        try:
            _cluster_metrics(fx)
            am, am_url = start_alertmanager(alertmanager, tmp, h.url + "/alertmanager", TOKEN)
            procs.append(am)
            prom, prom_url = start_prometheus(prometheus, tmp, _rules_without_waiting(),
                                              fx.target, am_url)
            procs.append(prom)
            assert h.bot is not None
            h.bot.prometheus = PrometheusMetrics(PrometheusConfig(prom_url, timeout=5))
            h.bot.alerts = open_alerts(h.bot, h.settings, store=store, pace=0)
            # the first scrape comes ~5 s after start (Prometheus 2.42 has no flag for it)
            wait_series(prom_url, "DCGM_FI_DEV_GPU_UTIL", timeout=60)
            yield {"h": h, "fx": fx, "prom": prom_url, "tmp": tmp}
        finally:
            for p in procs:
                p.stop()
            store.close()


def _text(call: Call) -> str:
    return json.dumps(call.blocks, ensure_ascii=False)


def _card(h: BotHarness, alertname: str, timeout: float = 60) -> Call:
    return h.slack.wait_for("chat.postMessage", timeout=timeout, where=lambda c: (
        "thread_ts" not in c.params and c.status == 200
        and f"Firing · {alertname}" in _text(c)))[0]


def _thread_text(h: BotHarness, ts: str, needle: str, timeout: float = 30) -> str:
    calls = h.slack.wait_for("chat.postMessage", timeout=timeout, where=lambda c: (
        c.params.get("thread_ts") == ts and needle in _text(c)))
    return " ".join(_text(c) for c in h.slack.calls("chat.postMessage")
                    if c.params.get("thread_ts") == ts) if calls else ""


def test_real_rules_fire_and_resolve_through_real_alertmanager(stack: dict[str, Any]) -> None:
    h: BotHarness = stack["h"]
    card = _card(h, "GPUPodPendingTooLong")
    assert card.params["channel"] == CHANNEL
    ts = card.response["ts"]
    thread = _thread_text(h, ts, "llm-pretrain-worker-0")  # the findings message
    assert "why-pending pod/ml-team/train-0" in thread
    assert "INSUFFICIENT_GPU" in thread
    assert "GPU_IDLE_ALLOCATED" in thread
    idle = re.search(r"held by pods below 5% utilisation for 1h: ([^.]*)\.", thread)
    assert idle is not None, thread
    assert "research/llm-pretrain-worker-0" in idle.group(1)
    assert "vision/sdxl-train-5c7b9d-x2x8q" in idle.group(1)
    assert "pl4mw" not in idle.group(1) and "worker-1" not in idle.group(1)  # busy GPUs

    xid = _card(h, "GPUXidErrors")
    xid_thread = _thread_text(h, xid.response["ts"], "Xid 79")
    assert f"doctor {N2}" in xid_thread and "GPU_XID_ERRORS" in xid_thread

    # The pod runs: the rule stops firing, Alertmanager sends the resolution.
    stack["fx"].set(PENDING % "Pending", 0)
    stack["fx"].set(PENDING % "Running", 1)
    done = h.slack.wait_for("chat.update", timeout=60, where=lambda c: (
        c.params.get("ts") == ts and "Resolved · GPUPodPendingTooLong" in _text(c)))[0]
    assert re.search(r"\*Resolved\* after \d+s", _text(done))
    # one card per group, whatever Alertmanager repeated meanwhile
    titles = [re.search(r"Firing · (\w+)", _text(c)) for c in h.slack.calls("chat.postMessage")
              if "thread_ts" not in c.params and c.status == 200]
    names = [m.group(1) for m in titles if m]
    assert len(names) == len(set(names)) and "GPUPodPendingTooLong" in names


def test_cli_why_pending_with_prometheus_names_the_idle_pods(stack: dict[str, Any]) -> None:
    out, err = io.StringIO(), io.StringIO()
    code = main(["why-pending", "ml-team/train-0", "--snapshot", str(ROOT / HELD),
                 "--prometheus", stack["prom"]], out=out, err=err)
    text = out.getvalue()
    assert code == 0, err.getvalue()
    assert "GPU_IDLE_ALLOCATED" in text
    line = next(line for line in text.splitlines() if "GPU_IDLE_ALLOCATED" in line)
    assert "research/llm-pretrain-worker-0" in line and "vision/sdxl-train-5c7b9d-x2x8q" in line
    assert "METRICS_UNAVAILABLE" not in text
    out = io.StringIO()
    main(["why-pending", "ml-team/train-0", "--snapshot", str(ROOT / HELD),
          "--prometheus", stack["prom"], "-o", "json"], out=out, err=err)
    codes = [f["code"] for f in json.loads(out.getvalue())["findings"]]
    assert codes[0] == "INSUFFICIENT_GPU" and "GPU_IDLE_ALLOCATED" in codes


def test_absent_tells_a_missing_exporter_from_a_clean_answer(stack: dict[str, Any]) -> None:
    """The checks ask `(filter) or on () absent(metric)`: the real Prometheus answers one
    labelless sample only when no exporter writes the metric."""
    prom = PrometheusMetrics(PrometheusConfig(stack["prom"], timeout=5))
    try:
        clean = prom.instant("(DCGM_FI_DEV_XID_ERRORS > 1000) or on () "
                             "absent(DCGM_FI_DEV_XID_ERRORS)")
        missing = prom.instant("(DCGM_FI_PROF_NOPE > 0) or on () absent(DCGM_FI_PROF_NOPE)")
    finally:
        prom.close()
    assert clean == []
    assert [(dict(s.labels), s.value) for s in missing] == [({}, 1.0)]


