"""A workload target as kubectl takes it, parsed once: ``POD``, ``NS/POD``, ``KIND/NAME``
(deployment, statefulset, job, replicaset, jobset, rayjob, pytorchjob and their short and
group-qualified names) with a namespace beside it; without one, ``default``.
"""

from __future__ import annotations

from dataclasses import dataclass

from handlers import batchjobs
from handlers.errors import GpubotError

KIND_ALIASES = {
    "pod": "Pod", "pods": "Pod", "po": "Pod",
    "deployment": "Deployment", "deployments": "Deployment", "deploy": "Deployment",
    "statefulset": "StatefulSet", "statefulsets": "StatefulSet", "sts": "StatefulSet",
    "job": "Job", "jobs": "Job",
    "replicaset": "ReplicaSet", "replicasets": "ReplicaSet", "rs": "ReplicaSet",
}
KIND_ALIASES.update(batchjobs.ALIASES)
for _full in list(KIND_ALIASES):
    # kubectl also accepts group-qualified names: deployment.apps/x, job.batch/x.
    KIND_ALIASES[f"{_full}.apps"] = KIND_ALIASES[_full]
    KIND_ALIASES[f"{_full}.batch"] = KIND_ALIASES[_full]


class UsageError(GpubotError):
    """The target or its options are malformed (exit code 2 in the CLI)."""


@dataclass(frozen=True)
class Target:
    kind: str  # Kubernetes' spelling: Pod, Deployment, JobSet, ...
    name: str
    namespace: str

    def __str__(self) -> str:
        return f"{self.kind.lower()}/{self.namespace}/{self.name}"


def parse_target(text: str, namespace: str | None = None) -> Target:
    text = text.strip()
    if not text:
        raise UsageError("no target given: name a pod (ml-team/train-0) or a controller "
                         "(deployment/train -n ml-team)")
    parts = text.split("/")
    if len(parts) == 1:
        return Target("Pod", parts[0], namespace or "default")
    if len(parts) == 2:
        head, name = parts
        if head.lower() in KIND_ALIASES:
            return Target(KIND_ALIASES[head.lower()], name, namespace or "default")
        if namespace and namespace != head:
            raise UsageError(f"target {text!r} names namespace {head!r} but -n says "
                             f"{namespace!r}: give one of them")
        return Target("Pod", name, head)
    if len(parts) == 3 and parts[0].lower() in KIND_ALIASES:
        # KIND/NS/NAME is not kubectl's, but people type it; accept the obvious meaning.
        if namespace and namespace != parts[1]:
            raise UsageError(f"target {text!r} names namespace {parts[1]!r} but -n says "
                             f"{namespace!r}")
        return Target(KIND_ALIASES[parts[0].lower()], parts[2], parts[1])
    raise UsageError(f"cannot read target {text!r}: use POD, NS/POD or KIND/NAME with -n NS "
                     "(kinds: pod, deployment, statefulset, job, replicaset, jobset, rayjob, "
                     "pytorchjob)")
