"""Fields the apiserver always writes, filled in where a snapshot or a request left them out.

The apiserver serialises Go structs: a field without ``omitempty`` is always present (a zero
value: ``""``, ``0``, ``false``, ``null``) and struct-valued fields (``spec``, ``status``,
``involvedObject``) always appear. Hand-written snapshots often leave these out, and the
official Python client's models reject objects without some of them (``imageID`` of a
container status, ``exitCode`` of a terminated state, ``nodeInfo.machineID``, ...), so the
fake stores what a real server would have returned.
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]

_ALWAYS: dict[str, tuple[str, ...]] = {  # struct fields serialised even when empty
    "Pod": ("spec", "status"),
    "Node": ("spec", "status"),
    "Namespace": ("spec", "status"),
    "DaemonSet": ("spec", "status"),
    "Deployment": ("spec", "status"),
    "ReplicaSet": ("spec", "status"),
    "StatefulSet": ("spec", "status"),
    "Job": ("spec", "status"),
    "CronJob": ("spec", "status"),
    "ResourceQuota": ("spec", "status"),
    "LimitRange": ("spec",),
    "PersistentVolume": ("spec", "status"),
    "PersistentVolumeClaim": ("spec", "status"),
    "Service": ("spec", "status"),
    "ReplicationController": ("spec", "status"),
    "Event": ("involvedObject", "source"),
}
_NODE_INFO = ("machineID", "systemUUID", "bootID", "kernelVersion", "osImage",
              "containerRuntimeVersion", "kubeletVersion", "kubeProxyVersion",
              "operatingSystem", "architecture")
_WORKLOAD_STATUS = {
    "DaemonSet": ("currentNumberScheduled", "numberMisscheduled", "desiredNumberScheduled",
                  "numberReady"),
    "ReplicaSet": ("replicas",),
    "StatefulSet": ("replicas",),
}


def _dicts(value: Any) -> list[Obj]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _container_statuses(status: Obj) -> None:
    for key in ("initContainerStatuses", "containerStatuses", "ephemeralContainerStatuses"):
        for cs in _dicts(status.get(key)):
            cs.setdefault("name", "")
            cs.setdefault("ready", False)
            cs.setdefault("restartCount", 0)
            cs.setdefault("image", "")
            cs.setdefault("imageID", "")
            for state_key in ("state", "lastState"):
                state = cs.get(state_key)
                if isinstance(state, dict) and isinstance(state.get("terminated"), dict):
                    state["terminated"].setdefault("exitCode", 0)


def fill(kind: str, obj: Obj) -> Obj:
    """``obj`` (changed in place) with the always-present fields of its kind."""
    for key in _ALWAYS.get(kind, ()):
        if not isinstance(obj.get(key), dict):
            obj[key] = {}
    for meta_ref in _dicts((obj.get("metadata") or {}).get("ownerReferences")):
        for key in ("apiVersion", "kind", "name", "uid"):
            meta_ref.setdefault(key, "")
    status = obj.get("status")
    status = status if isinstance(status, dict) else {}
    if kind == "Pod":
        _container_statuses(status)
        for cond in _dicts(status.get("conditions")):
            cond.setdefault("status", "Unknown")
            cond.setdefault("type", "")
    elif kind == "Node":
        if not isinstance(status.get("nodeInfo"), dict):
            status["nodeInfo"] = {}
        for key in _NODE_INFO:
            status["nodeInfo"].setdefault(key, "")
        for addr in _dicts(status.get("addresses")):
            addr.setdefault("type", "")
            addr.setdefault("address", "")
        for cond in _dicts(status.get("conditions")):
            cond.setdefault("status", "Unknown")
            cond.setdefault("type", "")
        for taint in _dicts((obj.get("spec") or {}).get("taints")):
            taint.setdefault("key", "")
            taint.setdefault("effect", "")
    elif kind == "Event":
        obj.setdefault("eventTime", None)
        obj.setdefault("reportingComponent", "")
        obj.setdefault("reportingInstance", "")
        obj.setdefault("firstTimestamp", None)
        obj.setdefault("lastTimestamp", None)
    elif kind in _WORKLOAD_STATUS:
        for key in _WORKLOAD_STATUS[kind]:
            status.setdefault(key, 0)
    if kind in ("Job", "Deployment", "DaemonSet", "StatefulSet", "ReplicaSet"):
        for cond in _dicts(status.get("conditions")):
            cond.setdefault("status", "Unknown")
            cond.setdefault("type", "")
    if kind in ("DaemonSet", "Deployment", "StatefulSet", "ReplicaSet"):
        spec = obj["spec"]
        spec.setdefault("selector", {})
        if kind != "ReplicaSet":
            spec.setdefault("template", {})
    return obj
