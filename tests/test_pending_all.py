"""pending: every pending GPU workload with its root cause, on the pending_* scenarios."""

from __future__ import annotations

import builtins
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.render import render_text
from bot.snapshot import load_snapshot
from handlers import pending_all, why_pending
from handlers.model import Diagnosis
from handlers.target import Target, parse_target
from handlers.view import ClusterView, Obj, Reader, ViewError

SCENARIOS = Path(__file__).parent / "scenarios"
PENDING = sorted(p.parent.name for p in SCENARIOS.glob("pending_*/scenario.yaml"))


def scenario(name: str) -> tuple[dict[str, Any], ClusterView]:
    data = yaml.safe_load((SCENARIOS / name / "scenario.yaml").read_text())
    assert data["command"] == "pending", name
    return data, load_snapshot((SCENARIOS / name / data.get("snapshot", "cluster.yaml")).resolve())


def run(name: str, **kwargs: Any) -> Diagnosis:
    data, view = scenario(name)
    return pending_all.run(Reader(view), data.get("namespace"), **kwargs)


def rows(d: Diagnosis) -> list[tuple[Any, ...]]:
    return [(r["namespace"], r["workload"], r["pods_pending"], r["pods_not_created"],
             r["gpus_requested"], r["code"]) for r in d.details["rows"]]


@pytest.mark.parametrize("name", PENDING)
def test_no_workload_diagnosis_failed(name: str) -> None:
    # expect/forbid/first of these scenarios are checked by tests/test_scenarios.py.
    data, _ = scenario(name)
    d = run(name)
    if "snapshot" in data and "/pending_" not in data["snapshot"]:
        # A snapshot borrowed from a why-pending scenario may lack kinds; no diagnosis failed.
        assert not [u for u in d.unchecked if "why-pending" in u]
    else:
        assert d.unchecked == []
    for f in d.findings:
        if f.severity.is_problem:
            assert f.evidence and f.fix, f.code


def test_several_namespaces_one_row_per_workload_worst_first() -> None:
    d = run("pending_several_namespaces")
    assert rows(d) == [
        ("ml-team", "deployment/llm-serve", 3, 0, 24.0, "INSUFFICIENT_GPU"),
        ("vision", "deployment/sd-finetune", 1, 1, 4.0, "QUOTA_EXCEEDED"),
        ("vision", "deployment/clip-eval", 1, 1, 2.0, "QUOTA_EXCEEDED"),
        ("ml-team", "pod/notebook-h100", 1, 0, 1.0, "NODE_SELECTOR_MISMATCH"),
        ("research", "job/l4-batch", 1, 0, 1.0, "INSUFFICIENT_GPU"),
    ]
    by = {r["workload"]: r for r in d.details["rows"]}
    assert by["deployment/llm-serve"]["age_seconds"] == 150 * 60
    assert by["deployment/llm-serve"]["age"] == "2h30m"
    assert by["deployment/llm-serve"]["pod"].startswith("llm-serve-")
    assert by["deployment/sd-finetune"]["pod"] is None  # never created
    assert by["deployment/clip-eval"]["pod"] is None  # two run, the third is refused
    assert by["deployment/llm-serve"]["severity"] == "critical"
    assert by["deployment/llm-serve"]["drilldown"] == (
        "gpubot why-pending deployment/llm-serve -n ml-team")
    assert by["pod/notebook-h100"]["drilldown"] == "gpubot why-pending ml-team/notebook-h100"
    assert d.details["totals"] == {"workloads": 5, "pods": 7, "gpus": 32.0}
    assert d.details["more"] == 0
    # The findings are the rows' causes, nothing else.
    assert set(d.codes) == {r["code"] for r in d.details["rows"]}
    causes = {c["code"]: (c["pods"], c["gpus"]) for c in d.details["causes"]}
    assert causes == {"INSUFFICIENT_GPU": (4, 25.0), "QUOTA_EXCEEDED": (2, 6.0),
                      "NODE_SELECTOR_MISMATCH": (1, 1.0)}


def test_namespace_limits_the_rows() -> None:
    d = run("pending_namespace_vision")
    assert d.target == "namespace vision"
    assert rows(d) == [
        ("vision", "deployment/sd-finetune", 1, 1, 4.0, "QUOTA_EXCEEDED"),
        ("vision", "deployment/clip-eval", 1, 1, 2.0, "QUOTA_EXCEEDED"),
    ]


def test_mig_and_shared_resources_are_gpu_requests() -> None:
    d = run("pending_mig_shared")
    assert rows(d) == [
        ("notebooks", "deployment/jupyter-extra", 4, 2, 4.0, "QUOTA_EXCEEDED"),
        ("inference", "deployment/embed-mig", 2, 0, 2.0, "INSUFFICIENT_GPU"),
        ("research", "pod/mig-eval-0", 1, 0, 1.0, "UNKNOWN_GPU_RESOURCE"),
    ]
    by = {r["workload"]: r["resources"] for r in d.details["rows"]}
    assert by == {"deployment/jupyter-extra": {"nvidia.com/gpu.shared": 4.0},
                  "deployment/embed-mig": {"nvidia.com/mig-3g.40gb": 2.0},
                  "pod/mig-eval-0": {"nvidia.com/mig-2g.20gb": 1.0}}


def test_nothing_pending_is_all_clear() -> None:
    d = run("pending_nothing")
    assert d.details["rows"] == []
    assert d.codes == ["ALL_CLEAR"]
    assert d.details["totals"] == {"workloads": 0, "pods": 0, "gpus": 0}


def test_namespace_without_gpu_work_is_all_clear() -> None:
    _, view = scenario("pending_several_namespaces")
    d = pending_all.run(Reader(view), "nlp")
    assert (d.details["rows"], d.codes) == ([], ["ALL_CLEAR"])


def test_kueue_suspended_job_is_listed() -> None:
    d = run("pending_kueue_suspended_job")
    assert rows(d) == [("team-a", "job/llama-lora", 1, 1, 8.0, "QUEUE_QUOTA_EXHAUSTED")]
    assert d.details["rows"][0]["queue"] == "team-a-gpu"


def test_limit_diagnoses_the_biggest_and_counts_the_rest() -> None:
    d = run("pending_several_namespaces", limit=2)
    assert [r["workload"] for r in d.details["rows"]] == [
        "deployment/llm-serve", "deployment/sd-finetune"]
    assert (d.details["more"], d.details["more_pods"], d.details["more_gpus"]) == (3, 3, 4.0)
    assert d.details["totals"]["workloads"] == 5
    assert "ALL_CLEAR" not in d.codes


def test_only_info_causes_are_not_all_clear() -> None:
    # A pod that fits now (PENDING_NO_EVENTS, info) is still pending: no ALL_CLEAR.
    d = pending_all.run(Reader(load_snapshot(SCENARIOS / "pending-no-events-yet" /
                                             "cluster.yaml")))
    assert rows(d) == [("ml-team", "pod/quick-test", 1, 0, 1.0, "PENDING_NO_EVENTS")]
    assert d.codes == ["PENDING_NO_EVENTS"]


class CountingView:
    """A view that counts list calls, to prove the diagnoses share the Reader's cache;
    lists of the kinds in ``fail`` raise ViewError."""

    def __init__(self, view: ClusterView, fail: tuple[str, ...] = ()) -> None:
        self.inner = view
        self.fail = fail
        self.lists: dict[tuple[str, str | None, str | None, str | None], int] = {}

    @property
    def source(self) -> str:
        return self.inner.source

    def list(self, kind: str, namespace: str | None = None, *, label_selector: str | None = None,
             field_selector: str | None = None) -> builtins.list[Obj]:
        key = (kind, namespace, label_selector, field_selector)
        self.lists[key] = self.lists.get(key, 0) + 1
        if kind in self.fail:
            raise ViewError(f"{kind}: forbidden", kind=kind)
        return self.inner.list(kind, namespace, label_selector=label_selector,
                               field_selector=field_selector)

    def get(self, kind: str, name: str, namespace: str | None = None) -> Obj | None:
        return self.inner.get(kind, name, namespace)

    def events(self, kind: str, name: str, namespace: str | None = None) -> builtins.list[Obj]:
        return self.inner.events(kind, name, namespace)

    def logs(self, namespace: str, pod: str, container: str | None = None) -> str | None:
        return self.inner.logs(namespace, pod, container)

    def now(self) -> Any:
        return self.inner.now()


def test_every_list_is_read_once_for_all_workloads() -> None:
    _, view = scenario("pending_several_namespaces")
    counting = CountingView(view)
    d = pending_all.run(Reader(counting))
    assert len(d.details["rows"]) == 5
    assert max(counting.lists.values()) == 1
    assert counting.lists[("Node", None, None, None)] == 1
    assert counting.lists[("Pod", None, None, pending_all.ACTIVE_PODS)] == 1


def test_unreadable_pods_are_not_all_clear() -> None:
    _, view = scenario("pending_several_namespaces")
    d = pending_all.run(Reader(CountingView(view, fail=("Pod",))))
    assert d.details["rows"] == []
    assert d.findings == []
    assert d.unchecked == ["Pod: forbidden"]


def test_empty_namespace_means_all() -> None:
    _, view = scenario("pending_several_namespaces")
    d = pending_all.run(Reader(view), "")
    assert (d.target, len(d.details["rows"])) == ("all namespaces", 5)


def test_a_failed_diagnosis_is_reported_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    real = why_pending.run

    def flaky(reader: Reader, target: Target) -> Diagnosis:
        if "notebook-h100" in str(target):
            raise RuntimeError("boom")
        return real(reader, target)

    monkeypatch.setattr(why_pending, "run", flaky)
    d = run("pending_several_namespaces")
    by = {r["workload"]: r for r in d.details["rows"]}
    assert by["pod/notebook-h100"]["code"] is None
    assert len(d.details["rows"]) == 5
    assert any("notebook-h100" in u for u in d.unchecked)
    assert "NODE_SELECTOR_MISMATCH" not in d.codes


@pytest.mark.parametrize("name", PENDING)
def test_template_shows_every_row(name: str) -> None:
    d = run(name)
    text = render_text(d, source="test")
    for r in d.details["rows"]:
        assert r["workload"] in text and r["namespace"] in text
    for f in d.findings:
        assert f.code in text


def test_wrong_gpu_type_names_each_older_node_with_its_family_and_product() -> None:
    scenario = Path(__file__).parent / "scenarios" / "wrong-gpu-type-untargeted"
    diag = why_pending.run(Reader(load_snapshot(scenario / "cluster.yaml")),
                           parse_target("ml-team/bf16-finetune"))
    wrong = next(f for f in diag.findings if f.code == "WRONG_GPU_TYPE")
    assert "node ip-10-12-2-3.ec2.internal: nvidia.com/gpu.family=turing, Tesla-T4" in (
        wrong.evidence)
