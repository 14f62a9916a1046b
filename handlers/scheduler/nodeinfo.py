"""What the filters need of one node and the pods on it, remembered between diagnoses.

kube-scheduler keeps a NodeInfo per node (allocatable, the pods bound there, their summed
requests) and updates it as pods come and go, instead of summing every pod of a node for
every pod it schedules. ``node_info(node, pods)`` is the same idea: it is computed once for
a node object and its pod objects, and handed out again while the node and every pod are
the very same objects. Snapshots never change their objects; the watch cache replaces an
object when it changes, never edits it; so a warm bot recomputes only the nodes whose pods
or node object changed since the last diagnosis. NodeInfos are kept in the ``Memos`` of the
cluster state (``handlers/memo.py``). Like ``pod_facts``, only objects carrying
``metadata.uid`` (API objects) are remembered: templates and hand-written fixtures may be
edited in place, so they are recomputed every time.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from handlers.kube.resources import (
    PODS,
    PodFacts,
    canonical,
    is_extended,
    node_allocatable,
    pod_facts,
    units,
)
from handlers.kube.taints import LIFECYCLE_TAINTS
from handlers.memo import Memos, Table, current

Obj = Mapping[str, Any]

_PRESSURE = ("MemoryPressure", "DiskPressure", "PIDPressure")
# Conclusions kept per NodeInfo, of a few recent targets: a why-pending leaves up to three on
# a GPU node (its own fit, a what-if's, preemption's sums), and the warm-up one kind of pending
# pod after another (handlers/warm.py).
_KEPT_PER_NODE = 16


@dataclass(frozen=True, eq=False)
class NodeInfo:
    """A node and the non-terminated pods bound to it, as the filters see them.

    The dicts are shared between diagnoses: callers must not change them.
    """

    node: Obj
    pods: tuple[Obj, ...]  # as given, terminated ones too: what the entry was built from
    ids: tuple[int, ...]  # id() of each pod
    name: str
    labels: Mapping[str, str]
    taints: tuple[Obj, ...]
    other_taints: tuple[Obj, ...]  # all but the lifecycle taints (TaintToleration's)
    conditions: Mapping[str, str]
    # No cordon, no lifecycle taint, Ready not False/Unknown, no pressure condition: the
    # lifecycle filters pass every pod, whatever it tolerates.
    healthy: bool
    allocatable: dict[str, float]  # node_allocatable
    has_pod_limit: bool  # allocatable or capacity lists "pods"
    active: tuple[PodFacts, ...]  # the non-terminated pods
    requested: dict[str, float]  # their summed requests on the scheduler's grid, and "pods"
    free: dict[str, float]  # allocatable - requested per resource either names, and "pods"
    refs: frozenset[str]  # "ns/name" of the active pods
    uids: frozenset[str]
    anti_affinity: tuple[Obj, ...]  # active pods with required podAntiAffinity
    extended: tuple[PodFacts, ...]  # active pods asking for an extended resource (GPUs)
    # What the filters concluded here for a few recent targets (see simulate): it lives
    # with this NodeInfo, and goes on to the next one of the node only when its pods have
    # changed in status alone (``_hold_the_same``), so it is exactly as fresh.
    verdicts: dict[Hashable, Any] = field(default_factory=dict)
    # What the filters that read only the node concluded for a few recent targets: shared
    # by every NodeInfo of this node object, as its pods come and go.
    node_verdicts: dict[Hashable, Any] = field(default_factory=dict)

    def remember(self, key: Hashable, value: Any) -> None:
        """Keeps a conclusion in ``verdicts`` (those of a few targets at most)."""
        _keep(self.verdicts, key, value)

    def remember_for_node(self, key: Hashable, value: Any) -> None:
        """Keeps a conclusion in ``node_verdicts`` (those of a few targets at most)."""
        _keep(self.node_verdicts, key, value)


def _keep(verdicts: dict[Hashable, Any], key: Hashable, value: Any) -> None:
    if len(verdicts) >= _KEPT_PER_NODE:
        verdicts.clear()
    verdicts[key] = value


# node name -> its NodeInfo, in each Memos (more nodes than the limit: start again)
_NODES: Table[str, NodeInfo] = Table(50_000)


def node_info(node: Obj, pods: Sequence[Obj], name: str | None = None,
              memos: Memos | None = None) -> NodeInfo:
    """The node's NodeInfo with ``pods`` bound to it (terminated pods hold nothing);
    ``name``: the node's, when the caller has it at hand; ``memos``: the diagnosis's
    (``handlers.memo.current()`` when None)."""
    return NodeInfos(memos).get(node, pods, name)


class NodeInfos:
    """``node_info`` for many nodes in a row (simulate's thousands a diagnosis): the memos
    and their table are looked up once."""

    __slots__ = ("kept", "memos")

    def __init__(self, memos: Memos | None = None) -> None:
        self.memos = current() if memos is None else memos
        self.kept = None if self.memos is None else _NODES.of(self.memos)

    def get(self, node: Obj, pods: Sequence[Obj], name: str | None = None) -> NodeInfo:
        """See ``node_info``."""
        if name is None:
            name = str((node.get("metadata") or {}).get("name") or "")
        kept = self.kept
        hit = kept.get(name) if kept is not None else None
        # The same pod objects: the very tuple (a watch cache hands out a node's tuple
        # again until its pods change), or the same ids: exact while ``hit`` keeps its pods
        # alive, as no other object can have their ids meanwhile.
        if hit is not None and hit.node is node and (
                hit.pods is pods or hit.ids == tuple(map(id, pods))):
            return hit
        info = build_node_info(node, pods, hit, self.memos)
        if (kept is not None and (node.get("metadata") or {}).get("uid")
                and all(f.uid for f in info.active)):
            kept.keep(name, info)
        return info


def build_node_info(node: Obj, pods: Sequence[Obj], like: NodeInfo | None = None,
                    memos: Memos | None = None) -> NodeInfo:
    """A NodeInfo computed afresh, never remembered (its pods' facts are, in ``memos``);
    ``like``: one of the same node object with other pods (only what the pods make is
    computed again)."""
    if like is not None and like.node is node:
        fields = _pod_fields(like.allocatable, like.has_pod_limit, pods, memos)
        # Most pod changes are status (a restart, readiness): the same pods asking the same
        # leave every verdict as it was, and a busy cluster changes hundreds a second.
        kept = (dict(like.verdicts) if like.verdicts and _hold_the_same(like.active,
                                                                         fields["active"])
                else {})
        return replace(like, verdicts=kept, **fields)
    meta = node.get("metadata") or {}
    spec = node.get("spec") or {}
    status = node.get("status") or {}
    taints = tuple(spec.get("taints") or ())
    conditions = {str(c.get("type")): str(c.get("status"))
                  for c in status.get("conditions") or ()}
    healthy = (not spec.get("unschedulable")
               and not any(t.get("key") in LIFECYCLE_TAINTS for t in taints)
               and conditions.get("Ready", "True") == "True"
               and not any(conditions.get(c) == "True" for c in _PRESSURE))
    alloc = node_allocatable(node)
    has_pod_limit = PODS in alloc or "pods" in (status.get("capacity") or {})
    return NodeInfo(
        node=node, name=str(meta.get("name") or ""),
        labels=meta.get("labels") or {}, taints=taints,
        other_taints=tuple(t for t in taints if t.get("key") not in LIFECYCLE_TAINTS),
        conditions=conditions, healthy=healthy, allocatable=alloc,
        has_pod_limit=has_pod_limit, **_pod_fields(alloc, has_pod_limit, pods, memos))


def _pod_fields(alloc: dict[str, float], has_pod_limit: bool, pods: Sequence[Obj],
                memos: Memos | None) -> dict[str, Any]:
    """The NodeInfo fields that the node's pods make."""
    active = tuple(f for f in (pod_facts(p, memos) for p in pods) if not f.terminated)
    summed: dict[str, float] = {}
    for f in active:
        for k, v in f.requests.items():
            summed[k] = summed.get(k, 0.0) + v
    requested = {k: canonical(k, v) for k, v in summed.items()}
    free: dict[str, float] = {}
    for k in alloc.keys() | requested.keys():
        if k != PODS:
            free[k] = (units(k, alloc.get(k, 0.0)) - units(k, requested.get(k, 0.0))) / (
                1000 if k == "cpu" else 1)
    requested[PODS] = float(len(active))
    if has_pod_limit:
        free[PODS] = alloc.get(PODS, 0.0) - len(active)
    return {
        "pods": tuple(pods), "ids": tuple(map(id, pods)), "active": active,
        "requested": requested, "free": free, "refs": frozenset(f.ref for f in active),
        "uids": frozenset(f.uid for f in active if f.uid),
        "anti_affinity": tuple(f.pod for f in active if _required_anti_affinity(f.pod)),
        "extended": tuple(f for f in active if any(map(is_extended, f.requests))),
    }


def _hold_the_same(was: tuple[PodFacts, ...], now: tuple[PodFacts, ...]) -> bool:
    """The same active pods (by uid) with the same requests: all that the verdicts read of
    them (ports, affinity and priority are fixed in a pod's spec; a resize changes its
    requests, a pod that ends leaves the active ones)."""
    if len(was) != len(now):
        return False
    asks = {f.uid: f.requests for f in was}
    return all(f.uid and asks.get(f.uid) == f.requests for f in now)


def _required_anti_affinity(pod: Obj) -> bool:
    affinity = (pod.get("spec") or {}).get("affinity") or {}
    return bool((affinity.get("podAntiAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"))
