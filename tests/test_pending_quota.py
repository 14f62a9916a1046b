"""Quota and LimitRange checks, run on scenario snapshots through a hand-built context."""

from __future__ import annotations

from handlers.model import Finding, Severity
from handlers.pending import quota
from tests.pending_ctx import controller_context, pod_context


def _by_code(findings: list[Finding], code: str) -> list[Finding]:
    return [f for f in findings if f.code == code]


def _one(findings: list[Finding], code: str) -> Finding:
    found = _by_code(findings, code)
    assert len(found) == 1, [f.code for f in findings]
    return found[0]


def _has(f: Finding, *parts: str) -> bool:
    return any(all(p in e for p in parts) for e in f.evidence)


def test_exceeded_quota_names_used_hard_and_the_holders() -> None:
    ctx = controller_context("quota-exceeded-deployment", "vision", "Deployment", "sd-finetune")
    found = quota.check(ctx)
    f = _one(found, "QUOTA_EXCEEDED")
    assert f.severity is Severity.CRITICAL
    assert ("ResourceQuota", "gpu-quota") in {(o.kind, o.name) for o in f.objects}
    assert _has(f, "requests.nvidia.com/gpu used 8 / hard 8", "asks 4")
    assert _has(f, "clip-pretrain-0", "nvidia.com/gpu=4")
    assert _has(f, "clip-pretrain-1", "nvidia.com/gpu=4")
    assert _has(f, "exceeded quota: gpu-quota")
    assert '"requests.nvidia.com/gpu":"12"' in "\n".join(f.fix.commands)
    # requests-only quota is the form the API server enforces: no warning about it
    assert not _by_code(found, "QUOTA_REQUESTS_LIMITS_UNEQUAL")
    assert not _by_code(found, "QUOTA_NOT_READY")


def test_exceeded_quota_from_state_alone() -> None:
    ctx = controller_context("quota-exceeded-deployment", "vision", "Deployment", "sd-finetune")
    ctx.controller_events = []  # events expired: the quota status still proves it
    f = _one(quota.check(ctx), "QUOTA_EXCEEDED")
    assert _has(f, "used 8 / hard 8", "asks 4")


def test_existing_pod_is_not_charged_twice() -> None:
    ctx = pod_context("insufficient-gpu-held", "ml-team", "train-0")
    assert quota.check(ctx) == []


def test_status_unknown_quota() -> None:
    ctx = controller_context("quota-status-unknown", "speech", "Job", "tts-train")
    found = quota.check(ctx)
    f = _one(found, "QUOTA_NOT_READY")
    assert _has(f, "status unknown for quota: gpu-quota")
    assert _has(f, "status.used: (none)")
    assert not _by_code(found, "QUOTA_EXCEEDED")


def test_must_specify_and_unequal_gpu_quota() -> None:
    ctx = controller_context("quota-must-specify-and-unequal", "nlp", "StatefulSet", "t5-serving")
    found = quota.check(ctx)
    nr = _one(found, "QUOTA_NOT_READY")
    assert _has(nr, "must specify limits.cpu for: server; limits.memory for: server")
    uneq = _one(found, "QUOTA_REQUESTS_LIMITS_UNEQUAL")
    assert uneq.severity is Severity.WARNING
    assert _has(uneq, "limits.nvidia.com/gpu: 4")
    assert _has(uneq, "requests.nvidia.com/gpu: 8")


def test_must_specify_is_found_without_the_event() -> None:
    ctx = controller_context("quota-must-specify-and-unequal", "nlp", "StatefulSet", "t5-serving")
    ctx.controller_events = []
    nr = _one(quota.check(ctx), "QUOTA_NOT_READY")
    assert _has(nr, "tracks limits.cpu, limits.memory")


def test_time_slicing_quota_counts_slices() -> None:
    ctx = controller_context("quota-timeslicing-miscount", "notebooks", "Deployment",
                             "jupyter-gpu-eve")
    found = quota.check(ctx)
    ex = _one(found, "QUOTA_EXCEEDED")
    assert _has(ex, "requests.nvidia.com/gpu used 4 / hard 4", "asks 1")
    assert sum(1 for e in ex.evidence if e.startswith("holder notebooks/jupyter-gpu-")) == 4
    mis = _one(found, "QUOTA_SHARING_MISCOUNT")
    assert _has(mis, "nvidia.com/gpu.replicas=4", "nvidia.com/gpu.count=4",
                "capacity nvidia.com/gpu: 16")
    assert "1 physical GPU" in mis.summary


def test_mig_slices_outside_the_quota() -> None:
    ctx = pod_context("quota-mig-profiles-uncounted", "inference", "phi3-mig-0")
    found = quota.check(ctx)
    mis = _one(found, "QUOTA_SHARING_MISCOUNT")
    assert _has(mis, "pod requests nvidia.com/mig-3g.40gb: 1")
    assert _has(mis, "counts only: requests.nvidia.com/gpu=4")
    assert "16 in use" in mis.summary
    assert not _by_code(found, "QUOTA_EXCEEDED")


def test_limitrange_max_per_container_and_defaults() -> None:
    ctx = controller_context("limitrange-max-violation", "ml-team", "Deployment", "vit-train")
    found = quota.check(ctx)
    v = _one(found, "LIMITRANGE_VIOLATION")
    assert _has(v, "maximum nvidia.com/gpu usage per Container is 2, but limit is 4")
    d = _one(found, "LIMITRANGE_DEFAULT_GPU")
    assert _has(d, "container tensorboard asks no GPU; gets nvidia.com/gpu=2")
    assert not _has(d, "container trainer")


def test_limitrange_max_from_state_alone() -> None:
    ctx = controller_context("limitrange-max-violation", "ml-team", "Deployment", "vit-train")
    ctx.controller_events = []
    v = _one(quota.check(ctx), "LIMITRANGE_VIOLATION")
    assert _has(v, "container trainer: maximum nvidia.com/gpu is 2, but limit is 4")


def test_limitrange_pod_max() -> None:
    ctx = controller_context("limitrange-pod-max-job", "interns", "Job", "ddp-homework")
    found = quota.check(ctx)
    v = _one(found, "LIMITRANGE_VIOLATION")
    assert "per Pod" in v.summary and "1 nvidia.com/gpu" in v.summary
    assert not _by_code(found, "LIMITRANGE_DEFAULT_GPU")


def test_limitrange_min_injects_request_without_limit() -> None:
    ctx = controller_context("limit-missing-limitrange-min", "ml-team", "Deployment",
                             "bert-finetune")
    found = quota.check(ctx)
    d = _one(found, "LIMITRANGE_DEFAULT_GPU")
    assert _has(d, "LimitRange gpu-defaults: defaultRequest nvidia.com/gpu: 1")
    assert _has(d, "container fluent-bit asks no GPU")
    assert not _by_code(found, "LIMITRANGE_VIOLATION")


def test_limitrange_default_on_existing_pod_reads_the_annotation() -> None:
    ctx = pod_context("limitrange-default-injects-gpus", "ml-team", "resnet-train-0")
    d = _one(quota.check(ctx), "LIMITRANGE_DEFAULT_GPU")
    assert _has(d, "container metrics-exporter asks no GPU; gets nvidia.com/gpu=1")
    assert _has(d, "container tensorboard asks no GPU; gets nvidia.com/gpu=1")
    assert not _has(d, "container trainer")
    assert d.severity is Severity.CRITICAL
