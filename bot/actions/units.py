"""The actions, each a declared unit: ``preflight`` (at request time: what will be done to
which objects, and what is wrong now), ``recheck`` (at approval time: still the same
objects, still the same problem), ``execute(dry_run)``, ``verify``.

    restart-plugin NODE   delete the node's device-plugin pod; its DaemonSet recreates it
    restart-plugin --all  the same on every node with a plugin pod, one node at a time
    cordon NODE           spec.unschedulable=true (running pods stay)
    uncordon NODE         spec.unschedulable removed

A ``Plan`` is what a request stores: its ``Step``s (one per node) hold the identity of
what the approver saw (the pod's UID, the problem text), so that a click after the world
changed refuses instead of acting on something else.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from handlers.errors import GpubotError
from handlers.gpu import gpu_resources, name_of, ns_of
from handlers.view import Obj

from .cluster import Cluster

ACTIONS = ("restart-plugin", "cordon", "uncordon")
ALL = "--all"
# Finding.actions names -> our actions (handlers say "restart-device-plugin").
FROM_FINDING = {"restart-device-plugin": "restart-plugin", "restart-plugin": "restart-plugin",
                "cordon": "cordon", "cordon-node": "cordon", "uncordon": "uncordon",
                "uncordon-node": "uncordon"}
_CRASH_REASONS = ("CrashLoopBackOff", "Error", "RunContainerError", "CreateContainerError",
                  "CreateContainerConfigError", "ImagePullBackOff", "ErrImagePull")


class ActionError(GpubotError):
    """The action cannot be planned or run; ``str()`` says why, for the user."""


@dataclass
class Step:
    action: str
    node: str
    pod_namespace: str = ""  # restart-plugin: the plugin pod to delete
    pod_name: str = ""
    pod_uid: str = ""
    problem: str | None = None  # what was wrong at request time; None: nothing seen

    @property
    def pod(self) -> str:
        return f"{self.pod_namespace}/{self.pod_name}"


@dataclass
class Plan:
    action: str
    target: str  # a node name, or --all
    steps: list[Step] = field(default_factory=list)

    @property
    def what(self) -> str:
        if self.action == "restart-plugin":
            if self.target == ALL:
                return (f"Restart the device plugin on {len(self.steps)} GPU nodes, one at a "
                        "time, stopping at the first that does not recover")
            return (f"Restart the device plugin on {self.target}: delete pod "
                    f"{self.steps[0].pod}; its DaemonSet recreates it")
        if self.action == "cordon":
            return f"Cordon {self.target}: mark it unschedulable"
        return f"Uncordon {self.target}: let new pods be scheduled on it again"

    @property
    def objects(self) -> list[str]:
        if self.action == "restart-plugin":
            return [f"pod/{s.pod} on node/{s.node}" for s in self.steps]
        return [f"node/{self.target}"]

    @property
    def blast_radius(self) -> str:
        if self.action == "restart-plugin":
            return ("Running GPU pods keep running: deleting the plugin pod does not touch "
                    "them. While the new plugin starts (seconds), no new GPU pod is admitted "
                    "on " + ("each node in turn." if self.target == ALL else "the node."))
        if self.action == "cordon":
            return ("New pods stop landing on the node; running pods keep running (it is not "
                    "drained).")
        return "The scheduler may place new pods on the node again."

    @property
    def problems(self) -> list[str]:
        return [f"{s.node}: {s.problem}" for s in self.steps if s.problem]

    def to_json(self) -> dict[str, Any]:
        return {"action": self.action, "target": self.target,
                "steps": [asdict(s) for s in self.steps]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Plan:
        return cls(str(data["action"]), str(data["target"]),
                   [Step(**s) for s in data.get("steps") or []])


@dataclass
class Outcome:
    ok: bool
    text: str  # one line for the thread (plain; callers escape it)
    seconds: float = 0.0


# -- preflight ----------------------------------------------------------------------------------


def preflight(cluster: Cluster, action: str, target: str) -> Plan:
    """The plan for a request, from the cluster as it is now. Raises ActionError."""
    if action not in ACTIONS:
        raise ActionError(f"unknown action {action!r}: one of {', '.join(ACTIONS)}")
    if action == "restart-plugin" and target == ALL:
        by_node: dict[str, Obj] = {}
        for pod in cluster.plugin_pods():
            node = str((pod.get("spec") or {}).get("nodeName") or "")
            if node and node not in by_node:
                by_node[node] = pod
        if not by_node:
            raise ActionError("no device-plugin pods found in the cluster" + _where(cluster))
        steps = []
        for node_name in sorted(by_node):
            steps.append(_restart_step(node_name, by_node[node_name], cluster.node(node_name)))
        return Plan(action, ALL, steps)
    found = cluster.node(target)
    if found is None:
        raise ActionError(f"there is no node {target!r}")
    if action == "restart-plugin":
        pods = cluster.plugin_pods(target)
        if not pods:
            raise ActionError(f"no device-plugin pod runs on {target}" + _where(cluster)
                              + ": there is nothing to restart")
        return Plan(action, target, [_restart_step(target, pods[0], found)])
    cordoned = bool((found.get("spec") or {}).get("unschedulable"))
    if action == "cordon" and cordoned:
        raise ActionError(f"{target} is already cordoned")
    if action == "uncordon" and not cordoned:
        raise ActionError(f"{target} is not cordoned")
    return Plan(action, target, [Step(action, target)])


def _where(cluster: Cluster) -> str:
    parts = []
    if cluster.plugin_namespace:
        parts.append(f"namespace {cluster.plugin_namespace}")
    if cluster.plugin_selector:
        parts.append(f"selector {cluster.plugin_selector}")
    return f" ({', '.join(parts)})" if parts else ""


def _restart_step(node_name: str, pod: Obj, node: Obj | None) -> Step:
    owner = next((o for o in (pod.get("metadata") or {}).get("ownerReferences") or []
                  if isinstance(o, dict) and o.get("kind") == "DaemonSet"), None)
    if owner is None:
        raise ActionError(f"pod {ns_of(pod)}/{name_of(pod)} on {node_name} is not managed by "
                          "a DaemonSet: deleting it would not bring it back")
    return Step("restart-plugin", node_name, ns_of(pod), name_of(pod),
                str(pod["metadata"].get("uid", "")), plugin_problem(pod, node))


# -- health ---------------------------------------------------------------------------------------


def pod_ready(pod: Obj) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def crash(pod: Obj) -> str | None:
    """Why a pod's container is failing (``CrashLoopBackOff, last exit 1: ...``), or None."""
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        state = cs.get("state") or {}
        waiting = state.get("waiting") or {}
        term = state.get("terminated") or (cs.get("lastState") or {}).get("terminated") or {}
        reason = waiting.get("reason") or ""
        failed = term and term.get("exitCode", 0) != 0
        if reason in _CRASH_REASONS or (failed and not cs.get("ready")):
            text = f"container {cs.get('name')}: {reason or term.get('reason') or 'failed'}"
            if term:
                text += f", last exit {term.get('exitCode')}"
                msg = str(term.get("message") or "").strip().splitlines()
                if msg:
                    text += f": {msg[-1][:200]}"
            return text
    return None


def gpu_counts(node: Obj | None) -> tuple[float, float, str]:
    """(allocatable, capacity, resource) of the node's main GPU resource."""
    if node is None:
        return 0.0, 0.0, "nvidia.com/gpu"
    cap = gpu_resources(node, "capacity")
    alloc = gpu_resources(node, "allocatable")
    resource = "nvidia.com/gpu" if "nvidia.com/gpu" in cap else next(iter(sorted(cap)),
                                                                      "nvidia.com/gpu")
    return alloc.get(resource, 0.0), cap.get(resource, 0.0), resource


def gpus_back(node: Obj | None) -> bool:
    """Every GPU resource the node has capacity for is allocatable in full."""
    if node is None:
        return False
    cap = gpu_resources(node, "capacity")
    alloc = gpu_resources(node, "allocatable")
    return bool(cap) and all(alloc.get(r, 0.0) >= n for r, n in cap.items())


def plugin_problem(pod: Obj | None, node: Obj | None) -> str | None:
    """What is wrong with a node's plugin as the API shows it, or None."""
    if pod is not None:
        why = crash(pod)
        if why:
            return f"plugin pod {ns_of(pod)}/{name_of(pod)} is failing ({why})"
        if not pod_ready(pod):
            return f"plugin pod {ns_of(pod)}/{name_of(pod)} is not Ready"
    if not gpus_back(node):
        alloc, cap, res = gpu_counts(node)
        return f"allocatable {res}: {alloc:g} of capacity {cap:g}"
    return None


# -- at approval time ---------------------------------------------------------------------------


def recheck(cluster: Cluster, step: Step, *, same_problem: bool = True) -> str | None:
    """Why the step must not run now (None: it may): the same objects, and (unless
    ``same_problem`` is False: a rolling restart of every node) the same problem."""
    node = cluster.node(step.node)
    if node is None:
        return f"node {step.node} is gone"
    if step.action == "restart-plugin":
        pod = cluster.pod(step.pod_namespace, step.pod_name)
        uid = str((pod or {}).get("metadata", {}).get("uid", ""))
        if pod is None or uid != step.pod_uid:
            return (f"the plugin pod {step.pod} on {step.node} is not the one this request "
                    f"was for (UID {step.pod_uid[:8]}... is gone): someone restarted it "
                    "already. Check the node again and ask anew if needed")
        if same_problem and step.problem and plugin_problem(pod, node) is None:
            return (f"the problem is gone: {step.problem} no longer holds (plugin Ready, "
                    f"{_counts(node)} GPUs allocatable): nothing to do")
        return None
    cordoned = bool((node.get("spec") or {}).get("unschedulable"))
    if step.action == "cordon" and cordoned:
        return f"{step.node} is cordoned already"
    if step.action == "uncordon" and not cordoned:
        return f"{step.node} is not cordoned any more"
    return None


def execute(cluster: Cluster, step: Step, *, dry_run: bool) -> None:
    """One write (or its server-side dry run). Raises bot.live errors (403: ApiForbidden)."""
    if step.action == "restart-plugin":
        cluster.delete_pod(step.pod_namespace, step.pod_name, step.pod_uid, dry_run=dry_run)
    else:
        cluster.set_unschedulable(step.node, step.action == "cordon", dry_run=dry_run)


def verify(cluster: Cluster, step: Step, *, timeout: float, poll: float = 1.0,
           clock: Callable[[], float] = time.monotonic,
           sleep: Callable[[float], None] = time.sleep) -> Outcome:
    """Wait until the step's effect is seen, or it is clear that it will not be: a new
    plugin pod Ready and the node's GPUs allocatable again; a crash-looping replacement is
    reported as soon as it is seen, not at the timeout."""
    start = clock()
    last = "no new plugin pod yet"
    while True:
        node = cluster.node(step.node)
        took = clock() - start
        if step.action != "restart-plugin":
            want = step.action == "cordon"
            if node is not None and bool((node.get("spec") or {}).get("unschedulable")) == want:
                verb = "cordoned: new pods stop landing there" if want else (
                    "uncordoned: new pods may land there again")
                return Outcome(True, f"{step.node} {verb}", took)
            last = "the node does not show the change yet"
        else:
            new = [p for p in cluster.plugin_pods(step.node)
                   if str(p["metadata"].get("uid", "")) != step.pod_uid]
            pod = new[0] if new else None
            if pod is not None:
                label = f"{ns_of(pod)}/{name_of(pod)}"
                why = crash(pod)
                if why:
                    return Outcome(False, f"{step.node} did not recover: the new plugin pod "
                                   f"{label} is crash-looping ({why})", took)
                if pod_ready(pod) and gpus_back(node):
                    return Outcome(True, f"GPUs back on {step.node} after {took:.0f} s "
                                   f"({_counts(node)})", took)
                last = (f"new plugin pod {label} is "
                        + ("Ready" if pod_ready(pod) else "not Ready")
                        + f", allocatable {_counts(node)}")
        if took >= timeout:
            return Outcome(False, f"{step.node} did not recover within {timeout:g} s: {last}",
                           took)
        sleep(min(poll, max(0.0, timeout - took)))


def _counts(node: Obj | None) -> str:
    alloc, cap, _ = gpu_counts(node)
    return f"{alloc:g}/{cap:g}"


def pending_report(cluster: Cluster, pods: list[tuple[str, str]]) -> list[str]:
    """``ml-team/train-0 scheduled on gpu-node-7`` or ``... still Pending``, per pod."""
    out = []
    for ns, name in pods:
        pod = cluster.pod(ns, name)
        if pod is None:
            out.append(f"{ns}/{name} is gone")
            continue
        node = (pod.get("spec") or {}).get("nodeName")
        phase = (pod.get("status") or {}).get("phase") or "Pending"
        out.append(f"{ns}/{name} scheduled on {node}" if node else f"{ns}/{name} still {phase}")
    return out
