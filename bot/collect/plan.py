"""What a snapshot holds: the kinds the commands read, and which objects of them.

The kinds are every command's ``reads`` (``handlers/registry.py``, the same list the RBAC
rules are checked against), so a kind a new command reads is captured without a change
here. ConfigMaps are the exception to "every object": gpubot reads only the GPU stack's
(the device plugin's sharing config) and kubeadm's ``kube-system/kubelet-config``, and a
ConfigMap can hold anything, so only those are taken.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from handlers.chain.pods import pod_state
from handlers.gpu import (
    dra_component,
    is_device_plugin_pod,
    is_operator_controller,
    operator_component,
    requests_gpu,
)
from handlers.registry import COMMANDS
from handlers.view import CLUSTER_SCOPED, Obj

LOGS = "pods/log"
# Read before the others: which namespaces hold the GPU stack decides which ConfigMaps are
# taken, and -n keeps the events of the objects taken from other namespaces.
FIRST = ("Node", "Namespace", "Pod", "DaemonSet", "ClusterPolicy")
LAST = ("ConfigMap", "Event")
# With -n NS these are read in every namespace and filtered (what NS's pods share nodes,
# devices and the GPU stack with); every other namespaced kind is read in NS only.
CLUSTER_WIDE = frozenset({"Pod", "DaemonSet", "ControllerRevision", "ResourceClaim", "Event"})
KUBELET_CONFIG = ("kube-system", "kubelet-config")
OPERATOR_NAMESPACE = "gpu-operator"  # where the chain looks when a ClusterPolicy names none


def kinds() -> list[str]:
    """Every kind a command reads, in reading order."""
    read = set().union(*(spec.reads for spec in COMMANDS.values())) - {LOGS}
    middle = sorted(read - set(FIRST) - set(LAST))
    return [k for k in FIRST if k in read] + middle + [k for k in LAST if k in read]


def namespaced(kind: str) -> bool:
    return kind not in CLUSTER_SCOPED


def meta(obj: Obj) -> dict[str, Any]:
    m = obj.get("metadata")
    return m if isinstance(m, dict) else {}


def ns_name(obj: Obj) -> tuple[str, str]:
    m = meta(obj)
    return str(m.get("namespace") or ""), str(m.get("name") or "")


def is_stack(obj: Obj) -> bool:
    """A GPU stack component: device plugin, operator component, DRA driver (a pod, or a
    controller by its pod template)."""
    template = (obj.get("spec") or {}).get("template") if obj.get("kind") != "Pod" else None
    for o in (obj, template) if isinstance(template, dict) else (obj,):
        if (is_device_plugin_pod(o) or operator_component(o) or dra_component(o)
                or is_operator_controller(o)):
            return True
    return False


def stack_namespaces(objects: dict[str, list[Obj]]) -> set[str]:
    """Namespaces running the GPU stack, and the operator's default when a ClusterPolicy
    exists: where the plugin's config ConfigMap is looked for."""
    found = {ns_name(o)[0] for kind in ("Pod", "DaemonSet") for o in objects.get(kind, [])
             if is_stack(o)}
    if objects.get("ClusterPolicy"):
        found.add(OPERATOR_NAMESPACE)
    return found - {""}


def strings(value: Any) -> Iterator[str]:
    """Every string in a JSON value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)


def gpu_config_maps(found: Iterable[Obj], objects: dict[str, list[Obj]]) -> list[Obj]:
    """The ConfigMaps of the GPU stack's namespaces that gpubot reads: one a ClusterPolicy or a
    plugin DaemonSet names, or one holding a ``sharing:`` config."""
    named = {s for o in objects.get("ClusterPolicy", []) for s in strings(o.get("spec"))}
    named |= {s for o in objects.get("DaemonSet", []) if is_stack(o)
              for s in strings(o.get("spec"))}
    out = []
    for cm in found:
        data = cm.get("data")
        values = data.values() if isinstance(data, dict) else ()
        if ns_name(cm)[1] in named or any(isinstance(v, str) and "sharing:" in v
                                         for v in values):
            out.append(cm)
    return out


def holds_node(pod: Obj) -> bool:
    """Bound to a node and not finished: it holds what the scheduler counts."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    return bool(spec.get("nodeName")) and status.get("phase") not in ("Succeeded", "Failed")


def keep_in_scope(kind: str, objs: list[Obj], namespace: str,
                  taken: dict[str, list[Obj]]) -> list[Obj]:
    """With -n: what of a cluster-wide list matters to NS's diagnoses."""
    if kind == "Pod":
        return [p for p in objs
                if ns_name(p)[0] == namespace or holds_node(p) or is_stack(p)]
    if kind == "DaemonSet":
        return [d for d in objs if ns_name(d)[0] == namespace or is_stack(d)]
    if kind == "ControllerRevision":  # a DaemonSet's rollout history
        owners = {ns_name(d) for d in taken.get("DaemonSet", [])}
        return [r for r in objs if ns_name(r)[0] == namespace or any(
            (ns_name(r)[0], str(o.get("name"))) in owners
            for o in meta(r).get("ownerReferences") or [] if isinstance(o, dict))]
    if kind == "Event":
        kept = {(k, *ns_name(o)) for k, os in taken.items() for o in os}
        out = []
        for e in objs:
            inv = e.get("involvedObject") or e.get("regarding") or {}
            key = (str(inv.get("kind")), str(inv.get("namespace") or ""), str(inv.get("name")))
            if (ns_name(e)[0] == namespace or key[0] in CLUSTER_SCOPED or key in kept):
                out.append(e)
        return out
    return objs  # ResourceClaim: every claim holds devices some pod of NS may need


def log_pods(pods: Iterable[Obj], now: Any) -> list[Obj]:
    """Pods whose logs diagnoses read: the GPU stack's, GPU pods', and any pod not running as
    it should (why-pending reads its target's), when a container of theirs has run."""
    out = []
    for pod in pods:
        if not ran(pod):
            continue
        if is_stack(pod) or requests_gpu(pod) or _unwell(pod, now):
            out.append(pod)
    return out


def _unwell(pod: Obj, now: Any) -> bool:
    status = pod.get("status") or {}
    if status.get("phase") not in ("Running", "Succeeded"):
        return True
    restarted = any(int(cs.get("restartCount") or 0) for cs in status.get("containerStatuses")
                    or [] if isinstance(cs, dict))
    return restarted or pod_state(pod, now).failing


_STATUS_LISTS = ("initContainerStatuses", "containerStatuses", "ephemeralContainerStatuses")


def ran(pod: Obj) -> list[str]:
    """Containers that have run (their log can be read), in status order."""
    status = pod.get("status") or {}
    out = []
    for key in _STATUS_LISTS:
        for cs in status.get(key) or []:
            if not isinstance(cs, dict):
                continue
            state, last = cs.get("state") or {}, cs.get("lastState") or {}
            if "running" in state or "terminated" in state or "terminated" in last:
                out.append(str(cs.get("name") or ""))
    return [c for c in dict.fromkeys(out) if c]
