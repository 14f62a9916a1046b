"""Where a pod's spec is written: the object a fix to it patches (its Deployment, not the
ReplicaSet or the pod the controller replaces), and the path of the pod spec inside it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

Obj = Mapping[str, Any]
# (kind, name, namespace) -> the object, or None
Get = Callable[[str, str, str], Mapping[str, Any] | None]

# The pod template's spec in each controller kind (their API reference). Batch kinds with
# lists of templates (JobSet, RayJob) have no single path: their pods are patched as pods.
POD_SPEC_PATH = {
    "Pod": "spec",
    "Deployment": "spec.template.spec",
    "StatefulSet": "spec.template.spec",
    "DaemonSet": "spec.template.spec",
    "ReplicaSet": "spec.template.spec",
    "Job": "spec.template.spec",
    "CronJob": "spec.jobTemplate.spec.template.spec",
}


@dataclass(frozen=True)
class SpecOwner:
    """The object that holds a pod's spec: patch ``path`` of ``kind`` ``name``."""

    kind: str
    name: str
    namespace: str
    path: str


def _controller(obj: Obj) -> tuple[str, str] | None:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller", True) and ref.get("kind") and ref.get("name"):
            return str(ref["kind"]), str(ref["name"])
    return None


def spec_owner(pod: Obj, get: Get | None = None) -> SpecOwner:
    """The controller whose template makes the pod: a ReplicaSet's Deployment, read with
    ``get``, or without it known by the ``pod-template-hash`` the Deployment controller
    names its ReplicaSets by; the pod itself when it has no such controller. A CronJob
    behind a Job is not looked up (the Job's template is what made the pod)."""
    meta = pod.get("metadata") or {}
    ns = str(meta.get("namespace") or "default")
    up = _controller(pod)
    if up is None or up[0] not in POD_SPEC_PATH:
        return SpecOwner("Pod", str(meta.get("name") or ""), ns, POD_SPEC_PATH["Pod"])
    kind, name = up
    if kind == "ReplicaSet":
        deploy: tuple[str, str] | None = None
        if get is not None:
            rs = get(kind, name, ns)
            deploy = _controller(rs) if rs is not None else None
        else:
            h = str((meta.get("labels") or {}).get("pod-template-hash") or "")
            if h and name.endswith(f"-{h}"):
                deploy = ("Deployment", name.removesuffix(f"-{h}"))
        if deploy is not None and deploy[0] == "Deployment":
            kind, name = deploy
    return SpecOwner(kind, name, ns, POD_SPEC_PATH[kind])


def of_controller(controller: Obj | None, pod: Obj, get: Get | None = None) -> SpecOwner:
    """The spec owner of a pod, or of the controller whose pods do not exist yet (a
    Deployment's ReplicaSet stands for its Deployment)."""
    if controller is None or controller.get("kind") not in POD_SPEC_PATH:
        return spec_owner(pod, get)
    meta = controller.get("metadata") or {}
    kind, name = str(controller["kind"]), str(meta.get("name") or "")
    ns = str(meta.get("namespace") or (pod.get("metadata") or {}).get("namespace")
             or "default")
    up = _controller(controller)
    if kind == "ReplicaSet" and up is not None and up[0] == "Deployment":
        kind, name = up
    return SpecOwner(kind, name, ns, POD_SPEC_PATH[kind])
