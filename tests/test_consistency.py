"""Consistency rules (handlers/consistency.py): an absence claim is withheld where a node's
own objects show the opposite, stands as a warning when what it rests on was not read, and
of two findings that cannot both hold about one node the rule's winner stays."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from bot.render import render_text
from bot.slack.blocks import Renderer
from bot.snapshot import load_snapshot
from handlers.consistency import UNVERIFIED, NodeEvidence, parse, resolve, withhold
from handlers.model import Finding, ObjectRef, Severity
from handlers.registry import COMMANDS
from handlers.view import Reader
from tests.scenarios import SCENARIO_DIR

Obj = dict[str, Any]


def node(name: str, alloc: dict[str, str] | None = None) -> Obj:
    return {"metadata": {"name": name}, "status": {"allocatable": alloc or {}}}


def gpu_pod(name: str, on: str, ready: bool = True) -> Obj:
    return {"metadata": {"name": name, "namespace": "ml"},
            "spec": {"nodeName": on, "containers": [
                {"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
            "status": {"phase": "Running", "containerStatuses": [{"ready": ready}]}}


def evidence(n: Obj, pods: list[Obj] | None = None) -> NodeEvidence:
    return NodeEvidence(n, lambda: pods or [])


def everything_read(kind: str) -> bool:
    return True


def test_a_node_that_advertises_is_not_called_pluginless() -> None:
    v = withhold("DEVICE_PLUGIN_MISSING", (), evidence(node("g1", {"nvidia.com/gpu": "8"})),
                 everything_read)
    assert v.withheld is not None
    assert v.withheld.startswith("DEVICE_PLUGIN_MISSING not said about g1")
    assert "nvidia.com/gpu=8" in v.withheld


def test_zero_allocatable_does_not_refute_the_claim() -> None:
    v = withhold("DEVICE_PLUGIN_MISSING", (), evidence(node("g1", {"nvidia.com/gpu": "0"})),
                 everything_read)
    assert v.withheld is None and v.unverified == ()


def test_a_claim_on_unread_objects_is_unverified() -> None:
    v = withhold("DEVICE_PLUGIN_MISSING", (), evidence(node("g1")),
                 lambda kind: kind != "DaemonSet")
    assert v.withheld is None
    assert v.unverified == ("DaemonSet",)


def test_a_running_gpu_pod_proves_the_hardware_not_the_plugin() -> None:
    ev = evidence(node("g1"), [gpu_pod("train-0", "g1")])
    assert withhold("GPU_HARDWARE_NOT_DETECTED", (), ev, everything_read).withheld
    assert withhold("DEVICE_PLUGIN_MISSING", (), ev, everything_read).withheld is None


def test_a_pod_not_ready_proves_nothing() -> None:
    ev = evidence(node("g1"), [gpu_pod("train-0", "g1", ready=False)])
    assert withhold("GPU_HARDWARE_NOT_DETECTED", (), ev, everything_read).withheld is None


def test_a_partial_gpu_not_advertised_claims_no_absence() -> None:
    ev = evidence(node("g1", {"nvidia.com/gpu": "4"}))
    assert withhold("GPU_NOT_ADVERTISED", {"partial"}, ev, everything_read).withheld is None
    assert withhold("GPU_NOT_ADVERTISED", (), ev, everything_read).withheld


def test_the_crash_loop_wins_over_missing_on_the_same_node_only() -> None:
    def on(code: str, n: str) -> Finding:
        return Finding(code, "s", (ObjectRef("Node", n),), ("e",), "f")
    kept, dropped = resolve([on("DEVICE_PLUGIN_MISSING", "a"), on("DEVICE_PLUGIN_CRASHLOOP", "a"),
                             on("DEVICE_PLUGIN_MISSING", "b")])
    assert [(f.code, f.objects[0].name) for f in kept] == [
        ("DEVICE_PLUGIN_CRASHLOOP", "a"), ("DEVICE_PLUGIN_MISSING", "b")]
    assert len(dropped) == 1 and dropped[0].startswith("DEVICE_PLUGIN_MISSING not said about a")


def test_unverified_caps_a_critical_claim_at_warning() -> None:
    f = Finding("DEVICE_PLUGIN_MISSING", "s", (ObjectRef("Node", "g1"),), ("e",), "f")
    assert f.severity == Severity.CRITICAL
    f2 = Finding("DEVICE_PLUGIN_MISSING", "s", (ObjectRef("Node", "g1"),), ("e",), "f",
                 conditions=frozenset({UNVERIFIED}))
    assert f2.severity == Severity.WARNING


@pytest.mark.parametrize("doc, wrong", [
    ({"claims": [{"id": "x", "code": "NO_SUCH_CODE", "unless": ["advertises"],
                  "source": "s"}]}, "NO_SUCH_CODE"),
    ({"claims": [{"id": "x", "code": "DEVICE_PLUGIN_MISSING", "unless": ["looks-fine"],
                  "source": "s"}]}, "looks-fine"),
    ({"conflicts": [{"id": "x", "drop": "DEVICE_PLUGIN_MISSING", "keep": "NOPE",
                     "because": "b"}]}, "unknown code"),
])
def test_rules_refuse_unknown_codes_and_facts(doc: Obj, wrong: str) -> None:
    with pytest.raises(ValueError, match=wrong):
        parse(doc)


def test_what_was_not_said_is_shown_in_slack_and_the_terminal() -> None:

    spec = COMMANDS["doctor"]
    assert spec.run is not None
    view = load_snapshot(SCENARIO_DIR / "doctor_aks_managed_plugin_service" / "snapshot")
    diag = spec.run(Reader(view), spec.bind({}))
    assert diag.codes == ["ALL_CLEAR"]
    assert len(diag.withheld) == 2
    slack = json.dumps([m.blocks for m in Renderer().render(diag).messages])
    text = render_text(diag)
    for line in diag.withheld:
        assert json.dumps(line)[1:40] in slack
        assert line in text


def test_a_gpu_pod_scheduled_there_within_the_hour_proves_a_plugin_then() -> None:
    pod = gpu_pod("train-0", "g1", ready=False)
    pod["status"]["phase"] = "Failed"  # refused by the kubelet after binding
    pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "True",
                                    "lastTransitionTime": "2026-12-04T10:00:00Z"}]
    soon = NodeEvidence(node("g1"), lambda: [pod], now=datetime(2026, 12, 4, 10, 30, tzinfo=UTC))
    v = withhold("DEVICE_PLUGIN_MISSING", (), soon, everything_read)
    assert v.withheld is not None and "bound GPU pod ml/train-0" in v.withheld
    late = NodeEvidence(node("g1"), lambda: [pod], now=datetime(2026, 12, 5, 10, 0, tzinfo=UTC))
    assert withhold("DEVICE_PLUGIN_MISSING", (), late, everything_read).withheld is None
