"""Metric findings in why-pending, doctor and nodes (handlers/runtime), over FakeMetrics."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.snapshot import load_snapshot
from handlers import doctor, nodes, why_pending
from handlers.knowledge.xid import xid_info
from handlers.model import Diagnosis, Severity
from handlers.runtime.labels import node_of, pod_of
from handlers.runtime.source import Sample
from handlers.target import parse_target
from handlers.view import Reader
from tests.fake_prometheus import FakeMetrics

ROOT = Path(__file__).resolve().parents[1]
HELD = ROOT / "tests/scenarios/insufficient-gpu-held/cluster.yaml"
N1, N3 = "ip-10-0-21-14.ec2.internal", "ip-10-0-23-201.ec2.internal"


def _util(value: float, **labels: str) -> Sample:
    return Sample({"gpu": "0", "UUID": "GPU-1", **labels}, value)


def _why(metrics: FakeMetrics | None) -> Diagnosis:
    return why_pending.run(Reader(load_snapshot(str(HELD)), metrics=metrics),
                           parse_target("ml-team/train-0"))


def _one(diag: Diagnosis, code: str):  # type: ignore[no-untyped-def]
    found = [f for f in diag.findings if f.code == code]
    assert len(found) == 1, diag.codes
    return found[0]


def test_idle_pods_holding_gpus_are_named_with_their_owners() -> None:
    metrics = FakeMetrics({"DCGM_FI_DEV_GPU_UTIL": [
        # scraped through a ServiceMonitor: the workload is in exported_*
        _util(0.0, exported_pod="llm-pretrain-worker-0", exported_namespace="research",
              pod="nvidia-dcgm-exporter-abcde", namespace="gpu-operator", Hostname=N1),
        # dcgm-exporter's old label names
        _util(2.0, pod_name="sdxl-train-5c7b9d-x2x8q", pod_namespace="vision", Hostname=N3),
        # busy: not idle
        _util(97.0, pod="sdxl-train-5c7b9d-pl4mw", namespace="vision", Hostname=N3),
        # a GPU nobody holds: only the exporter's own pod is left in `pod`
        _util(0.0, pod="nvidia-dcgm-exporter-abcde", namespace="gpu-operator", Hostname=N1),
    ], "DCGM_FI_DEV_XID_ERRORS": [Sample({"Hostname": N1, "gpu": "0"}, 0)]})
    diag = _why(metrics)
    idle = _one(diag, "GPU_IDLE_ALLOCATED")
    assert idle.severity is Severity.WARNING  # the pending pod is short of GPUs
    assert {str(o) for o in idle.objects} == {"pod/research/llm-pretrain-worker-0",
                                              "pod/vision/sdxl-train-5c7b9d-x2x8q"}
    assert ("(max_over_time(DCGM_FI_DEV_GPU_UTIL[1h]) < 5) or on () "
            "absent(DCGM_FI_DEV_GPU_UTIL)") in metrics.queries
    assert "INSUFFICIENT_GPU" in diag.codes and "METRICS_UNAVAILABLE" not in diag.codes
    assert "GPU_XID_ERRORS" not in diag.codes  # last Xid 0: none


def test_idle_finding_is_info_without_a_gpu_shortage() -> None:
    metrics = FakeMetrics({"DCGM_FI_DEV_GPU_UTIL": [
        _util(0.0, pod="llm-pretrain-worker-0", namespace="research", Hostname=N1)],
        "DCGM_FI_DEV_XID_ERRORS": [Sample({"Hostname": N1}, 0)]})
    diag = nodes.run(Reader(load_snapshot(str(HELD)), metrics=metrics))
    assert _one(diag, "GPU_IDLE_ALLOCATED").severity is Severity.INFO


@pytest.mark.parametrize(("xid", "severity"), [(79, Severity.CRITICAL), (13, Severity.INFO)])
def test_xid_is_named_with_its_meaning(xid: int, severity: Severity) -> None:
    metrics = FakeMetrics({"DCGM_FI_DEV_XID_ERRORS": [
        Sample({"Hostname": N1, "gpu": "3", "UUID": "GPU-abc"}, float(xid)),
        Sample({"Hostname": "some-other-node", "gpu": "0"}, 79.0)]})
    diag = doctor.run(Reader(load_snapshot(str(HELD)), metrics=metrics), N1)
    f = _one(diag, "GPU_XID_ERRORS")
    info = xid_info(xid)
    assert info is not None
    assert f.severity is severity
    assert f"Xid {xid} ({info.name})" in f.summary
    assert any(info.meaning in e and info.source in e for e in f.evidence)
    assert [str(o) for o in f.objects] == [f"node/{N1}"]  # the other node is out of scope


def test_unknown_xid_still_reported() -> None:
    metrics = FakeMetrics({"DCGM_FI_DEV_XID_ERRORS": [Sample({"Hostname": N1}, 9999.0)]})
    diag = doctor.run(Reader(load_snapshot(str(HELD)), metrics=metrics), N1)
    f = _one(diag, "GPU_XID_ERRORS")
    assert "Xid 9999" in f.summary and any("xid-errors" in d for d in f.fix.docs)


def test_unreachable_prometheus_says_what_was_not_checked_and_the_rest_runs() -> None:
    plain = _why(None)
    metrics = FakeMetrics()
    metrics.down = "ConnectError: connection refused"
    diag = _why(metrics)
    f = _one(diag, "METRICS_UNAVAILABLE")
    assert f.severity is Severity.INFO
    assert "connection refused" in f.summary
    assert "Xid errors" in f.summary and "idle GPUs" in f.summary
    assert [c for c in diag.codes if c != "METRICS_UNAVAILABLE"] == plain.codes
    assert any(u.startswith("metrics: Xid errors") for u in diag.unchecked)


def test_missing_series_is_named() -> None:
    metrics = FakeMetrics({"DCGM_FI_DEV_XID_ERRORS": [Sample({"Hostname": N1}, 0)]})
    diag = nodes.run(Reader(load_snapshot(str(HELD)), metrics=metrics))
    f = _one(diag, "METRICS_UNAVAILABLE")
    assert any("no DCGM_FI_DEV_GPU_UTIL series" in e for e in f.evidence)
    assert any("kube_node_status_allocatable" in e for e in f.evidence)
    assert not any("XID" in e for e in f.evidence)


def test_no_prometheus_configured_adds_nothing() -> None:
    diag = _why(None)
    assert not {"METRICS_UNAVAILABLE", "GPU_XID_ERRORS", "GPU_IDLE_ALLOCATED"} & set(diag.codes)


def test_allocation_and_quota_figures_from_kube_state_metrics() -> None:
    metrics = FakeMetrics({
        "kube_resourcequota": [
            Sample({"resourcequota": "gpu", "resource": "requests.nvidia.com/gpu",
                    "type": "hard", "namespace": "ml-team"}, 8),
            Sample({"resourcequota": "gpu", "resource": "requests.nvidia.com/gpu",
                    "type": "used", "namespace": "ml-team"}, 6)],
        "sum(kube_pod_container_resource_requests": [Sample({}, 24)],
        "sum(kube_node_status_allocatable": [Sample({}, 24)],
        "DCGM_FI_DEV_XID_ERRORS": [Sample({"Hostname": N1}, 0)],
        "DCGM_FI_DEV_GPU_UTIL": [_util(50, pod="x", namespace="y")]})
    diag = nodes.run(Reader(load_snapshot(str(HELD)), metrics=metrics))
    assert "kube-state-metrics: 24 of 24 allocatable GPUs requested by running or bound " \
           "pods" in diag.details["metrics"]
    diag = _why(metrics)
    assert ("kube-state-metrics: quota ml-team/gpu requests.nvidia.com/gpu: used 6 of 8"
            in diag.details["metrics"])


@pytest.mark.parametrize(("labels", "pod", "node"), [
    ({"pod": "a", "namespace": "n", "Hostname": "h"}, ("n", "a"), "h"),
    ({"exported_pod": "a", "exported_namespace": "n", "pod": "dcgm-exporter-x",
      "namespace": "mon", "node": "k"}, ("n", "a"), "k"),
    ({"pod_name": "a", "pod_namespace": "n", "kubernetes_node": "k"}, ("n", "a"), "k"),
    ({"pod": "dcgm-exporter-x", "namespace": "mon"}, None, ""),
    ({"gpu": "0"}, None, ""),
])
def test_label_variants(labels: dict[str, str], pod: tuple[str, str] | None, node: str) -> None:
    assert pod_of(labels) == pod
    assert node_of(labels) == node


def test_pods_younger_than_the_window_are_not_called_idle() -> None:
    util = [_util(0.0, pod="llm-pretrain-worker-0", namespace="research", Hostname=N1)]
    long = FakeMetrics({"DCGM_FI_DEV_GPU_UTIL": util}, idle_window="3650d")
    assert "GPU_IDLE_ALLOCATED" not in _why(long).codes
    short = FakeMetrics({"DCGM_FI_DEV_GPU_UTIL": util}, idle_window="30m")
    assert "GPU_IDLE_ALLOCATED" in _why(short).codes


@pytest.mark.parametrize(("text", "seconds"), [("1h", 3600), ("1h30m", 5400), ("90s", 90),
                                               ("2d", 172800), ("1x", None), ("h", None)])
def test_promql_durations(text: str, seconds: float | None) -> None:
    from handlers.runtime.checks import duration_seconds

    assert duration_seconds(text) == seconds


def test_label_values_are_quoted_in_promql() -> None:
    from handlers.runtime.checks import _Run, quota_figures

    metrics = FakeMetrics()
    quota_figures(_Run(metrics), 'ml"} or vector(1) #')
    assert 'namespace="ml\\"} or vector(1) #"' in metrics.queries[0]


def test_cli_reads_metrics_for_the_commands_they_apply_to() -> None:
    import io
    import json
    import socket

    from bot.cli import main

    with socket.socket() as s:  # nobody listens there
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"

    def codes(*argv: str) -> list[str]:
        out, err = io.StringIO(), io.StringIO()
        assert main([*argv, "--snapshot", str(HELD), "--prometheus", url, "-o", "json"],
                    out=out, err=err) == 0, err.getvalue()
        return [f["code"] for f in json.loads(out.getvalue())["findings"]]

    assert "METRICS_UNAVAILABLE" in codes("nodes")
    assert "METRICS_UNAVAILABLE" in codes("doctor")
    assert "INSUFFICIENT_GPU" in codes("why-pending", "ml-team/train-0")
    assert "METRICS_UNAVAILABLE" not in codes("pending")  # per-workload root causes only


def test_slack_nodes_shows_metric_findings_and_figures() -> None:
    from bot.slack.blocks import Renderer, validate

    metrics = FakeMetrics({"DCGM_FI_DEV_GPU_UTIL": [
        _util(0.0, pod="llm-pretrain-worker-0", namespace="research", Hostname=N1)],
        "sum(kube_node_status_allocatable": [Sample({}, 24)],
        "sum(kube_pod_container_resource_requests": [Sample({}, 20)]})
    diag = nodes.run(Reader(load_snapshot(str(HELD)), metrics=metrics))
    rendered = Renderer().render(diag, argv=["nodes"])
    text = " ".join(str(m.blocks) for m in rendered.messages)
    assert "GPU_IDLE_ALLOCATED" in text and "research/llm-pretrain-worker-0" in text
    assert "20 of 24 allocatable GPUs" in text
    for m in rendered.messages:
        validate(m.blocks)
