"""Batch job kinds that queues manage besides batch/v1 Jobs: JobSet, RayJob, PyTorchJob.

Each holds one or more pod templates, a suspend switch Kueue flips on admission, and labels
its pods carry (from the projects' own controllers):

- JobSet (jobset.x-k8s.io): ``spec.replicatedJobs[].template.spec.template``, ``spec.suspend``,
  pods labelled ``jobset.sigs.k8s.io/jobset-name``;
- RayJob (ray.io): ``spec.rayClusterSpec.headGroupSpec.template`` and
  ``workerGroupSpecs[].template``, ``spec.suspend``, pods labelled ``ray.io/cluster`` with the
  cluster named in ``status.rayClusterName``;
- PyTorchJob (kubeflow.org): ``spec.pytorchReplicaSpecs.<Master|Worker>.template``,
  ``spec.runPolicy.suspend``, pods labelled ``training.kubeflow.org/job-name``.
"""

from __future__ import annotations

from typing import Any

from handlers.dra import uses_claims
from handlers.gpu import name_of, requests_gpu
from handlers.view import Obj

KINDS = ("JobSet", "RayJob", "PyTorchJob")
ALIASES = {"jobset": "JobSet", "jobsets": "JobSet", "rayjob": "RayJob", "rayjobs": "RayJob",
           "pytorchjob": "PyTorchJob", "pytorchjobs": "PyTorchJob"}


def _spec(obj: Obj) -> dict[str, Any]:
    return obj.get("spec") or {}


def templates(obj: Obj) -> list[dict[str, Any]]:
    """The job's pod templates (``{"metadata": ..., "spec": ...}``), in spec order."""
    spec = _spec(obj)
    kind = obj.get("kind")
    out: list[Any] = []
    if kind == "JobSet":
        out = [((rj.get("template") or {}).get("spec") or {}).get("template")
               for rj in spec.get("replicatedJobs") or []]
    elif kind == "RayJob":
        rc = spec.get("rayClusterSpec") or {}
        out = [(rc.get("headGroupSpec") or {}).get("template")]
        out += [g.get("template") for g in rc.get("workerGroupSpecs") or []]
    elif kind == "PyTorchJob":
        out = [(r or {}).get("template") for r in (spec.get("pytorchReplicaSpecs") or {}).values()]
    return [t for t in out if isinstance(t, dict)]


def gpu_template(obj: Obj) -> dict[str, Any]:
    """The template that asks for GPUs (extended resource or DRA claim), else the first."""
    tmpls = templates(obj)
    for t in tmpls:
        pod = {"spec": t.get("spec") or {}}
        if requests_gpu(pod) or uses_claims(pod):
            return t
    return tmpls[0] if tmpls else {}


def gpu_template_path(obj: Obj) -> str:
    """Where ``gpu_template``'s pod spec is in the job (``spec.replicatedJobs[1]...``)."""
    spec = _spec(obj)
    kind = obj.get("kind")
    chosen = gpu_template(obj)
    if kind == "JobSet":
        for i, rj in enumerate(spec.get("replicatedJobs") or []):
            if ((rj.get("template") or {}).get("spec") or {}).get("template") is chosen:
                return f"spec.replicatedJobs[{i}].template.spec.template.spec"
    elif kind == "RayJob":
        rc = spec.get("rayClusterSpec") or {}
        if (rc.get("headGroupSpec") or {}).get("template") is chosen:
            return "spec.rayClusterSpec.headGroupSpec.template.spec"
        for i, g in enumerate(rc.get("workerGroupSpecs") or []):
            if g.get("template") is chosen:
                return f"spec.rayClusterSpec.workerGroupSpecs[{i}].template.spec"
    elif kind == "PyTorchJob":
        for role, r in (spec.get("pytorchReplicaSpecs") or {}).items():
            if (r or {}).get("template") is chosen:
                return f"spec.pytorchReplicaSpecs.{role}.template.spec"
    return "spec"


def suspended(obj: Obj) -> bool:
    spec = _spec(obj)
    if obj.get("kind") == "PyTorchJob":
        return bool((spec.get("runPolicy") or {}).get("suspend"))
    return bool(spec.get("suspend"))


def pod_label(obj: Obj) -> tuple[str, str] | None:
    """(label key, value) the job's pods carry."""
    kind = obj.get("kind")
    if kind == "JobSet":
        return "jobset.sigs.k8s.io/jobset-name", name_of(obj)
    if kind == "PyTorchJob":
        return "training.kubeflow.org/job-name", name_of(obj)
    if kind == "RayJob":
        cluster = (obj.get("status") or {}).get("rayClusterName")
        return ("ray.io/cluster", str(cluster)) if cluster else None
    return None


def pod_count(obj: Obj) -> int:
    """How many pods the job runs when released."""
    spec = _spec(obj)
    kind = obj.get("kind")
    if kind == "JobSet":
        return sum(int(rj.get("replicas") or 1) * int(
            ((rj.get("template") or {}).get("spec") or {}).get("parallelism") or 1)
            for rj in spec.get("replicatedJobs") or [])
    if kind == "PyTorchJob":
        return sum(int((r or {}).get("replicas") or 1)
                   for r in (spec.get("pytorchReplicaSpecs") or {}).values())
    if kind == "RayJob":
        groups = (spec.get("rayClusterSpec") or {}).get("workerGroupSpecs") or []
        return 1 + sum(int(g.get("replicas") or 0) for g in groups)
    return 1
