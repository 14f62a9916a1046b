"""The shapes of the fields handlers read, checked once where an object enters.

A snapshot file or an API answer may hold anything: hand-edited YAML, a truncated dump, a
misbehaving server. ``misfit(obj)`` checks the fields any handler reads (``spec.containers``
is a list of mappings, a request is a quantity that parses to a finite, sane number, a
label value is a string, ...) and returns the first field that does not fit; the snapshot
loader and the live view skip such an object and list it under "not read", so handlers
may trust every object they are given. Only the fields listed here are checked.

For Pods, Nodes and Events the tables also list every field handlers read (some unchecked:
``_any``), and a snapshot keeps nothing else of them (``shape_types.py``): a handler that
starts reading another field of those kinds adds it here.

Kubernetes JSON writes an unset field as ``null`` or leaves it out; a ``null`` among the
fields below is removed (in place), so that ``obj.get("spec", {})`` holds.

The checkers are closures built once from the tables below: ``misfit`` on a pod of a
30,000-pod dump costs a few microseconds, and nothing when it fits but the calls.
"""

from __future__ import annotations

import math
import re
import threading
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
    check = _BY_KIND.get(str(obj.get("kind")), _OBJECT)
    fits = _FITS.get(check) or _compiled(check)
    if fits(obj):
        return None
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


def _any(v: Any) -> None:
    """A field some handler reads but that is not checked here (a container's args, a
    pod's resourceClaims): listed so that a snapshot keeps it (shape_types.py)."""


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

# What each combinator's checker checks, for the fast path below: ("fields", spec, cut),
# ("list", item) or ("map", value).
_SHAPES: dict[_Check, tuple[Any, ...]] = {}



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

    _SHAPES[check] = ("fields", spec, cut)
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

    _SHAPES[check] = ("list", fn)
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

    _SHAPES[check] = ("map", fn)
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
    "creationTimestamp": _str, "deletionTimestamp": _str,
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
_RESOURCES = _fields({"requests": _QUANTITIES, "limits": _QUANTITIES, "claims": _any})
_SECURITY = _fields({
    "privileged": _bool, "runAsUser": _int, "runAsGroup": _int, "runAsNonRoot": _bool,
    "allowPrivilegeEscalation": _bool,
    "capabilities": _fields({"add": _STRS, "drop": _STRS}),
    "seLinuxOptions": _STR_MAP, "seccompProfile": _STR_MAP,
})
_PORTS = _list(_fields({
    "containerPort": _int, "hostPort": _int, "protocol": _str, "hostIP": _str, "name": _str}))
# A pod's command, args and env are read (CUDA versions, parallelism hints,
# NVIDIA_VISIBLE_DEVICES), not checked.
_CONTAINER = {"name": _str, "image": _str, "restartPolicy": _str, "resources": _RESOURCES,
              "ports": _PORTS, "args": _any, "command": _any,
              "env": _list(_fields({"name": _any, "value": _any}))}
# Settings checked only in DaemonSet and other pod templates (device plugin checks): pods
# keep them unchecked, which keeps the pods of a large dump cheap to check.
_TEMPLATE_CONTAINER = {
    **_CONTAINER,
    "env": _list(_fields({"name": _str, "value": _str})),
    "volumeMounts": _list(_fields({
        "name": _str, "mountPath": _str, "readOnly": _bool, "subPath": _str})),
    "securityContext": _SECURITY,
}
_KEY_PATHS = _list(_fields({"key": _str, "path": _str}))
_VOLUME = {
    "name": _str, "hostPath": _fields({"path": _str, "type": _str}),
    "persistentVolumeClaim": _fields({"claimName": _str, "readOnly": _bool}),
    "ephemeral": _fields({"volumeClaimTemplate": _fields({
        "metadata": _fields({"labels": _STR_MAP, "annotations": _STR_MAP}),
        "spec": _fields({"storageClassName": _str, "accessModes": _STRS,
                         "resources": _RESOURCES})})}),
}
_TEMPLATE_VOLUME = {
    **_VOLUME,
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
        "resourceClaims": _any,
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
    "name": _str, "image": _str, "ready": _bool, "started": _bool,
    "restartCount": _int, "state": _STATE, "lastState": _STATE,
    "resources": _RESOURCES, "allocatedResources": _QUANTITIES,
}))
_POD_STATUS = _fields({
    "phase": _str, "reason": _str, "message": _str, "conditions": _CONDITIONS,
    "startTime": _str, "nominatedNodeName": _str, "qosClass": _str, "hostIP": _str,
    "resize": _str, "resourceClaimStatuses": _any,
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


# -- the fast path -----------------------------------------------------------------------------
#
# Nearly every object fits, and the checkers above pay a call per field and a path for the
# message. ``_compiled`` turns a checker into one generated function per mapping shape, with
# lists, maps and leaves inlined, that only answers whether the object fits (and removes
# nulls and cuts messages as the checkers do). Only an object it rejects goes through the
# checkers again, for the message; both edits are idempotent, so the second walk sees the
# same object the first one would have.

_FITS: dict[_Check, Callable[[Any], bool]] = {}
_LEAVES: dict[_Check, str] = {
    _any: "False",
    _str: "{v}.__class__ is not str",
    _name: "{v}.__class__ is not str or not {v} or len({v}) > MAX_NAME",
    _bool: "{v}.__class__ is not bool",
    _int: "{v}.__class__ is not int or not -MAX_NUMBER <= {v} <= MAX_NUMBER",
    _any_scalar: "{v}.__class__ is dict or {v}.__class__ is list",
    _quantity: "not ({v}.__class__ is str and {v} in _GOOD_QUANTITIES or _quantity_ok({v}))",
}


def _quantity_ok(v: Any) -> bool:
    try:
        _quantity(v)
    except _Bad:
        return False
    return True


class _Generator:
    """The fast functions, one per ``_fields`` checker, generated when a kind is first
    checked; kinds share the functions of the parts they share (pod templates, metadata)."""

    def __init__(self) -> None:
        self.names: dict[_Check, str] = {}
        self.lines: list[str] = []
        self.scope: dict[str, Any] = {
            "MAX_NAME": MAX_NAME, "MAX_NUMBER": MAX_NUMBER, "MAX_TEXT": MAX_TEXT,
            "_GOOD_QUANTITIES": _GOOD_QUANTITIES, "_quantity_ok": _quantity_ok,
        }
        self._n = 0

    def compile(self, check: _Check) -> Callable[[Any], bool]:
        """The fast function for the mapping checker ``check``, with those it calls."""
        self.lines = []
        name = self.function(check)
        exec("\n".join(self.lines), self.scope)  # our own source, made from the tables above
        fits: Callable[[Any], bool] = self.scope[name]
        return fits

    def fresh(self, base: str) -> str:
        self._n += 1
        return f"{base}{self._n}"

    def function(self, fn: _Check) -> str:
        """The name of the fast function for the mapping checker ``fn``."""
        name = self.names.get(fn)
        if name is None:
            name = self.names[fn] = self.fresh("fits_")
            _tag, spec, cut = _SHAPES[fn]
            self._fields(name, spec, cut)
        return name

    def _fields(self, name: str, spec: dict[str, _Check], cut: tuple[str, ...]) -> None:
        codes: dict[str, int] = {}
        branches: dict[_Check, int] = {}  # keys checked alike (all strings, ...) share a branch
        for key, fn in spec.items():
            codes[key] = branches.setdefault(fn, len(branches))
        table = self.fresh("codes_")
        self.scope[table] = codes
        body = [
            f"def {name}(v):",
            "    if v.__class__ is not dict:",
            "        return False",
            "    nulls = None",
            "    for k, x in v.items():",
            f"        c = {table}.get(k)",
            "        if c is None:",
            "            continue",
            "        if x is None:",
            "            if nulls is None:",
            "                nulls = [k]",
            "            else:",
            "                nulls.append(k)",
            "            continue",
        ]
        for fn, code in branches.items():
            body.append(f"        {'if' if code == 0 else 'elif'} c == {code}:")
            inner = self.value(fn, "x", 3)
            body += inner
        body += [
            "    if nulls is not None:",
            "        for k in nulls:",
            "            del v[k]",
        ]
        for key in cut:
            body += [
                f"    x = v.get({key!r})",
                "    if x.__class__ is str and len(x) > MAX_TEXT:",
                f"        v[{key!r}] = x[:MAX_TEXT] + ' [cut]'",
            ]
        body.append("    return True")
        self.lines += body

    def value(self, fn: _Check, v: str, depth: int) -> list[str]:
        """Lines, indented ``depth`` levels, that return False unless ``v`` fits ``fn``."""
        pad = "    " * depth
        leaf = _LEAVES.get(fn)
        if leaf is not None:
            return [f"{pad}if {leaf.format(v=v)}:", f"{pad}    return False"]
        if fn is _quantities:
            q = self.fresh("q")
            return [
                f"{pad}if {v}.__class__ is not dict:",
                f"{pad}    return False",
                f"{pad}for {q} in {v}.values():",
                f"{pad}    if {q}.__class__ is not str or {q} not in _GOOD_QUANTITIES:",
                f"{pad}        if not _quantity_ok({q}):",
                f"{pad}            return False",
            ]
        tag, *rest = _SHAPES[fn]
        if tag == "fields":
            return [f"{pad}if not {self.function(fn)}({v}):", f"{pad}    return False"]
        item = self.fresh("i")
        if tag == "list":
            head = [f"{pad}if {v}.__class__ is not list:", f"{pad}    return False",
                    f"{pad}for {item} in {v}:"]
            if rest[0] is _any_scalar:  # a null item is refused even where null is a scalar
                head += [f"{pad}    if {item} is None:", f"{pad}        return False"]
        else:
            head = [f"{pad}if {v}.__class__ is not dict:", f"{pad}    return False",
                    f"{pad}for {item} in {v}.values():"]
        return head + self.value(rest[0], item, depth + 1)


_GENERATOR = _Generator()
_COMPILING = threading.Lock()  # watch threads check objects concurrently


def _compiled(check: _Check) -> Callable[[Any], bool]:
    with _COMPILING:
        fits = _FITS.get(check)
        if fits is None:
            fits = _FITS[check] = _GENERATOR.compile(check)
        return fits
