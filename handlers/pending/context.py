"""Everything the why-pending checks share, computed once per diagnosis."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, NamedTuple

from handlers import batchjobs
from handlers.chain.inventory import SCOPE_FRACTION, device_plugin_nodes, plugin_nodes_among
from handlers.gpu import (
    GPU_RESOURCE,
    GpuTraits,
    gpu_traits,
    is_gpu_resource,
    name_of,
)
from handlers.kube.affinity import PodAffinityState
from handlers.kube.commands import json_patch_add, pointer
from handlers.kube.resources import pod_requests
from handlers.kube.workload import SpecOwner, of_controller
from handlers.memo import LastFor, Memos
from handlers.model import ObjectRef, Patch
from handlers.scheduler.filters import NodeFit, simulate
from handlers.scheduler.messages import parse_scheduling_message
from handlers.view import ACTIVE_PODS, Obj, Reader


def main_gpu_request(pod: Obj) -> tuple[str | None, float]:
    """The GPU resource a pod asks for (nvidia.com/gpu first) and how many."""
    req = {r: v for r, v in pod_requests(pod).items() if is_gpu_resource(r) and v > 0}
    if not req:
        return None, 0.0
    res = GPU_RESOURCE if GPU_RESOURCE in req else sorted(req)[0]
    return res, req[res]


class NodeTable(NamedTuple):
    """What every diagnosis works out over all nodes; shared, read-only."""

    traits: tuple[GpuTraits, ...]
    by_name: Mapping[str, Obj]
    order: Mapping[str, int]  # node name -> its place in the list
    gpu_like: frozenset[str]
    offering: dict[str, tuple[str, ...]]  # resource -> see nodes_for

    def nodes_for(self, resource: str) -> tuple[str, ...]:
        """Nodes that are GPU-like or offer ``resource``, in order."""
        found = self.offering.get(resource)
        if found is None:
            found = self.offering[resource] = tuple(
                t.name for t in self.traits if t.gpu_like or resource in t.offered)
        return found


def _node_table(nodes: Sequence[Obj], memos: Memos | None) -> NodeTable:
    traits = tuple(gpu_traits(n, memos) for n in nodes)
    return NodeTable(traits, {t.name: n for t, n in zip(traits, nodes, strict=True)},
                     {t.name: i for i, t in enumerate(traits)},
                     frozenset(t.name for t in traits if t.gpu_like), {})


# The nodes of a warm cache rarely change between two diagnoses (see handlers/memo.py).
node_table = LastFor(_node_table)


@dataclass
class PendingContext:
    """The target and the cluster as the why-pending checks see them.

    ``pod`` is the real pod when one exists, else the pod template of the controller
    (``pod_exists`` False) so that spec, quota and placement checks still run.
    """

    reader: Reader
    pod: Obj
    pod_exists: bool
    namespace: str
    controller: Obj | None = None  # Deployment/StatefulSet/Job/ReplicaSet named or owning
    # Events about the pod and its owners (ReplicaSet, Job, ...), newest last.
    events: list[Obj] = field(default_factory=list)
    controller_events: list[Obj] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    every_pod: bool = False  # True: never scope the pod read to the GPU nodes

    @cached_property
    def nodes(self) -> list[Obj]:
        return self.reader.list("Node")

    @cached_property
    def active_pods(self) -> list[Obj]:
        """Non-terminated pods in the cluster: the ones that hold node resources."""
        return self.reader.list("Pod", field_selector=ACTIVE_PODS)

    @cached_property
    def pod_scope(self) -> list[str] | None:
        """The nodes whose pods a diagnosis reads, or None for every pod.

        A GPU pod can only land on GPU nodes, so only their pods' usage matters: on a
        5,000-node cluster with 1,000 GPU nodes that is a fifth of the pods. When the
        GPU nodes are most of the cluster, one list is cheaper than one per node.
        """
        res, _ = self.gpu_request
        if res is None or PodAffinityState.needs_every_pod(self.pod):
            # Required pod (anti-)affinity counts the pods it names wherever they run (a
            # zone or rack topology spans CPU nodes too): only a full read answers it.
            return None
        names = list(self._table.nodes_for(res))
        if not names or len(names) * SCOPE_FRACTION > len(self.nodes):
            return None
        if self.every_pod or self.scheduler_named_pod_affinity:
            # An existing pod's required anti-affinity is symmetric: a pod on a CPU node
            # with a zone topologyKey turns the target away from every GPU node of its
            # zone. The scheduler said inter-pod affinity stopped it: read every pod.
            return None
        return names

    def read_every_pod(self) -> None:
        """Drop the GPU-node scope: what was worked out from it is worked out again from
        every pod (placement calls this before it says the pod fits somewhere)."""
        self.every_pod = True
        for name in ("pod_scope", "pods_by_node", "plugin_nodes", "node_fits"):
            self.__dict__.pop(name, None)

    @property
    def scope_note(self) -> str | None:
        """What the GPU-node scope left unread, for the diagnosis's "not checked"."""
        scope = self.pod_scope
        if scope is None:
            return None
        return (f"required anti-affinity of pods on the {len(self.nodes) - len(scope)} "
                "nodes without GPUs: their pods were not read (GPU nodes are at most "
                f"1/{SCOPE_FRACTION} of the nodes, so only theirs were); the pod fits on no GPU "
                "node anyway, and no scheduler message names inter-pod affinity")

    @cached_property
    def scheduler_named_pod_affinity(self) -> bool:
        """Whether a FailedScheduling event or the PodScheduled condition of the target
        names kube-scheduler's InterPodAffinity filter, in any release's words."""
        messages = [str(e.get("message") or "") for e in self.events
                    if e.get("reason") == "FailedScheduling"]
        messages += [str(c.get("message") or "")
                     for c in (self.pod.get("status") or {}).get("conditions") or []
                     if c.get("type") == "PodScheduled" and c.get("status") == "False"]
        return any(r.category in ("pod_affinity", "pod_anti_affinity")
                   for m in messages if m for r in parse_scheduling_message(m).reasons)

    @cached_property
    def _table(self) -> NodeTable:
        return node_table(self.nodes, self.reader.memos)

    @property
    def _traits(self) -> tuple[GpuTraits, ...]:
        return self._table.traits

    @property
    def nodes_by_name(self) -> Mapping[str, Obj]:
        return self._table.by_name

    @property
    def node_order(self) -> Mapping[str, int]:
        return self._table.order

    @property
    def gpu_like(self) -> frozenset[str]:
        """Nodes that advertise GPUs or are labelled for them (``is_gpu_node`` without
        the device-plugin pods)."""
        return self._table.gpu_like

    @cached_property
    def pods_by_node(self) -> dict[str, Sequence[Obj]]:
        scope = self.pod_scope
        if scope is not None:  # terminated pods included: they hold nothing, simulate knows
            return self.reader.pods_on(scope)
        out: dict[str, list[Obj]] = defaultdict(list)
        for p in self.active_pods:
            node = p.get("spec", {}).get("nodeName")
            if node:
                out[node].append(p)
        return dict(out)

    @cached_property
    def plugin_nodes(self) -> set[str]:
        """Nodes running a device-plugin pod."""
        if self.pod_scope is not None:
            return device_plugin_nodes(self.reader)
        return plugin_nodes_among(self.reader, self.active_pods)

    @cached_property
    def gpu_request(self) -> tuple[str | None, float]:
        return main_gpu_request(self.pod)

    @cached_property
    def node_fits(self) -> list[NodeFit]:
        """Every node through the scheduler's filters, once per diagnosis."""
        has_pvc = any("persistentVolumeClaim" in v
                      for v in self.pod.get("spec", {}).get("volumes") or [])
        pvcs = self.reader.list("PersistentVolumeClaim", self.namespace) if has_pvc else []
        pvs = self.reader.list("PersistentVolume") if pvcs else []
        return simulate(self.pod, self.nodes, self.pods_by_node, pvcs=pvcs, pvs=pvs,
                        gpu_resource=self.gpu_request[0])

    @property
    def target_ref(self) -> ObjectRef:
        """What findings are about: the pod, or the controller whose pods never appeared."""
        if self.pod_exists or self.controller is None:
            return ObjectRef("Pod", self.pod_name, self.namespace)
        return ObjectRef(str(self.controller.get("kind")), name_of(self.controller),
                         self.namespace)

    @cached_property
    def spec_owner(self) -> SpecOwner:
        """What a fix to the pod's spec patches: its Deployment, StatefulSet, Job, or the
        pod itself (handlers.kube.workload)."""
        c = self.controller
        if c is not None and c.get("kind") in batchjobs.KINDS:
            return SpecOwner(str(c["kind"]), name_of(c), self.namespace,
                             batchjobs.gpu_template_path(c))
        return of_controller(c, self.pod, self.reader.get)

    def pod_patch(self, content: Any, under: str = "") -> Patch:
        """``content`` for the pod spec (at its field ``under``, when given)."""
        o = self.spec_owner
        return Patch(o.kind, o.name, f"{o.path}.{under}" if under else o.path, content,
                     o.namespace)

    def container_patch(self, container: str, content: dict[str, Any]) -> Patch:
        """``content`` for one container of the pod spec, named as its list knows it."""
        spec = self.pod.get("spec") or {}
        key = ("initContainers" if any(c.get("name") == container
                                       for c in spec.get("initContainers") or [])
               else "containers")
        return self.pod_patch({key: [{"name": container, **content}]})

    def spec_has(self, field: str) -> bool:
        """Whether the spec owner's pod spec sets ``field`` (read from the owner itself: a
        pod carries tolerations its template does not)."""
        o = self.spec_owner
        obj = self.pod if o.kind == "Pod" else self.reader.get(o.kind, o.name, o.namespace)
        node: Any = obj or {}
        for key in [*pointer(o.path).split("/")[1:], field]:
            if isinstance(node, list) and key.isdigit() and int(key) < len(node):
                node = node[int(key)]
            else:
                node = node.get(key) if isinstance(node, dict) else None
        return node is not None

    def add_to_spec(self, field: str, items: list[Any]) -> str:
        """A ``kubectl patch --type json`` adding ``items`` to the pod spec's list ``field``."""
        o = self.spec_owner
        return json_patch_add(o.kind.lower(), o.name, f"{pointer(o.path)}/{field}", items,
                              exists=self.spec_has(field), namespace=o.namespace)

    def swap_resource(self, old: str, new: str, qty: int | str) -> Patch | None:
        """The first container asking ``old`` asks ``qty`` of ``new`` instead (``old``:
        null removes it, as a merge patch does)."""
        spec = self.pod.get("spec") or {}
        for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
            res = c.get("resources") or {}
            parts = {part: {old: None, new: qty} for part in ("requests", "limits")
                     if old in (res.get(part) or {})}
            if parts:
                return self.container_patch(str(c.get("name")), {"resources": parts})
        return None

    @property
    def pod_name(self) -> str:
        return str(self.pod.get("metadata", {}).get("name", ""))
