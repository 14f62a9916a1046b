"""Scheduler, gang, preemption and autoscaler checks on scenario snapshots."""

from __future__ import annotations

from typing import Any, cast

from handlers.model import Finding, ObjectRef
from handlers.pending import queueing
from handlers.pending.context import PendingContext
from handlers.view import Obj, Reader
from tests.pending_ctx import controller_context, pod_context, reader_for


def _codes(findings: list[Finding]) -> list[str]:
    return [f.code for f in findings]


def _one(findings: list[Finding], code: str) -> Finding:
    found = [f for f in findings if f.code == code]
    assert len(found) == 1, _codes(findings)
    return found[0]


def _has(f: Finding, *parts: str) -> bool:
    return any(all(p in e for p in parts) for e in f.evidence)


def test_volcano_scheduler_not_running() -> None:
    ctx = pod_context("scheduler-not-found-volcano", "ml-team", "resnet-volcano-0")
    found = queueing.check(ctx)
    f = _one(found, "SCHEDULER_NOT_FOUND")
    assert _has(f, "spec.schedulerName: volcano")
    assert _has(f, "volcano-scheduler-5d7f8b9c6-qk8vn", "ImagePullBackOff")
    # volcano-controllers runs, but it is not the scheduler; the PodGroup has no verdict
    assert "GANG_INCOMPLETE" not in _codes(found)


def test_running_volcano_scheduler_is_found() -> None:
    ctx = pod_context("gang-incomplete-volcano", "ml-team", "mpi-bert-worker-0")
    assert "SCHEDULER_NOT_FOUND" not in _codes(queueing.check(ctx))


def test_volcano_gang_counts_room_for_members() -> None:
    ctx = pod_context("gang-incomplete-volcano", "ml-team", "mpi-bert-worker-0")
    f = _one(queueing.check(ctx), "GANG_INCOMPLETE")
    assert _has(f, "minMember 4", "phase Inqueue")
    assert _has(f, "members: 0 placed, 4 waiting")
    assert _has(f, "node dgx-a100-21: 8 nvidia.com/gpu free -> room for 2")
    assert _has(f, "node dgx-a100-22: 4 nvidia.com/gpu free -> room for 1")
    assert _has(f, "node dgx-a100-23: 0 nvidia.com/gpu free -> room for 0")
    assert _has(f, "placeable now: 3 of minMember 4")


def test_kueue_workload_not_admitted() -> None:
    ctx = controller_context("kueue-workload-not-admitted", "team-a", "Job", "llama-lora")
    f = _one(queueing.check(ctx), "QUEUE_QUOTA_EXHAUSTED")
    assert "GANG_INCOMPLETE" not in _codes(queueing.check(ctx))
    assert _has(f, "insufficient unused quota for nvidia.com/gpu in flavor a100-80gb, "
                "8 more needed")
    assert _has(f, "ClusterQueue team-a-cq flavor a100-80gb nvidia.com/gpu: used 8 of "
                "nominalQuota 8")
    assert _has(f, "held by workload team-a/job-mistral-sft-8c3d1: 8 nvidia.com/gpu")
    assert _has(f, "spec.suspend: true")
    assert "team-a/job-mistral-sft-8c3d1" in f.fix.summary
    assert "from 8 to 16" in f.fix.summary
    assert ObjectRef("ClusterQueue", "team-a-cq") in f.objects


def test_preemption_never() -> None:
    ctx = pod_context("preemption-never-policy", "research", "gemma-pretrain-0")
    f = _one(queueing.check(ctx), "PREEMPTION_BLOCKED")
    assert _has(f, "priority 100000", "research-high-nonpreempting", "preemptionPolicy: Never")
    assert _has(f, "hparam-sweep-0 holds 4 nvidia.com/gpu, priority -10")
    assert _has(f, "preemption: not eligible due to preemptionPolicy=Never")


def test_higher_priority_holders_block() -> None:
    ctx = pod_context("preemption-lower-priority", "default", "sdxl-batch")
    f = _one(queueing.check(ctx), "PREEMPTION_BLOCKED")
    assert _has(f, "priority 0 (no priorityClassName)")
    assert _has(f, "prod/chat-api-", "holds 2 nvidia.com/gpu, priority 1000000",
                "production-inference")
    assert "1000000" in f.summary


def test_equal_priority_is_not_a_preemption_problem() -> None:
    ctx = pod_context("insufficient-gpu-held", "ml-team", "train-0")
    assert queueing.check(ctx) == []


def test_preemption_not_helpful_alone_is_not_blocked() -> None:
    ctx = pod_context("node-selector-no-such-label", "cv-team", "yolo-train-84d6b5c97-sv7fh")
    assert "PREEMPTION_BLOCKED" not in _codes(queueing.check(ctx))


def test_cluster_autoscaler_max_size() -> None:
    ctx = pod_context("autoscaler-max-size", "ml-team", "nightly-eval-2q7vz")
    f = _one(queueing.check(ctx), "AUTOSCALER_NO_SCALE_UP")
    assert _has(f, "NotTriggerScaleUp", "1 max node group size reached")
    assert "max node group size reached" in f.summary


def test_karpenter_nodepool_limits() -> None:
    ctx = pod_context("karpenter-nodepool-limit", "inference", "qwen-72b-c5d8f7b69-lq8r2")
    f = _one(queueing.check(ctx), "AUTOSCALER_NO_SCALE_UP")
    assert ("NodePool", "gpu") in {(o.kind, o.name) for o in f.objects}
    assert _has(f, 'exceed limits for nodepool "gpu"')
    assert "kubectl edit nodepool gpu" in f.fix.commands


def test_default_scheduler_pod_without_extras_is_quiet() -> None:
    ctx = pod_context("pending-no-events-yet", "ml-team", "quick-test")
    assert queueing.check(ctx) == []


class _ClassesAt:
    """The snapshot, with every PriorityClass at ``value``: the very same pod objects."""

    def __init__(self, view: Any, value: int) -> None:
        self.view, self.value = view, value

    def __getattr__(self, name: str) -> Any:
        return getattr(self.view, name)

    def get(self, kind: str, name: str, namespace: str | None = None) -> Obj | None:
        obj = self.view.get(kind, name, namespace)
        if kind == "PriorityClass" and obj is not None:
            return {**obj, "value": self.value}
        return obj


def test_a_priority_read_from_its_class_is_not_remembered() -> None:
    # Holders whose spec lacks the priority admission writes take their class's value,
    # which can change while the pods (and what is remembered of their nodes) stay.
    view = reader_for("preemption-lower-priority").view
    for pod in view.list("Pod"):
        if pod["spec"].get("priorityClassName") == "production-inference":
            del pod["spec"]["priority"]

    def check(value: int) -> list[str]:
        reader = Reader(cast(Any, _ClassesAt(view, value)))
        obj = reader.get("Pod", "sdxl-batch", "default")
        assert obj is not None
        return _codes(queueing.check(PendingContext(reader, obj, True, "default")))

    assert "PREEMPTION_BLOCKED" in check(1_000_000)
    assert "PREEMPTION_BLOCKED" not in check(-5)  # lower than the pod's 0: it may preempt
    assert "PREEMPTION_BLOCKED" in check(1_000_000)


def test_the_schedulers_own_never_verdict_is_workload_evidence() -> None:
    """1.24+ prints "preemption: not eligible due to preemptionPolicy=Never" (#107775)."""
    ctx = pod_context("preemption-never-policy", "research", "gemma-pretrain-0")
    f = _one(queueing.check(ctx), "PREEMPTION_BLOCKED")
    assert "workload-evidence" in f.conditions


def test_never_before_the_scheduler_said_so_is_read_from_the_pod() -> None:
    """1.22: no preemption part in the message; the pod's class says Never."""
    reader = reader_for("low-priority-never-preempt/cluster")
    obj = reader.get("Pod", "nightly-embeddings-5qj8d", "batch")
    assert obj is not None
    f = _one(queueing.check(PendingContext(reader, obj, True, "batch")), "PREEMPTION_BLOCKED")
    assert _has(f, "priority 1000 (PriorityClass batch-nonpreempting), preemptionPolicy: Never")
    assert _has(f, "hpo/optuna-trial-10 holds 1 nvidia.com/gpu, priority -100 (scavenger)")
    assert f.conditions == frozenset()


def test_no_victims_below_the_pod_is_the_schedulers_word_for_a_priority_gap() -> None:
    ctx = pod_context("preemption-lower-priority", "default", "sdxl-batch")
    assert "workload-evidence" in _one(queueing.check(ctx), "PREEMPTION_BLOCKED").conditions


def test_when_priority_decides_it_is_the_root_and_the_shortage_its_symptom() -> None:
    from handlers import why_pending
    from handlers.model import Severity
    from handlers.target import parse_target
    for scenario, target in (
            ("low-priority-never-preempt/cluster", "batch/nightly-embeddings-5qj8d"),
            ("preemption-lower-priority", "default/sdxl-batch")):
        d = why_pending.run(reader_for(scenario), parse_target(target, None))
        assert d.root_cause is not None and d.root_cause.code == "PREEMPTION_BLOCKED"
        by_code = {f.code: f for f in d.findings}
        assert by_code["PREEMPTION_BLOCKED"].severity == Severity.CRITICAL
        assert by_code["INSUFFICIENT_GPU"].caused_by == ("PREEMPTION_BLOCKED",)
        assert by_code["INSUFFICIENT_GPU"].severity == Severity.WARNING
