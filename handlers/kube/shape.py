"""The shapes of the fields handlers read, checked once where an object enters.

A snapshot file or an API answer may hold anything: hand-edited YAML, a truncated dump, a
misbehaving server. ``misfit(obj)`` checks the fields any handler reads (``spec.containers``
is a list of mappings, a request is a quantity that parses to a finite, sane number, a
label value is a string, ...) and returns the first field that does not fit; the snapshot
loader and the live view skip such an object and list it under "not read", so handlers
may trust every object they are given. Only the fields listed here are checked: anything
else in an object is never read.

Kubernetes JSON writes an unset field as ``null`` or leaves it out; a ``null`` among the
fields below is removed (in place), so that ``obj.get("spec", {})`` holds.

The checkers are closures built once from the tables below: ``misfit`` on a pod of a
30,000-pod dump costs a few microseconds, and nothing when it fits but the calls.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from handlers.kube.quantity import QuantityError, parse_quantity

# Larger than any real quantity or count (Kubernetes quantities are int64 millis), small
# enough that sums of them stay exact floats and finite.
MAX_NUMBER = float(2**63)
MAX_NAME = 253  # DNS subdomain: the longest metadata.name Kubernetes accepts
MAX_TEXT = 4096  # event messages, condition messages: cut to this when longer

_Check = Callable[[Any], None]


class _Bad(Exception):
    """A field that does not fit; ``path`` is built while unwinding, innermost first."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem
        self.path: list[str] = []


def misfit(obj: dict[str, Any]) -> str | None:
    """``"spec.containers[0].resources.requests.cpu: not a quantity ('1.5x')"`` for the
    first field of ``obj`` (a dict with ``kind`` set) that handlers could not read, or None
    when it fits. Removes ``null`` fields and cuts over-long messages, in place."""
    check = _BY_KIND.get(obj.get("kind"), _OBJECT)  # type: ignore[arg-type]
    try:
        check(obj)
    except _Bad as bad:
        return f"{_join(reversed(bad.path))}: {bad.problem}"
    except RecursionError:  # only a pathologically nested document gets here
        return "nested too deep"
    return None


_LONG_LINE = re.compile(rf"[^\n]{{{MAX_TEXT + 1},}}")


def cut_long_lines(text: str) -> str:
    """Log text with every line over MAX_TEXT characters cut (a minified JSON blob or a
    binary dump on one line): log patterns match lines, and a line is printed whole."""
    if not _LONG_LINE.search(text):
        return text
    return _LONG_LINE.sub(lambda m: m.group()[:MAX_TEXT] + " [cut]", text)


def _join(parts: Any) -> str:
    out = ""
    for p in parts:
        out += p if p.startswith("[") or not out else "." + p
    return out


def type_name(value: Any) -> str:
    kinds = {str: "a string", list: "a list", dict: "a mapping", int: "a number",
             float: "a number", bool: "a boolean"}
    return "null" if value is None else kinds.get(type(value), type(value).__name__)


# -- leaf checks -------------------------------------------------------------------------------


def _str(v: Any) -> None:
    if v.__class__ is not str:
        raise _Bad(f"not a string ({type_name(v)})")


def _name(v: Any) -> None:
    _str(v)
    if not v or len(v) > MAX_NAME:
        raise _Bad("empty" if not v else f"longer than {MAX_NAME} characters")


def _bool(v: Any) -> None:
    if v.__class__ is not bool:
        raise _Bad(f"not true or false ({type_name(v)})")


def _int(v: Any) -> None:
    if v.__class__ is not int:
        raise _Bad(f"not a whole number ({type_name(v)})")
    if not -MAX_NUMBER <= v <= MAX_NUMBER:
        raise _Bad("number out of range")


def _any_scalar(v: Any) -> None:
    """A value shown as text (a ConfigMap entry, an env value): any scalar."""
    if v.__class__ in (dict, list):
        raise _Bad(f"not a single value ({type_name(v)})")


def _quantity(v: Any) -> None:
    if v.__class__ is str:
        if v in _GOOD_QUANTITIES:
            return
        try:
            q = parse_quantity(v)
        except QuantityError:
            raise _Bad(f"not a quantity ({_short(v)})") from None
    elif v.__class__ in (int, float):
        q = float(v)
    else:
        raise _Bad(f"not a quantity ({type_name(v)})")
    if not math.isfinite(q) or abs(q) > MAX_NUMBER:
        raise _Bad(f"quantity out of range ({_short(v)})")
    if v.__class__ is str and len(_GOOD_QUANTITIES) < 10_000:
        _GOOD_QUANTITIES.add(v)


# Quantity strings seen to fit: a dump repeats a few hundred values ("8", "16Gi") a
# hundred thousand times.
_GOOD_QUANTITIES: set[str] = set()


def _short(v: Any) -> str:
    text = repr(v) if isinstance(v, str) else str(v) if isinstance(v, int | float) else "?"
    return text if len(text) <= 40 else text[:37] + "..."


# -- combinators -------------------------------------------------------------------------------


def _fields(spec: dict[str, _Check], cut: tuple[str, ...] = ()) -> _Check:
    """A mapping whose listed keys, when set, fit their checks; ``cut``: string fields
    shortened to MAX_TEXT (messages that are only ever printed).

    Walks the keys the mapping has (fewer than those listed, mostly), and a string or
    boolean where one is wanted passes without a call: a 30,000-pod dump goes through here
    a million times."""
    table = {key: (fn, _FAST.get(fn)) for key, fn in spec.items()}

    def check(v: Any) -> None:
        if v.__class__ is not dict:
            raise _Bad(f"not a mapping ({type_name(v)})")
        nulls = None
        for key, x in v.items():
            entry = table.get(key)
            if entry is None or x.__class__ is entry[1]:
                continue
            if x is None:
                nulls = [*(nulls or ()), key]
                continue
            try:
                entry[0](x)
            except _Bad as bad:
                bad.path.append(key)
                raise
        if nulls:
            for key in nulls:
                del v[key]
        for key in cut:
            x = v.get(key)
            if x.__class__ is str and len(x) > MAX_TEXT:
                v[key] = x[:MAX_TEXT] + " [cut]"

    return check


_FAST: dict[_Check, type] = {_str: str, _bool: bool}


def _list(fn: _Check) -> _Check:
    fast = _FAST.get(fn)

    def check(v: Any) -> None:
        if v.__class__ is not list:
            raise _Bad(f"not a list ({type_name(v)})")
        for i, x in enumerate(v):
            if x.__class__ is fast:
                continue
            try:
                if x is None:
                    raise _Bad("null item")
                fn(x)
            except _Bad as bad:
                bad.path.append(f"[{i}]")
                raise

    return check


def _map(fn: _Check) -> _Check:
    """A mapping of string keys to values that fit ``fn`` (labels, requests, data)."""
    fast = _FAST.get(fn)

    def check(v: Any) -> None:
        if v.__class__ is not dict:
            raise _Bad(f"not a mapping ({type_name(v)})")
        for k, x in v.items():
            if x.__class__ is fast:
                continue
            try:
                fn(x)
            except _Bad as bad:
                bad.path.append(str(k))
                raise

    return check


_STRS = _list(_str)
_STR_MAP = _map(_str)


def _quantities(v: Any) -> None:
    """A mapping of resource names to quantities (requests, capacity, quota)."""
    if v.__class__ is not dict:
        raise _Bad(f"not a mapping ({type_name(v)})")
    good = _GOOD_QUANTITIES
    for k, x in v.items():
        if x in good if x.__class__ is str else False:
            continue
        try:
            _quantity(x)
        except _Bad as bad:
            bad.path.append(str(k))
            raise


_QUANTITIES = _quantities

# -- shared parts ------------------------------------------------------------------------------

_META = _fields({
    "name": _name, "namespace": _name, "uid": _str, "generateName": _str,
    "resourceVersion": _str, "creationTimestamp": _str, "deletionTimestamp": _str,
    "labels": _STR_MAP, "annotations": _STR_MAP,
    "ownerReferences": _list(_fields({
        "kind": _str, "name": _str, "uid": _str, "apiVersion": _str, "controller": _bool})),
})
_CONDITIONS = _list(_fields({
    "type": _str, "status": _str, "reason": _str, "message": _str,
    "lastTransitionTime": _str, "lastHeartbeatTime": _str, "lastProbeTime": _str,
}, cut=("message",)))
_REQUIREMENTS = _list(_fields({"key": _str, "operator": _str, "values": _STRS}))
_LABEL_SELECTOR = _fields({"matchLabels": _STR_MAP, "matchExpressions": _REQUIREMENTS})
_NODE_SELECTOR_TERM = _fields({"matchExpressions": _REQUIREMENTS, "matchFields": _REQUIREMENTS})
_NODE_SELECTOR = _fields({"nodeSelectorTerms": _list(_NODE_SELECTOR_TERM)})
_AFFINITY_TERM = _fields({
    "labelSelector": _LABEL_SELECTOR, "namespaceSelector": _LABEL_SELECTOR,
    "namespaces": _STRS, "topologyKey": _str, "matchLabelKeys": _STRS,
    "mismatchLabelKeys": _STRS,
})
_POD_AFFINITY = _fields({
    "requiredDuringSchedulingIgnoredDuringExecution": _list(_AFFINITY_TERM),
    "preferredDuringSchedulingIgnoredDuringExecution": _list(_fields({
        "weight": _int, "podAffinityTerm": _AFFINITY_TERM})),
})
_AFFINITY = _fields({
    "nodeAffinity": _fields({
        "requiredDuringSchedulingIgnoredDuringExecution": _NODE_SELECTOR,
        "preferredDuringSchedulingIgnoredDuringExecution": _list(_fields({
            "weight": _int, "preference": _NODE_SELECTOR_TERM})),
    }),
    "podAffinity": _POD_AFFINITY,
    "podAntiAffinity": _POD_AFFINITY,
})
_TOLERATIONS = _list(_fields({
    "key": _str, "operator": _str, "value": _str, "effect": _str, "tolerationSeconds": _int}))
_RESOURCES = _fields({"requests": _QUANTITIES, "limits": _QUANTITIES})
_SECURITY = _fields({
    "privileged": _bool, "runAsUser": _int, "runAsGroup": _int, "runAsNonRoot": _bool,
    "allowPrivilegeEscalation": _bool,
    "capabilities": _fields({"add": _STRS, "drop": _STRS}),
    "seLinuxOptions": _STR_MAP, "seccompProfile": _STR_MAP,
})
_PORTS = _list(_fields({
    "containerPort": _int, "hostPort": _int, "protocol": _str, "hostIP": _str, "name": _str}))
_CONTAINER = {"name": _str, "image": _str, "restartPolicy": _str, "resources": _RESOURCES,
              "ports": _PORTS}
# Settings read only from DaemonSet and other pod templates (device plugin checks): pods
# are not checked for them, which keeps the pods of a large dump cheap to check.
_TEMPLATE_CONTAINER = {
    **_CONTAINER,
    "env": _list(_fields({"name": _str, "value": _str})),
    "volumeMounts": _list(_fields({
        "name": _str, "mountPath": _str, "readOnly": _bool, "subPath": _str})),
    "securityContext": _SECURITY,
}
_KEY_PATHS = _list(_fields({"key": _str, "path": _str}))
_VOLUME = {
    "name": _str,
    "persistentVolumeClaim": _fields({"claimName": _str, "readOnly": _bool}),
    "ephemeral": _fields({"volumeClaimTemplate": _fields({
        "metadata": _fields({"labels": _STR_MAP, "annotations": _STR_MAP}),
        "spec": _fields({"storageClassName": _str, "accessModes": _STRS,
                         "resources": _RESOURCES})})}),
}
_TEMPLATE_VOLUME = {
    **_VOLUME,
    "hostPath": _fields({"path": _str, "type": _str}),
    "configMap": _fields({"name": _str, "items": _KEY_PATHS}),
    "projected": _fields({"sources": _list(_fields({
        "configMap": _fields({"name": _str, "items": _KEY_PATHS})}))}),
}


def _pod_spec(container: dict[str, _Check], volume: dict[str, _Check],
              more: dict[str, _Check]) -> _Check:
    containers = _list(_fields(container))
    return _fields({
        "nodeName": _str, "nodeSelector": _STR_MAP, "affinity": _AFFINITY,
        "tolerations": _TOLERATIONS, "schedulerName": _str, "priority": _int,
        "priorityClassName": _str, "preemptionPolicy": _str, "runtimeClassName": _str,
        "restartPolicy": _str, "serviceAccountName": _str, "hostNetwork": _bool,
        "activeDeadlineSeconds": _int,
        "containers": containers, "initContainers": containers,
        "ephemeralContainers": containers, "volumes": _list(_fields(volume)),
        "overhead": _QUANTITIES, "resources": _RESOURCES,
        "schedulingGates": _list(_fields({"name": _str})),
        "topologySpreadConstraints": _list(_fields({
            "maxSkew": _int, "topologyKey": _str, "whenUnsatisfiable": _str,
            "labelSelector": _LABEL_SELECTOR, "minDomains": _int})),
        **more,
    })


_POD_SPEC = _pod_spec(_CONTAINER, _VOLUME, {})
_TEMPLATE_SPEC = _pod_spec(_TEMPLATE_CONTAINER, _TEMPLATE_VOLUME,
                           {"securityContext": _SECURITY})
_STATE = _fields({
    "waiting": _fields({"reason": _str, "message": _str}, cut=("message",)),
    "running": _fields({"startedAt": _str}),
    "terminated": _fields({
        "reason": _str, "message": _str, "exitCode": _int, "signal": _int,
        "startedAt": _str, "finishedAt": _str}, cut=("message",)),
})
_CONTAINER_STATUSES = _list(_fields({
    "name": _str, "image": _str, "imageID": _str, "ready": _bool, "started": _bool,
    "restartCount": _int, "state": _STATE, "lastState": _STATE,
    "resources": _RESOURCES, "allocatedResources": _QUANTITIES,
}))
_POD_STATUS = _fields({
    "phase": _str, "reason": _str, "message": _str, "conditions": _CONDITIONS,
    "startTime": _str, "nominatedNodeName": _str, "qosClass": _str, "hostIP": _str,
    "resize": _str,
    "containerStatuses": _CONTAINER_STATUSES, "initContainerStatuses": _CONTAINER_STATUSES,
    "ephemeralContainerStatuses": _CONTAINER_STATUSES,
}, cut=("message",))
_TEMPLATE = _fields({"metadata": _fields({"labels": _STR_MAP, "annotations": _STR_MAP,
                                          "name": _str, "namespace": _str}),
                     "spec": _TEMPLATE_SPEC})
_WORKLOAD_STATUS = _fields({
    "replicas": _int, "readyReplicas": _int, "availableReplicas": _int,
    "updatedReplicas": _int, "unavailableReplicas": _int,
    "desiredNumberScheduled": _int, "currentNumberScheduled": _int, "numberReady": _int,
    "numberAvailable": _int, "numberUnavailable": _int, "numberMisscheduled": _int,
    "updatedNumberScheduled": _int, "active": _int, "succeeded": _int, "failed": _int,
    "ready": _int, "conditions": _CONDITIONS,
})
_JOB_SPEC = _fields({
    "parallelism": _int, "completions": _int, "suspend": _bool, "backoffLimit": _int,
    "activeDeadlineSeconds": _int, "selector": _LABEL_SELECTOR, "template": _TEMPLATE,
})
_EVENT_SOURCE = _fields({"component": _str, "host": _str})
_INVOLVED = _fields({"kind": _str, "name": _str, "namespace": _str, "uid": _str,
                     "fieldPath": _str, "apiVersion": _str})


def _kind(spec: dict[str, _Check], cut: tuple[str, ...] = ()) -> _Check:
    return _fields({"metadata": _META, **spec}, cut)


_OBJECT = _kind({})
_WORKLOAD = _kind({
    "spec": _fields({"replicas": _int, "selector": _LABEL_SELECTOR, "template": _TEMPLATE,
                     "suspend": _bool, "parallelism": _int, "completions": _int}),
    "status": _WORKLOAD_STATUS,
})

_BY_KIND: dict[str, _Check] = {
    "Pod": _kind({"spec": _POD_SPEC, "status": _POD_STATUS}),
    "Node": _kind({
        "spec": _fields({"unschedulable": _bool, "providerID": _str, "podCIDR": _str,
                         "taints": _list(_fields({"key": _str, "value": _str,
                                                  "effect": _str, "timeAdded": _str}))}),
        "status": _fields({
            "capacity": _QUANTITIES, "allocatable": _QUANTITIES, "conditions": _CONDITIONS,
            "nodeInfo": _STR_MAP,
            "addresses": _list(_fields({"type": _str, "address": _str})),
        }),
    }),
    "Event": _kind({
        "involvedObject": _INVOLVED, "regarding": _INVOLVED, "reason": _str, "message": _str,
        "note": _str, "type": _str, "action": _str, "count": _int, "deprecatedCount": _int,
        "firstTimestamp": _str, "lastTimestamp": _str, "eventTime": _str,
        "deprecatedFirstTimestamp": _str, "deprecatedLastTimestamp": _str,
        "source": _EVENT_SOURCE, "deprecatedSource": _EVENT_SOURCE,
        "reportingComponent": _str, "reportingController": _str,
        "series": _fields({"count": _int, "lastObservedTime": _str}),
    }, cut=("message", "note")),
    "Namespace": _kind({"status": _fields({"phase": _str})}),
    "Deployment": _WORKLOAD,
    "StatefulSet": _WORKLOAD,
    "ReplicaSet": _WORKLOAD,
    "DaemonSet": _WORKLOAD,
    "Job": _kind({"spec": _JOB_SPEC, "status": _WORKLOAD_STATUS}),
    "CronJob": _kind({"spec": _fields({
        "schedule": _str, "suspend": _bool,
        "jobTemplate": _fields({"metadata": _fields({"labels": _STR_MAP}),
                                "spec": _JOB_SPEC})})}),
    "ResourceQuota": _kind({
        "spec": _fields({
            "hard": _QUANTITIES, "scopes": _STRS,
            "scopeSelector": _fields({"matchExpressions": _list(_fields({
                "scopeName": _str, "operator": _str, "values": _STRS}))})}),
        "status": _fields({"hard": _QUANTITIES, "used": _QUANTITIES}),
    }),
    "LimitRange": _kind({"spec": _fields({"limits": _list(_fields({
        "type": _str, "default": _QUANTITIES, "defaultRequest": _QUANTITIES,
        "max": _QUANTITIES, "min": _QUANTITIES, "maxLimitRequestRatio": _QUANTITIES}))})}),
    "PriorityClass": _kind({"value": _int, "globalDefault": _bool, "preemptionPolicy": _str,
                            "description": _str}),
    "RuntimeClass": _kind({
        "handler": _str,
        "scheduling": _fields({"nodeSelector": _STR_MAP, "tolerations": _TOLERATIONS}),
        "overhead": _fields({"podFixed": _QUANTITIES}),
    }),
    "ConfigMap": _kind({"data": _map(_any_scalar)}),
    "PersistentVolume": _kind({
        "spec": _fields({"capacity": _QUANTITIES, "storageClassName": _str,
                         "accessModes": _STRS, "nodeAffinity": _fields({"required":
                                                                        _NODE_SELECTOR}),
                         "claimRef": _fields({"name": _str, "namespace": _str})}),
        "status": _fields({"phase": _str}),
    }),
    "PersistentVolumeClaim": _kind({
        "spec": _fields({"volumeName": _str, "storageClassName": _str, "accessModes": _STRS,
                         "resources": _RESOURCES}),
        "status": _fields({"phase": _str, "capacity": _QUANTITIES}),
    }),
    "PodGroup": _kind({
        "spec": _fields({"minMember": _int, "minResources": _QUANTITIES, "queue": _str,
                         "priorityClassName": _str}),
        "status": _fields({"phase": _str, "running": _int, "succeeded": _int,
                           "failed": _int, "pending": _int, "conditions": _CONDITIONS}),
    }),
    "Workload": _kind({
        "spec": _fields({"queueName": _str, "priority": _int, "priorityClassName": _str,
                         "podSets": _list(_fields({"name": _str, "count": _int,
                                                   "minCount": _int,
                                                   "template": _TEMPLATE}))}),
        "status": _fields({"conditions": _CONDITIONS}),
    }),
    "ClusterPolicy": _kind({"spec": _map(_fields({
        "enabled": _bool, "version": _str, "repository": _str, "image": _str,
        "config": _fields({"name": _str, "default": _str}),
    }))}),
    "NodeFeature": _kind({"spec": _fields({"labels": _STR_MAP})}),
}
