"""quota: GPU quota used/hard per namespace and resource, on the quota_* scenarios."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.render import render_text
from bot.snapshot import load_snapshot
from handlers import quota
from handlers.model import Diagnosis
from handlers.view import Reader, ViewError

SCENARIOS = Path(__file__).parent / "scenarios"
POD_SUFFIX = re.compile(r"(-[0-9a-f]{10})?-[0-9a-f]{5}$")
QUOTA = sorted(p.parent.name for p in SCENARIOS.glob("quota_*/scenario.yaml"))


def scenario(name: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((SCENARIOS / name / "scenario.yaml").read_text())
    assert data["command"] == "quota", name
    return data


def run(name: str) -> Diagnosis:
    data = scenario(name)
    view = load_snapshot((SCENARIOS / name / data.get("snapshot", "cluster.yaml")).resolve())
    return quota.run(Reader(view), data.get("namespace"))


def table(d: Diagnosis) -> list[tuple[Any, ...]]:
    return [(r["namespace"], r["quota"], r["resource"], r["used"], r["hard"], r["pct"],
             r["used_source"], r["pending"]) for r in d.details["rows"]]


def holders(d: Diagnosis) -> dict[tuple[str, str], list[tuple[str, float]]]:
    """Holders per (quota, resource), pod names without their generated suffixes."""
    return {(r["quota"], r["resource"]): [(POD_SUFFIX.sub("", h["pod"]), h["count"])
                                          for h in r["holders"]]
            for r in d.details["rows"]}


def exceeded(d: Diagnosis) -> list[tuple[str, ...]]:
    return [tuple(str(o) for o in f.objects) for f in d.findings if f.code == "QUOTA_EXCEEDED"]


@pytest.mark.parametrize("name", QUOTA)
def test_only_quota_codes_and_everything_read(name: str) -> None:
    # expect/forbid/first of these scenarios are checked by tests/test_scenarios.py.
    d = run(name)
    assert set(d.codes) <= {"QUOTA_EXCEEDED", "QUOTA_REQUESTS_LIMITS_UNEQUAL"}
    assert d.unchecked == []
    for f in d.findings:
        assert f.evidence and f.fix, f.code


def test_several_namespaces() -> None:
    d = run("quota_several_namespaces")
    assert table(d) == [
        ("nlp", "gpu-compute", "requests.nvidia.com/gpu", 2.0, 8.0, 25.0, "status", 0.0),
        ("nlp", "gpu-compute", "limits.nvidia.com/gpu", 2.0, 4.0, 50.0, "pods", 0.0),
        ("research", "research-gpus", "requests.nvidia.com/gpu", 2.0, 6.0, 33.3, "pods", 1.0),
        ("vision", "gpu-high-priority", "requests.nvidia.com/gpu", 0.0, 8.0, 0.0, "status", 0.0),
        ("vision", "gpu-quota", "requests.nvidia.com/gpu", 4.0, 4.0, 100.0, "status", 6.0),
    ]
    assert holders(d) == {
        ("gpu-compute", "requests.nvidia.com/gpu"): [("t5-serve-0", 2.0)],
        ("gpu-compute", "limits.nvidia.com/gpu"): [("t5-serve-0", 2.0)],
        # The bound pod still creating its container and the unbound pending one both hold
        # quota; the finished Job's pod does not.
        ("research-gpus", "requests.nvidia.com/gpu"): [("l4-batch", 1.0), ("warmup-l4", 1.0)],
        # Scoped to PriorityClass high: clip-eval has none.
        ("gpu-high-priority", "requests.nvidia.com/gpu"): [],
        ("gpu-quota", "requests.nvidia.com/gpu"): [("clip-eval", 2.0), ("clip-eval", 2.0)],
    }
    enforced = {(r["quota"], r["resource"]): r["enforced"] for r in d.details["rows"]}
    assert enforced[("gpu-compute", "limits.nvidia.com/gpu")] is False
    assert enforced[("gpu-quota", "requests.nvidia.com/gpu")] is True
    waiting = [(w["workload"], w["pods_pending"], w["pods_not_created"], w["count"])
               for w in d.details["rows"][-1]["waiting"]]
    assert waiting == [("deployment/sd-finetune", 0, 1, 4.0), ("deployment/clip-eval", 0, 1, 2.0)]
    assert exceeded(d) == [("resourcequota/vision/gpu-quota", "deployment/vision/sd-finetune",
                            "deployment/vision/clip-eval")]
    unequal = [f for f in d.findings if f.code == "QUOTA_REQUESTS_LIMITS_UNEQUAL"]
    assert [str(o) for f in unequal for o in f.objects] == ["resourcequota/nlp/gpu-compute"]
    # ml-team has GPU pods and no GPU quota: a detail, not a finding.
    assert d.details["without_quota"] == [
        {"namespace": "ml-team", "in_use": {"nvidia.com/gpu": 16.0},
         "pending": {"nvidia.com/gpu": 25.0}}]
    assert d.details["info"] == []


def test_exceeded_fix_raises_by_the_refused_demand() -> None:
    d = run("quota_several_namespaces")
    (f,) = [f for f in d.findings if f.code == "QUOTA_EXCEEDED"]
    assert '"requests.nvidia.com/gpu":"10"' in "\n".join(f.fix.commands)  # 4 used + 4 + 2 refused


def test_namespace_limits_the_rows() -> None:
    d = run("quota_namespace_vision")
    assert d.target == "namespace vision"
    assert {r["namespace"] for r in d.details["rows"]} == {"vision"}
    assert [r["quota"] for r in d.details["rows"]] == ["gpu-high-priority", "gpu-quota"]
    assert d.details["without_quota"] == []


def test_mig_shared_and_dra_entries() -> None:
    d = run("quota_mig_shared")
    assert table(d) == [
        ("inference", "mig-quota", "requests.nvidia.com/mig-1g.10gb", 2.0, 8.0, 25.0, "status",
         0.0),
        ("inference", "mig-quota", "requests.nvidia.com/mig-3g.40gb", 6.0, 6.0, 100.0, "status",
         2.0),
        ("inference", "mig-quota", "gpu.nvidia.com.deviceclass.resource.k8s.io/devices", 0.0,
         4.0, 0.0, "status", 0.0),
        ("notebooks", "shared-gpu", "requests.nvidia.com/gpu.shared", 10.0, 10.0, 100.0,
         "status", 4.0),
        ("research", "legacy-gpu", "nvidia.com/gpu", 0.0, 2.0, 0.0, "pods", 0.0),
    ]
    h = holders(d)
    assert h[("mig-quota", "requests.nvidia.com/mig-1g.10gb")] == [("tok-svc", 1.0)] * 2
    assert h[("mig-quota", "requests.nvidia.com/mig-3g.40gb")] == [("embed-mig", 1.0)] * 6
    assert h[("shared-gpu", "requests.nvidia.com/gpu.shared")] == (
        [("jupyter-extra", 1.0)] * 2 + [("jupyter-team", 1.0)] * 8)
    pending_holders = [x["pod"] for x in d.details["rows"][1]["holders"] if x["node"] is None]
    assert len(pending_holders) == 2
    # 3g.40gb is used up only by pods that exist (two wait for slices, not quota): no
    # QUOTA_EXCEEDED for it. gpu.shared refused two notebooks: QUOTA_EXCEEDED.
    assert exceeded(d) == [("resourcequota/notebooks/shared-gpu",
                            "deployment/notebooks/jupyter-extra")]
    unequal = [str(o) for f in d.findings if f.code == "QUOTA_REQUESTS_LIMITS_UNEQUAL"
               for o in f.objects]
    assert unequal == ["resourcequota/research/legacy-gpu"]
    assert d.details["rows"][-1]["enforced"] is False


def test_no_gpu_quota_is_an_info_line_not_a_finding() -> None:
    d = run("quota_none")
    assert d.details["rows"] == []
    assert d.findings == []
    assert len(d.details["info"]) == 1
    assert d.details["without_quota"] == [
        {"namespace": "ml-team", "in_use": {"nvidia.com/gpu": 4.0}, "pending": {}},
        {"namespace": "research", "in_use": {"nvidia.com/gpu": 4.0}, "pending": {}},
    ]


def test_unreadable_pods_leave_status_values_only() -> None:
    data = scenario("quota_several_namespaces")
    view = load_snapshot((SCENARIOS / "quota_several_namespaces" / data["snapshot"]).resolve())

    class NoPods:
        source = "test"

        def __getattr__(self, name: str) -> Any:
            return getattr(view, name)

        def list(self, kind: str, namespace: str | None = None, **kw: Any) -> list[Any]:
            if kind == "Pod":
                raise ViewError("Pod: forbidden", kind=kind)
            return view.list(kind, namespace, **kw)

    d = quota.run(Reader(NoPods()))
    assert [(r["resource"], r["used"], r["used_source"], r["holders"])
            for r in d.details["rows"] if r["namespace"] == "nlp"] == [
        ("requests.nvidia.com/gpu", 2.0, "status", []),
        ("limits.nvidia.com/gpu", None, "unknown", [])]
    assert d.unchecked == ["Pod: forbidden"]


@pytest.mark.parametrize(("key", "expected"), [
    ("requests.nvidia.com/gpu", ("nvidia.com/gpu", "requests", True)),
    ("limits.nvidia.com/gpu", ("nvidia.com/gpu", "limits", False)),
    ("nvidia.com/gpu", ("nvidia.com/gpu", "bare", False)),
    ("requests.nvidia.com/mig-1g.10gb", ("nvidia.com/mig-1g.10gb", "requests", True)),
    ("requests.nvidia.com/gpu.shared", ("nvidia.com/gpu.shared", "requests", True)),
    ("count/gpuclaims.example.com", (None, "other", True)),
    ("gpu.nvidia.com.deviceclass.resource.k8s.io/devices", (None, "other", True)),
    ("requests.cpu", None),
    ("count/pods", None),
    ("pods", None),
])
def test_gpu_quota_key(key: str, expected: tuple[Any, ...] | None) -> None:
    qk = quota.gpu_quota_key(key)
    assert (None if qk is None else (qk.resource, qk.part, qk.enforced)) == expected


def _pod(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "ns"},
            "spec": {"containers": [{"name": "c", "resources": {
                "limits": {"nvidia.com/gpu": "1", "cpu": "1", "memory": "1Gi"}}}], **spec}}


@pytest.mark.parametrize(("quota_spec", "pod_spec", "applies"), [
    ({}, {}, True),
    ({"scopes": ["NotBestEffort"]}, {}, True),
    ({"scopes": ["BestEffort"]}, {}, False),
    ({"scopes": ["Terminating"]}, {"activeDeadlineSeconds": 3600}, True),
    ({"scopes": ["NotTerminating"]}, {"activeDeadlineSeconds": 3600}, False),
    ({"scopeSelector": {"matchExpressions": [
        {"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}},
     {"priorityClassName": "high"}, True),
    ({"scopeSelector": {"matchExpressions": [
        {"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}}, {}, False),
    ({"scopeSelector": {"matchExpressions": [
        {"scopeName": "PriorityClass", "operator": "NotIn", "values": ["high"]}]}},
     {"priorityClassName": "low"}, True),
    ({"scopeSelector": {"matchExpressions": [
        {"scopeName": "PriorityClass", "operator": "Exists"}]}}, {}, False),
])
def test_quota_scopes(quota_spec: dict[str, Any], pod_spec: dict[str, Any],
                      applies: bool) -> None:
    assert quota.quota_applies({"spec": quota_spec}, _pod(**pod_spec)) is applies


@pytest.mark.parametrize("name", QUOTA)
def test_template_shows_every_row(name: str) -> None:
    d = run(name)
    text = render_text(d, source="test")
    for r in d.details["rows"]:
        assert r["resource"] in text and r["quota"] in text
    for f in d.findings:
        assert f.code in text
    for n in d.details["without_quota"]:
        assert n["namespace"] in text
