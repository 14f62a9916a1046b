"""The bits of kube-controller-manager and the kubelet the tests need.

DaemonSet controller: when a pod a DaemonSet owns is deleted, a new pod for the same node
appears ``delay`` seconds later under a new generated name: first Pending (ADDED), then the
kubelet's status (MODIFIED), either Ready or crash-looping as configured per DaemonSet
(``{"gpu-operator/nvidia-device-plugin-daemonset": "crashloop"}``, default ``"ready"``).
A device-plugin pod that comes back Ready makes its node advertise its GPUs again
(``status.allocatable`` of every ``nvidia.com/*`` resource set to its capacity).
"""

from __future__ import annotations

import copy
import secrets
import threading
from collections.abc import Callable, Mapping
from typing import Any

from handlers.gpu import is_device_plugin_pod

from .resources import ResourceType
from .store import Change, Key, Obj, Store, now_rfc3339, random_suffix

OUTCOMES = ("ready", "crashloop")


class Timers:
    """Daemon timers that can all be cancelled at shutdown."""

    def __init__(self) -> None:
        self._timers: set[threading.Timer] = set()
        self._lock = threading.Lock()
        self.closed = False

    def after(self, delay: float, fn: Callable[[], None]) -> None:
        def run() -> None:
            with self._lock:
                self._timers.discard(timer)
                if self.closed:
                    return
            fn()

        timer = threading.Timer(delay, run)
        timer.daemon = True
        with self._lock:
            if self.closed:
                return
            self._timers.add(timer)
        timer.start()

    def cancel_all(self) -> None:
        with self._lock:
            self.closed = True
            timers, self._timers = list(self._timers), set()
        for t in timers:
            t.cancel()
        for t in timers:
            if t is not threading.current_thread() and t.is_alive():
                t.join(timeout=5)


class PodTermination:
    """The kubelet finishing graceful pod deletions, ``delay`` seconds after they start."""

    def __init__(self, store: Store, timers: Timers, delay: float) -> None:
        self.store, self.timers, self.delay = store, timers, delay
        store.pod_termination = self

    def __call__(self, rt: ResourceType, key: Key) -> None:
        if self.delay <= 0:
            self.store.finish_pod_termination(rt, key)
        else:
            self.timers.after(self.delay, lambda: self.store.finish_pod_termination(rt, key))


class DaemonSetController:
    def __init__(self, store: Store, timers: Timers, *, delay: float = 2.0,
                 outcomes: Mapping[str, str] | None = None) -> None:
        self.store = store
        self.timers = timers
        self.delay = delay
        self.outcomes = dict(outcomes or {})
        for key, outcome in self.outcomes.items():
            if outcome not in OUTCOMES:
                raise ValueError(f"daemonset outcome for {key}: {outcome!r} not in {OUTCOMES}")
        self.recreated: list[tuple[str, str]] = []  # (namespace, new pod name)
        store.listeners.append(self._on_change)

    def _on_change(self, change: Change) -> None:
        if change.type != "DELETED" or change.storage != "pods":
            return
        pod = self.store.load(change.entry)
        owner = _daemonset_owner(pod)
        if owner is None:
            return
        self.timers.after(self.delay, lambda: self._recreate(pod, owner, change.entry.uid))

    def _recreate(self, old: Obj, owner: Obj, old_uid: str) -> None:
        store = self.store
        if store.closed:
            return
        meta = old["metadata"]
        ns = meta.get("namespace", "")
        ds = store.find("DaemonSet", owner.get("name", ""), ns)
        if ds is None or (owner.get("uid") and ds["metadata"].get("uid") != owner["uid"]):
            return  # the DaemonSet is gone: nothing recreates its pods
        node_name = str((old.get("spec") or {}).get("nodeName") or "")
        node = store.find("Node", node_name) if node_name else None
        if node is None:
            return
        for other in store.all("Pod", ns):
            if (_daemonset_owner(other) or {}).get("uid") == ds["metadata"]["uid"] and (
                    (other.get("spec") or {}).get("nodeName") == node_name
                    and not other["metadata"].get("deletionTimestamp")):
                return  # the node already has its pod
        outcome = self.outcomes.get(f"{ns}/{ds['metadata']['name']}", "ready")
        prefix = meta.get("generateName") or f"{ds['metadata']['name']}-"
        name = prefix + random_suffix()
        new_meta: Obj = {
            "name": name, "generateName": prefix, "namespace": ns,
            "labels": dict(meta.get("labels") or {}),
            "ownerReferences": copy.deepcopy(meta.get("ownerReferences") or []),
        }
        if meta.get("annotations"):
            new_meta["annotations"] = dict(meta["annotations"])
        pod: Obj = {"apiVersion": "v1", "kind": "Pod", "metadata": new_meta,
                    "spec": copy.deepcopy(old.get("spec") or {}),
                    "status": {"phase": "Pending", "conditions": [_cond("PodScheduled")],
                               "qosClass": (old.get("status") or {}).get("qosClass",
                                                                         "BestEffort")}}
        created = store.put(pod)
        created["status"] = _running_status(old, created, node, outcome)
        store.put(created)
        if outcome == "crashloop":
            for c in (old.get("spec") or {}).get("containers") or []:
                text = store.container_log(old_uid, ns, meta["name"], c.get("name", ""))
                if text:
                    store.set_logs(ns, name, c["name"], text)
                    store.set_logs(ns, name, c["name"], text, previous=True)
        self.recreated.append((ns, name))
        if outcome == "ready" and is_device_plugin_pod(created):
            _restore_gpus(store, node_name)


def _daemonset_owner(pod: Obj) -> Obj | None:
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("kind") == "DaemonSet" and ref.get(
                "controller", True):
            return ref
    return None


def _cond(type_: str, status: str = "True", reason: str | None = None,
          message: str | None = None) -> Obj:
    out: Obj = {"type": type_, "status": status, "lastProbeTime": None,
                "lastTransitionTime": now_rfc3339()}
    if reason:
        out["reason"] = reason
    if message:
        out["message"] = message
    return out


def _node_ip(node: Obj) -> str:
    for addr in (node.get("status") or {}).get("addresses") or []:
        if addr.get("type") == "InternalIP":
            return str(addr.get("address", ""))
    return "10.0.0.1"


def _running_status(old: Obj, pod: Obj, node: Obj, outcome: str) -> Obj:
    now = now_rfc3339()
    spec = pod.get("spec") or {}
    ip = _node_ip(node)
    names = [c.get("name", "") for c in spec.get("containers") or []]
    old_statuses = {s.get("name"): s for s in (old.get("status") or {}).get(
        "containerStatuses") or []}
    ready = outcome == "ready"
    statuses = []
    for c in spec.get("containers") or []:
        cs: dict[str, Any] = {
            "name": c.get("name", ""), "image": c.get("image", ""), "imageID": "",
            "containerID": f"containerd://{secrets.token_hex(32)}",
            "ready": ready, "started": ready, "restartCount": 0, "lastState": {},
        }
        if ready:
            cs["state"] = {"running": {"startedAt": now}}
        else:
            last = ((old_statuses.get(c.get("name")) or {}).get("lastState") or {}).get(
                "terminated") or {}
            term = {"exitCode": last.get("exitCode", 1), "reason": last.get("reason", "Error"),
                    "startedAt": now, "finishedAt": now,
                    "containerID": cs["containerID"]}
            if last.get("message"):
                term["message"] = last["message"]
            cs["restartCount"] = 1
            cs["lastState"] = {"terminated": term}
            uid = pod["metadata"]["uid"]
            cs["state"] = {"waiting": {
                "reason": "CrashLoopBackOff",
                "message": f"back-off 10s restarting failed container={c.get('name')} "
                           f"pod={pod['metadata']['name']}_{pod['metadata']['namespace']}({uid})"}}
        statuses.append(cs)
    init = [{"name": c.get("name", ""), "image": c.get("image", ""), "imageID": "",
             "ready": True, "restartCount": 0, "started": False,
             "state": {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": now,
                                      "finishedAt": now}}}
            for c in spec.get("initContainers") or []]
    unready = f"containers with unready status: [{' '.join(names)}]"
    conditions = [
        _cond("PodReadyToStartContainers"), _cond("Initialized"),
        _cond("Ready") if ready else _cond("Ready", "False", "ContainersNotReady", unready),
        _cond("ContainersReady") if ready else _cond("ContainersReady", "False",
                                                     "ContainersNotReady", unready),
        _cond("PodScheduled"),
    ]
    out: Obj = {"phase": "Running", "conditions": conditions, "hostIP": ip,
                "hostIPs": [{"ip": ip}], "podIP": ip, "podIPs": [{"ip": ip}], "startTime": now,
                "containerStatuses": statuses,
                "qosClass": (old.get("status") or {}).get("qosClass", "BestEffort")}
    if init:
        out["initContainerStatuses"] = init
    return out


def _restore_gpus(store: Store, node_name: str) -> None:
    node = store.find("Node", node_name)
    if node is None:
        return
    status = node.setdefault("status", {})
    capacity = status.get("capacity") or {}
    allocatable = status.setdefault("allocatable", {})
    changed = False
    for res, qty in capacity.items():
        if res.startswith("nvidia.com/") and allocatable.get(res) != qty:
            allocatable[res] = qty
            changed = True
    if changed:
        store.put(node)
