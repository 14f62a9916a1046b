"""What the watch cache keeps of an object: the fields diagnoses read, shared where equal.

client-go's informers take a transform (``SetTransform``) that strips what a controller
never reads before an object enters the cache; this is gpubot's. Two things make a cached
pod about a quarter of its parsed size:

- **Projection.** Fields no handler reads are dropped: probes, lifecycle hooks, termination
  message paths, image pull policies; the pod's IP lists, container and image IDs; the
  deprecated ``serviceAccount`` twin and DNS settings. What stays is the object's own
  shape, so handlers read a lean object exactly as a full one (``tests/test_lean.py`` runs
  every scenario both ways and compares the findings).
- **Sharing.** Replicas of one controller carry equal containers, tolerations, affinity,
  volumes, labels and owner references; equal conditions and container states recur too.
  Each such subtree is kept once per kind (hash-consing) and short strings (namespaces,
  node names, images, timestamps) are interned. Cached objects are never changed in place
  (a watch event replaces the whole object, handlers only read), so sharing is safe.

The full object stays one GET away (``LiveView.get`` with the cache bypassed) for a reader
that needs a dropped field.
"""

from __future__ import annotations

import builtins
import sys
from typing import Any

import orjson

from handlers.view import Obj

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"

# resourceVersion: the cache tracks the watch's own; a handler never reads an object's.
_DROP_META = ("managedFields", "generateName", "selfLink", "resourceVersion")
_DROP_CONTAINER = ("livenessProbe", "readinessProbe", "startupProbe", "lifecycle",
                   "terminationMessagePath", "terminationMessagePolicy", "imagePullPolicy",
                   "resizePolicy")
_DROP_POD_SPEC = ("dnsPolicy", "dnsConfig", "enableServiceLinks", "serviceAccount",
                  "terminationGracePeriodSeconds", "hostname", "subdomain",
                  "setHostnameAsFQDN")
_DROP_POD_STATUS = ("podIP", "podIPs", "hostIPs")
_DROP_CONTAINER_STATUS = ("containerID", "imageID")
# Subtrees that replicas of one controller (or many pods) share.
_SHARED_META = ("labels", "annotations", "ownerReferences")
_SHARED_POD_SPEC = ("containers", "initContainers", "tolerations", "affinity", "volumes",
                    "securityContext", "nodeSelector", "topologySpreadConstraints",
                    "imagePullSecrets", "overhead", "readinessGates", "resourceClaims",
                    "schedulingGates")
_INTERNED_POD_SPEC = ("nodeName", "serviceAccountName", "schedulerName", "priorityClassName",
                      "restartPolicy", "preemptionPolicy", "runtimeClassName")
_INTERN_MAX = 256  # longer strings are rarely repeated


def _intern(value: Any) -> Any:
    return sys.intern(value) if type(value) is str and len(value) <= _INTERN_MAX else value


def _intern_values(d: dict[str, Any]) -> None:
    """Short string values interned (timestamps, reasons, types recur across objects);
    ``None`` values dropped (a condition's ``lastProbeTime: null`` reads the same absent)."""
    for key, value in builtins.list(d.items()):
        if value is None:
            del d[key]
        elif type(value) is str:
            d[key] = _intern(value)


class Leaner:
    """Projects and shares objects; one per watch thread, or used under a lock (it is not
    thread-safe).

    ``table`` maps a subtree's hash to the one copy kept; ``sweep()`` forgets the subtrees
    no cached object uses any more, so a long-running cache does not keep them alive.
    """

    def __init__(self, sweep_every: int = 20_000) -> None:
        self.table: dict[int, Any] = {}
        self.sweep_every = sweep_every
        self._since_sweep = 0

    def share(self, value: Any, previous: Any = None) -> Any:
        """The kept copy of a subtree equal to ``value`` (``value`` itself the first time).

        ``previous``: the same subtree of the object's cached version. A watch event mostly
        changes a status, so it is usually equal, and comparing costs a tenth of hashing.
        """
        if previous is not None and previous == value:
            return previous
        key = hash(orjson.dumps(value))
        kept = self.table.get(key)
        if kept is None:
            self.table[key] = value
            return value
        # Equal hashes of unequal JSON are possible, if rare: never swap in other data.
        return kept if kept == value else value

    def sweep(self) -> int:
        """Forget subtrees only the table holds; returns how many were forgotten."""
        # getrefcount sees the table's reference and its own argument's.
        dead = [k for k in builtins.list(self.table) if sys.getrefcount(self.table[k]) <= 2]
        for k in dead:
            del self.table[k]
        self._since_sweep = 0
        return len(dead)

    def lean(self, kind: str, obj: Obj, previous: Obj | None = None) -> Obj:
        """In place, and returned: ``obj`` projected and its common subtrees shared;
        ``previous``: the cached version ``obj`` replaces (its subtrees are taken when
        equal)."""
        was: Obj = previous if previous is not None else {}
        meta = obj.get("metadata")
        if isinstance(meta, dict):
            self._meta(meta, was.get("metadata") or {})
        if kind == "Pod":
            self._pod(obj, was.get("spec") or {})
        elif kind == "Node":
            self._node(obj, was)
        elif kind == "Event":
            self._event(obj)
        self._since_sweep += 1
        if self._since_sweep >= self.sweep_every:
            self.sweep()
        return obj

    def _meta(self, meta: dict[str, Any], was: Obj) -> None:
        for key in _DROP_META:
            meta.pop(key, None)
        annotations = meta.get("annotations")
        if isinstance(annotations, dict):
            annotations.pop(LAST_APPLIED, None)
        for key in _SHARED_META:
            if meta.get(key):
                meta[key] = self.share(meta[key], was.get(key))
        for key in ("namespace", "creationTimestamp"):
            if key in meta:
                meta[key] = _intern(meta[key])

    def _pod(self, pod: Obj, was: Obj) -> None:
        spec = pod.get("spec")
        if isinstance(spec, dict):
            for key in _DROP_POD_SPEC:
                spec.pop(key, None)
            for key in ("containers", "initContainers", "ephemeralContainers"):
                for c in spec.get(key) or ():
                    if isinstance(c, dict):
                        for drop in _DROP_CONTAINER:
                            c.pop(drop, None)
            for key in _SHARED_POD_SPEC:
                if spec.get(key):
                    spec[key] = self.share(spec[key], was.get(key))
            for key in _INTERNED_POD_SPEC:
                if key in spec:
                    spec[key] = _intern(spec[key])
        status = pod.get("status")
        if isinstance(status, dict):
            for key in _DROP_POD_STATUS:
                status.pop(key, None)
            for key in ("phase", "qosClass", "startTime", "hostIP"):
                if key in status:
                    status[key] = _intern(status[key])
            for cond in status.get("conditions") or ():
                if isinstance(cond, dict):
                    _intern_values(cond)
            for key in ("containerStatuses", "initContainerStatuses"):
                for cs in status.get(key) or ():
                    if isinstance(cs, dict):
                        self._container_status(cs)

    def _container_status(self, cs: dict[str, Any]) -> None:
        for key in _DROP_CONTAINER_STATUS:
            cs.pop(key, None)
        for key in ("name", "image"):
            if key in cs:
                cs[key] = _intern(cs[key])
        for key in ("state", "lastState"):
            for detail in (cs.get(key) or {}).values():  # {running: {startedAt: ...}}
                if isinstance(detail, dict):
                    _intern_values(detail)

    def _event(self, event: Obj) -> None:
        # Reasons, types, sources and the objects they are about recur event after event.
        _intern_values(event)
        for key in ("involvedObject", "regarding", "source", "series"):
            if isinstance(event.get(key), dict):
                event[key].pop("resourceVersion", None)
                _intern_values(event[key])

    def _node(self, node: Obj, was: Obj) -> None:
        status = node.get("status")
        was_status = was.get("status") or {}
        if isinstance(status, dict):
            # The kubelet renews it every 10 s on older clusters; without it a heartbeat
            # leaves the lean node equal to the kept one, which the cache then keeps
            # (with every memo built on it).
            for cond in status.get("conditions") or ():
                if isinstance(cond, dict):
                    cond.pop("lastHeartbeatTime", None)
                    _intern_values(cond)
            for key in ("nodeInfo", "capacity", "allocatable", "daemonEndpoints"):
                if status.get(key):
                    status[key] = self.share(status[key], was_status.get(key))
        spec = node.get("spec")
        if isinstance(spec, dict) and spec.get("taints"):
            spec["taints"] = self.share(spec["taints"], (was.get("spec") or {}).get("taints"))
