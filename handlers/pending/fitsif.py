"""What would make it fit: the smallest single changes that let a pending GPU pod schedule.

Each candidate change is applied to a copy of the pod or of a node and the scheduler's
filters run again (``simulate``); only a change after which a node passes every filter is
offered. Candidates come from the rejections the real run found, so each names the node,
the taint, the label, the pods to move. Changes the filters do not see (a quota, a
LimitRange, a scheduler name) are offered only when placement already succeeds: then the
gate is the one thing left. Ordered by cost: fewest objects changed and no evictions first.

A node a GPU-stack fault is about (a code the card graph leads to INSUFFICIENT_GPU from:
a plugin that crashes or never registered, a failed MIG reconfiguration, an image that
cannot be pulled) is tried repaired, advertising the GPUs it has, or what the pod asks when
the data does not say how many. Fewer GPUs come after freeing GPUs, and fewer than the
workload's parallelism needs (``handlers.knowledge.parallelism``: torchrun's
``--nproc_per_node``, vLLM's tensor parallel size, ...) only when nothing else fits, saying
what the smaller request costs.

Copies carry no ``metadata.uid``: the memos keyed by uid (node_info, pod_facts) must not
mistake a what-if for a newer version of the real object.
"""

from __future__ import annotations

import copy
import itertools
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from functools import cache
from operator import attrgetter, itemgetter
from typing import Any

from handlers.cards import CHANGES, Section, card, catalogue
from handlers.chain.row import MIG_CONFIG_LABEL
from handlers.codes import title
from handlers.gpu import GPU_RESOURCE, is_gpu_resource, name_of
from handlers.knowledge.parallelism import parallelism
from handlers.kube.commands import kubectl
from handlers.kube.quantity import fmt_quantity, parse_quantity
from handlers.kube.resources import CPU, MEMORY, PODS
from handlers.kube.taints import (
    PRESSURE_TAINTS,
    READINESS_TAINTS,
    TAINT_UNSCHEDULABLE,
    taint_str,
)
from handlers.model import Finding, FitChange, ObjectRef
from handlers.pending.context import PendingContext
from handlers.pending.queueing import PREEMPT_NEVER, priority_of
from handlers.rootcause import cause_codes
from handlers.scheduler.filters import NodeFit, simulate
from handlers.view import Obj
from handlers.words import counted

# Selector labels that pick a GPU model: changing one changes what the workload runs on.
GPU_TYPE_LABELS = ("nvidia.com/gpu.product", "nvidia.com/gpu.family", "nvidia.com/gpu.memory",
                   "cloud.google.com/gke-accelerator", "k8s.amazonaws.com/accelerator",
                   "nvidia.com/gpu.machine", "node.kubernetes.io/instance-type")
_MAX_BRUTE = 12  # holders per node tried exhaustively for the fewest pods to move
_MAX_TRIES = 3  # nodes re-checked per kind of change
_MIG_PROFILE = re.compile(r"mig-((\d+)g\.(\d+)gb)")
# Filters that rule a node out for where the pod is sent (its nodeName, node selector and
# affinity, tolerations, its volumes' node affinity): a node like it rules the pod out too.
_TARGETING = frozenset({"NodeName", "NodeAffinity", "TaintToleration", "VolumeNodeAffinity"})


@dataclass
class Outcome:
    changes: list[FitChange]
    closest: str = ""  # when no single change suffices: what the closest option lacks


def _anon(obj: Obj) -> dict[str, Any]:
    """A deep copy without the uid (see the module docstring)."""
    out: dict[str, Any] = copy.deepcopy(dict(obj))
    out.setdefault("metadata", {}).pop("uid", None)
    return out


class _Sim:
    """Re-runs the filters with one change applied."""

    def __init__(self, ctx: PendingContext, scope: Collection[str] | None = None) -> None:
        self.ctx = ctx
        spec = ctx.pod.get("spec") or {}
        has_pvc = any("persistentVolumeClaim" in v for v in spec.get("volumes") or [])
        self.pvcs = ctx.reader.list("PersistentVolumeClaim", ctx.namespace) if has_pvc else []
        self.pvs = ctx.reader.list("PersistentVolume") if self.pvcs else []
        # The pod's own inter-pod (anti-)affinity reads every node's pods: then every node
        # runs. Otherwise a node's verdict is its own: only the nodes a change can help run
        # (existing pods' anti-affinity is then judged within those nodes).
        aff = spec.get("affinity") or {}
        # So does an existing pod's anti-affinity that turned the pod away: its topology
        # (a zone) may span a new node like those it blocks.
        self.whole = bool(aff.get("podAffinity") or aff.get("podAntiAffinity")) or any(
            "InterPodAffinity" in f.filters for f in ctx.node_fits)
        self.scope = None if self.whole or scope is None else set(scope)
        # Node names in the cluster's order, and the scope's, worked out once: a search
        # runs the filters a dozen times over a thousand nodes.
        self.order = ctx.node_order
        self.in_scope = None if self.scope is None else self._ordered(self.scope)

    def _ordered(self, names: Collection[str]) -> list[str]:
        return sorted((n for n in names if n in self.order), key=self.order.__getitem__)

    def run(self, pod: Obj | None = None, nodes: Mapping[str, Obj] | None = None,
            pods_by_node: Mapping[str, Sequence[Obj]] | None = None,
            resource: str | None = None, only: Collection[str] | None = None
            ) -> dict[str, NodeFit]:
        nodes = nodes or {}
        by_name = self.ctx.nodes_by_name
        names: Iterable[str] = by_name
        if not self.whole and only is not None:
            names = self._ordered(only)
        elif not self.whole and self.in_scope is not None:
            names = self.in_scope
        all_nodes = [nodes.get(n) or by_name[n] for n in names]
        fits = simulate(pod or self.ctx.pod, all_nodes, pods_by_node or self.ctx.pods_by_node,
                        pvcs=self.pvcs, pvs=self.pvs,
                        gpu_resource=resource or self.ctx.gpu_request[0])
        return {f.node: f for f in fits}


def _node_ref(n: str) -> ObjectRef:
    return ObjectRef("Node", n)


def _workload_ref(ctx: PendingContext) -> ObjectRef:
    if ctx.controller is not None:
        return ObjectRef(str(ctx.controller.get("kind")), name_of(ctx.controller),
                         ctx.namespace)
    return ObjectRef("Pod", ctx.pod_name, ctx.namespace)


def _terminating(pod: Obj) -> bool:
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def _lacks(fit: NodeFit | None) -> str:
    if fit is None:
        return "no node to try"
    return "; ".join(f"{r.filter}: {r.reason}" for r in fit.rejections[:3])


class _Search:
    def __init__(self, ctx: PendingContext, fits: list[NodeFit], gpu_nodes: AbstractSet[str],
                 physical: Callable[[str], float], broken: set[str]) -> None:
        self.ctx = ctx
        self.broken = broken  # nodes a discovery-chain finding is about
        self.fits = {f.node: f for f in fits}
        self.gpu_nodes = gpu_nodes
        self.physical = physical
        self.res, self.need = ctx.gpu_request
        self.sim = _Sim(ctx, gpu_nodes)
        self.found: list[FitChange] = []
        self.last_resort: list[FitChange] = []  # offered only when nothing else is found
        self.near: list[tuple[int, str]] = []  # (rejections left, "option: what it lacks")
        self._pool = sorted((f for f in self.fits.values() if f.node in gpu_nodes),
                            key=attrgetter("node"))

    # -- helpers ---------------------------------------------------------------------
    def pool(self) -> list[NodeFit]:
        return self._pool

    def _try_node(self, name: str, node: Obj, label: str,
                  pods_by_node: Mapping[str, Sequence[Obj]] | None = None) -> bool:
        got = self.sim.run(nodes={name: node}, pods_by_node=pods_by_node, only=(name,)).get(name)
        if got is not None and got.fits:
            return True
        if got is not None:
            self.near.append((len(got.rejections), f"{label} still leaves {_lacks(got)}"))
        return False

    def _try_pod(self, pod: Obj, label: str, resource: str | None = None,
                 only: Collection[str] | None = None) -> list[str]:
        got = self.sim.run(pod=pod, resource=resource, only=only)
        ok = sorted(n for n, f in got.items() if f.fits and n in self.gpu_nodes)
        if not ok:
            best = min((f for n, f in got.items() if n in self.gpu_nodes),
                       key=lambda f: len(f.rejections), default=None)
            if best is not None:
                self.near.append((len(best.rejections),
                                  f"{label} still leaves on {best.node}: {_lacks(best)}"))
        return ok

    def _leaving(self, node: str) -> bool:
        """Pods on the node the API server deletes and waits for its kubelet to confirm."""
        return any(_terminating(p) for p in self.ctx.pods_by_node.get(node, ()))

    def _only(self, fits: Iterable[NodeFit], fixed: set[str], label: str,
              also: Callable[[NodeFit], set[str]] = lambda f: set()) -> list[NodeFit]:
        """Nodes whose every rejection the change addresses (``fixed``, and ``also`` of the
        node: at most a few, most free first); the others are noted as near misses without
        re-running anything."""
        out = []
        for f in self._by_free(fits):
            left = [r for r in f.rejections if r.filter not in fixed | also(f)]
            if left:
                self.near.append((len(left), f"{label.format(node=f.node)} still leaves "
                                  + "; ".join(f"{r.filter}: {r.reason}" for r in left[:3])))
            else:
                out.append(f)
        return out[:_MAX_TRIES]

    # -- node changes ----------------------------------------------------------------
    def uncordon(self) -> None:
        for f in self._only((f for f in self.pool() if "NodeUnschedulable" in f.filters),
                            {"NodeUnschedulable"}, "uncordon {node}"):
            node = _anon(self.ctx.nodes_by_name[f.node])
            node.setdefault("spec", {})["unschedulable"] = False
            node["spec"]["taints"] = [t for t in node["spec"].get("taints") or []
                                      if t.get("key") != TAINT_UNSCHEDULABLE]
            if self._try_node(f.node, node, f"uncordon {f.node}"):
                self.found.append(FitChange(
                    "uncordon", f"uncordon {f.node}", [f.node], [_node_ref(f.node)], (1, 0),
                    (kubectl("uncordon", f.node),)))
                return

    def node_ready(self) -> None:
        """NotReady or under pressure: the node healthy again (kind `other`)."""
        for f in self._only((f for f in self.pool()
                             if f.filters & {"NodeReady", "NodePressure"}),
                            {"NodeReady", "NodePressure"}, "{node} healthy again",
                            also=lambda f: {"NodeResourcesFit"} if self._leaving(f.node)
                            else set()):
            node = _anon(self.ctx.nodes_by_name[f.node])
            spec, st = node.setdefault("spec", {}), node.setdefault("status", {})
            spec["taints"] = [t for t in spec.get("taints") or []
                              if t.get("key") not in READINESS_TAINTS | PRESSURE_TAINTS]
            st["conditions"] = [
                {**c, "status": "True" if c.get("type") == "Ready" else "False"}
                for c in st.get("conditions") or []]
            what = "Ready" if "NodeReady" in f.filters else "free of resource pressure"
            # Back, its kubelet confirms the deletions the API server waits for: pods left
            # Terminating on an unreachable node stop holding its GPUs.
            pods = {**self.ctx.pods_by_node, f.node: [
                p for p in self.ctx.pods_by_node.get(f.node, ()) if not _terminating(p)]}
            if self._try_node(f.node, node, f"{f.node} {what}", pods_by_node=pods):
                commands = [kubectl("describe", "node", f.node)]
                summary = f"bring {f.node} back to {what}"
                if self._leaving(f.node):
                    summary += ("; back, it lets its Terminating pods go (if the machine is "
                                "gone, deleting the Node object does)")
                    commands.append(kubectl("delete", "node", f.node,
                                            note="only if the machine is gone"))
                self.found.append(FitChange(
                    "other", summary, [f.node], [_node_ref(f.node)], (1, 1),
                    tuple(commands)))
                return

    def fix_gpu_stack(self) -> None:
        """A node a GPU-stack fault is about, repaired, offers what it has: its physical
        GPUs when the data says how many, else (a node advertising none) what the pod asks,
        said as a condition. Only a node whose GPU count is all it lacks."""
        res = self.res or GPU_RESOURCE
        cands = [f for f in self.pool() if f.node in self.broken]
        tries = 0
        for f in sorted(cands, key=lambda f: (-self.physical(f.node), f.node)):
            label = f"repairing the GPU stack on {f.node}"
            if f.filters != {"NodeResourcesFit"} or any(r.resource != res for r in f.rejections):
                self.near.append((len(f.rejections), f"{label} still leaves {_lacks(f)}"))
                continue
            repaired = self._repaired(f, res)
            if repaired is None or tries == _MAX_TRIES:
                continue
            tries += 1
            have, summary, cost = repaired
            node = _anon(self.ctx.nodes_by_name[f.node])
            for key in ("capacity", "allocatable"):
                node.setdefault("status", {}).setdefault(key, {})[res] = fmt_quantity(have, res)
            if self._try_node(f.node, node, label):
                self.found.append(FitChange("fix-gpu-stack", summary, [f.node],
                                            [_node_ref(f.node)], cost))
                return

    def _repaired(self, f: NodeFit, res: str) -> tuple[float, str, tuple[float, ...]] | None:
        """(what the repaired node offers, the change's words, its cost), or None when a
        repair would not give the pod what it asks."""
        physical, alloc = self.physical(f.node), f.allocatable.get(res, 0.0)
        held = f.requested.get(res, 0.0)
        # Said the same on a card, where the findings are in the thread, and in the CLI.
        fix = f"repair the GPU stack on {f.node} (the findings about it say what is broken)"
        if physical > alloc:
            if physical - held < self.need:
                self.near.append((1, f"repairing the GPU stack on {f.node} gives it "
                                  f"{physical:g} {res}, {held:g} of them held"))
                return None
            what = ("GPU" if physical == 1 else "GPUs") if res == GPU_RESOURCE else res
            return physical, f"{fix} so that it advertises its {physical:g} {what}", (1, 2)
        if alloc:
            return None  # it offers what it has: a repair adds nothing
        # It advertises none and the data does not say how many it has: a GPU node has at
        # least one, so the repair is offered on the condition that it has what the pod asks.
        labels = (self.ctx.nodes_by_name[f.node].get("metadata") or {}).get("labels") or {}
        profile = _mig_profile(res)
        if profile is not None:
            config = str(labels.get(MIG_CONFIG_LABEL) or "")
            if profile not in config:
                self.near.append((1, f"repairing MIG on {f.node}: its {MIG_CONFIG_LABEL} "
                                  f"{config or '(none)'} does not name {profile}"))
                return None
            return self.need + held, (
                f"{fix}: its {MIG_CONFIG_LABEL}={config} makes {res}, and the pod fits once "
                "mig-manager applies it"), (1, 3)
        return self.need + held, (
            f"{fix}: the pod fits once it advertises {self.need:g} {res} (the data does not "
            "say how many GPUs it has)"), (1, 3)

    def free_gpus(self) -> None:
        """The node where the fewest, then smallest, GPU holders must move."""
        res = self.res
        if not res:
            return
        best: tuple[tuple[int, float, str], NodeFit, list[tuple[str, float]]] | None = None
        for f in self.pool():
            if f.filters != {"NodeResourcesFit"}:
                continue
            if any(r.resource != res for r in f.rejections):
                continue
            deficit = self.need - f.free.get(res, 0.0)
            pick = fewest_holders(f.holders, deficit)
            if pick is None:
                continue
            key = (len(pick), sum(g for _, g in pick), f.node)
            if best is None or key < best[0]:
                best = (key, f, pick)
        if best is None:
            return
        _, f, pick = best
        refs = {r for r, _ in pick}
        pods = {**self.ctx.pods_by_node}
        moving = [p for p in pods.get(f.node, []) if _pod_ref(p) in refs]
        pods[f.node] = [p for p in pods.get(f.node, []) if _pod_ref(p) not in refs]
        node = _anon(self.ctx.nodes_by_name[f.node])
        if self._try_node(f.node, node, f"freeing GPUs on {f.node}", pods_by_node=pods):
            moved = ", ".join(f"{r} ({g:g})" for r, g in pick)
            self.found.append(FitChange(
                "free-gpus", f"free {self.need - f.free.get(res, 0.0):g} {res} on {f.node} by "
                f"moving {counted(len(pick), 'pod')}: {moved}{self._priority_note(moving)}",
                [f.node],
                [_node_ref(f.node), *(ObjectRef("Pod", r.split("/", 1)[1], r.split("/", 1)[0])
                                      for r, _ in pick)],
                (2 + len(pick), sum(g for _, g in pick))))

    def _priority_note(self, moving: Sequence[Obj]) -> str:
        """What priority says about moving these pods: they outrank the pod, or the
        scheduler would evict them itself but for the pod's preemptionPolicy: Never."""
        prio, _, policy = priority_of(self.ctx, self.ctx.pod)
        theirs = [priority_of(self.ctx, p)[0] for p in moving]
        if not theirs:
            return ""
        if max(theirs) > prio:
            return (f"; they outrank the pod (priority {max(theirs)} > {prio}): moving them sets "
                    "back more important work")
        if policy == PREEMPT_NEVER and max(theirs) < prio:
            return ("; the scheduler would evict them itself if the pod's preemptionPolicy were "
                    "PreemptLowerPriority, not Never")
        return ""

    def add_nodes(self) -> None:
        """A new node like a feasible one of the pool: empty, ready, all its GPUs."""
        res = self.res or GPU_RESOURCE
        from handlers.grouping import pool_of
        cands = [f for f in self.pool() if not (f.filters & _TARGETING)]
        shapes: dict[tuple[str | None, float, tuple[tuple[str, float], ...]], NodeFit] = {}
        for f in sorted(cands, key=lambda f: (-self.physical(f.node), f.node)):
            # A new node is like its pool's nodes: one try per kind of node.
            shapes.setdefault((pool_of(self.ctx.nodes_by_name[f.node]), self.physical(f.node),
                               tuple(sorted(f.allocatable.items()))), f)
        for f in list(shapes.values())[:_MAX_TRIES]:
            tmpl = self.ctx.nodes_by_name[f.node]
            node = _anon(tmpl)
            node["metadata"]["name"] = name = f"{f.node}-new"
            spec, st = node.setdefault("spec", {}), node.setdefault("status", {})
            spec["unschedulable"] = False
            spec["taints"] = [t for t in spec.get("taints") or [] if t.get("key") not in
                              READINESS_TAINTS | PRESSURE_TAINTS | {TAINT_UNSCHEDULABLE}]
            st["conditions"] = [{"type": "Ready", "status": "True"}]
            if f.node in self.broken and res == GPU_RESOURCE and self.physical(f.node):
                for key in ("capacity", "allocatable"):  # a new node's GPU stack works
                    st.setdefault(key, {})[res] = fmt_quantity(self.physical(f.node), res)
            got = self.sim.run(nodes={f.node: node}, only=(f.node,),
                               pods_by_node={**self.ctx.pods_by_node, name: []}).get(name)
            if got is not None and got.fits:
                pool = pool_of(tmpl)
                like = f"to pool {pool}" if pool else f"like {f.node}"
                self.found.append(FitChange(
                    "add-nodes", f"add a GPU node {like} (the pod fits on an empty one)",
                    [f.node], [_node_ref(f.node)], (9, 0)))
                return

    # -- pod changes -----------------------------------------------------------------
    def tolerate(self) -> None:
        best: tuple[int, str, list[dict[str, Any]]] | None = None
        for f in self.pool():
            taints = [r.taint for r in f.rejections
                      if r.filter == "TaintToleration" and r.taint]
            if taints and (best is None or len(taints) < best[0]):
                best = (len(taints), f.node, taints)
        if best is None:
            return
        taints = best[2]
        pod = _anon(self.ctx.pod)
        spec = pod.setdefault("spec", {})
        spec["tolerations"] = [*(spec.get("tolerations") or []), *(
            {"key": t.get("key"), "operator": "Equal" if t.get("value") else "Exists",
             **({"value": t["value"]} if t.get("value") else {}), "effect": t.get("effect")}
            for t in taints)]
        shown = ", ".join(taint_str(t) for t in taints)
        ok = self._try_pod(pod, f"tolerating {shown}")
        if ok:
            self.found.append(FitChange(
                "tolerate-taint", f"add a toleration for {shown} to the pod spec (then it fits "
                f"on {', '.join(ok[:3])})", ok[:5], [_workload_ref(self.ctx)], (1, 1)))

    def change_selector(self) -> None:
        spec = self.ctx.pod.get("spec") or {}
        sel = dict(spec.get("nodeSelector") or {})
        for f in self._only((f for f in self.pool() if "NodeAffinity" in f.filters),
                            {"NodeAffinity"}, "a selector matching {node}"):
            have = ((self.ctx.nodes_by_name[f.node].get("metadata") or {}).get("labels")) or {}
            pod = _anon(self.ctx.pod)
            pspec = pod.setdefault("spec", {})
            new_sel = {k: have[k] for k in sel if k in have}
            changed = {k: v for k, v in new_sel.items() if sel.get(k) != v}
            dropped = [k for k in sel if k not in have]
            pspec["nodeSelector"] = new_sel
            aff = dict(pspec.get("affinity") or {})
            node_aff = dict(aff.get("nodeAffinity") or {})
            had_required = node_aff.pop("requiredDuringSchedulingIgnoredDuringExecution", None)
            if f.node not in self._try_pod(pod, f"a selector matching {f.node}", only=(f.node,)):
                continue
            parts = [f"{k}: {v}" for k, v in changed.items()]
            parts += [f"drop {k}" for k in dropped]
            if had_required:
                # Keep the required affinity if the selector change alone is enough.
                aff["nodeAffinity"] = {**node_aff, "requiredDuringSchedulingIgnoredDuringExecution":
                                       had_required}
                pspec["affinity"] = aff
                if f.node not in self._try_pod(pod, "the selector change alone", only=(f.node,)):
                    parts.append("relax the required node affinity")
            what = "; ".join(parts) or "relax the node affinity"
            other_gpu = any(k in GPU_TYPE_LABELS for k in [*changed, *dropped])
            self.found.append(FitChange(
                "change-selector", f"change the node selector to match {f.node} ({what})"
                + (": a different GPU model than the pod asked for" if other_gpu else ""),
                [f.node], [_workload_ref(self.ctx)], (1, 6) if other_gpu else (1, 2)))
            return

    def change_request(self) -> None:
        res = self.res
        if not res:
            return
        # Nodes the pod may go to that offer none of what it asks (a typo, a MIG strategy):
        # ask what they offer instead.
        offered = {k for f in self.pool() if not (f.filters & _TARGETING)
                   and not f.allocatable.get(res) for k, v in f.allocatable.items()
                   if is_gpu_resource(k) and v > 0 and k != res}
        if not any(f.allocatable.get(res) for f in self.pool()):
            offered |= {k for f in self.pool() for k, v in f.allocatable.items()
                        if is_gpu_resource(k) and v > 0 and k != res}
        for alt in sorted(offered, key=_resource_order):
            ok = self._try_pod(_renamed(self.ctx.pod, res, alt),
                               f"asking {alt} instead of {res}", resource=alt)
            if ok:
                self.found.append(FitChange(
                    "change-request", f"ask for {alt} instead of {res} (fits on "
                    f"{', '.join(ok[:3])})", ok[:5], [_workload_ref(self.ctx)], (1, 3)))
                return
        self._fewer_gpus()
        # Resources besides the GPU: lower them to what a node with the GPUs free has.
        cands = [f for f in self._by_free(self.pool()) if f.rejections and all(
            r.filter == "NodeResourcesFit" and r.resource not in (res, PODS)
            and r.free is not None and r.free > 0 for r in f.rejections)]
        for f in cands[:_MAX_TRIES]:
            lower = {str(r.resource): float(r.free or 0.0) for r in f.rejections}
            ok = self._try_pod(_with_requests(self.ctx.pod, lower),
                               f"lower requests on {f.node}", only=(f.node,))
            if f.node in ok:
                shown = ", ".join(f"{k} to {fmt_quantity(v, k)}" for k, v in lower.items())
                self.found.append(FitChange(
                    "change-request", f"lower the pod's {shown} (what {f.node} has free)",
                    [f.node], [_workload_ref(self.ctx)], (1, 4)))
                return

    def _fewer_gpus(self) -> None:
        """Ask as many GPUs as the best node has free (still at least one per container
        that asks): after freeing GPUs, and below what the workload's parallelism needs
        (``handlers.knowledge.parallelism``) only when nothing else lets it fit."""
        res, need = self.res, self.need
        if not res:
            return
        short = [f for f in self.pool() if f.filters == {"NodeResourcesFit"}
                 and all(r.resource == res for r in f.rejections)]
        most = max((f.free.get(res, 0.0) for f in short), default=0.0)
        asks = _gpu_asks(self.ctx.pod, res)
        if not asks or not 1 <= most < need or most != int(most):
            return
        big_ask, big = max(asks, key=itemgetter(0))
        new = most - (sum(a for a, _ in asks) - big_ask)
        if new < 1:
            return
        ok = self._try_pod(_with_gpus(self.ctx.pod, res, most), f"asking {most:g} {res}")
        if not ok:
            return
        par = parallelism(big, int(big_ask), res, self.ctx.controller)
        fits = f"ask for {most:g} {res} instead of {need:g} (fits on {', '.join(ok[:3])})"
        costs = par.shrink.replace("{n} GPUs", counted(new, "GPU")).replace("{n}", f"{new:g}")
        if par.gpus is not None and new < par.gpus:
            self.last_resort.append(FitChange(
                "change-request", f"{fits}, only because nothing else fits: {par.evidence}; "
                f"{costs}", ok[:5], [_workload_ref(self.ctx)], (10,)))
            return
        why = (f"{par.evidence}; {costs}" if par.gpus is None else
               f"{par.evidence} uses {par.gpus} of the {big_ask:g} it asks")
        # Never ahead of freeing GPUs: a smaller request is slower, if nothing else.
        after = max([(8.0,), *((*c.cost, 1.0) for c in self.found if c.change == "free-gpus")])
        self.found.append(FitChange("change-request", f"{fits}: {why}", ok[:5],
                                    [_workload_ref(self.ctx)], after))

    def _by_free(self, fits: Iterable[NodeFit]) -> list[NodeFit]:
        res = self.res or GPU_RESOURCE
        return sorted(fits, key=lambda f: (-f.free.get(res, 0.0), f.node))


@cache
def _stack_codes() -> frozenset[str]:
    """Faults of a node's GPU stack that can leave a pod short of GPUs: every code the card
    graph leads to INSUFFICIENT_GPU from (a crash-looping plugin, a failed MIG
    reconfiguration, an image that cannot be pulled, ...), but the scheduler's own (a
    NotReady node, preemption, the autoscaler: other changes lift those)."""
    cat = catalogue()
    seen: set[str] = set()
    todo = ["INSUFFICIENT_GPU"]
    while todo:
        for cause in cat.causes_of.get(todo.pop(), ()):
            if cause not in seen:
                seen.add(cause)
                todo.append(cause)
    return frozenset(c for c in seen if cat.cards[c].section != Section.SCHEDULING)


def _mig_profile(res: str) -> str | None:
    """``2g.10gb`` for ``nvidia.com/mig-2g.10gb``."""
    m = _MIG_PROFILE.search(res)
    return m[1] if m else None


def _pod_ref(pod: Obj) -> str:
    return f"{(pod.get('metadata') or {}).get('namespace') or ''}/{name_of(pod)}"


def _resource_order(res: str) -> tuple[int, float, str]:
    """nvidia.com/gpu first, then MIG profiles biggest first."""
    if res == GPU_RESOURCE:
        return 0, 0.0, res
    m = _MIG_PROFILE.search(res)
    return 1, -(float(m[2]) * 1000 + float(m[3])) if m else 0.0, res


def fewest_holders(holders: list[tuple[str, float]],
                   deficit: float) -> list[tuple[str, float]] | None:
    """The fewest holders whose GPUs cover ``deficit``; among those, the fewest GPUs moved."""
    if deficit <= 0:
        return []
    hs = sorted(holders, key=lambda h: (-h[1], h[0]))
    # The fewest pods that can cover it are the biggest ones: no k-1 pods can.
    left, k = deficit, 0
    for _, g in hs:
        if left <= 0:
            break
        left -= g
        k += 1
    if left > 0:
        return None
    if len(hs) > _MAX_BRUTE:  # greedy: the biggest k
        return hs[:k]
    combos = [c for c in itertools.combinations(hs, k) if sum(g for _, g in c) >= deficit]
    return list(min(combos, key=lambda c: (sum(g for _, g in c), [r for r, _ in c])))


def _renamed(pod: Obj, old: str, new: str) -> dict[str, Any]:
    out = _anon(pod)
    for key in ("containers", "initContainers"):
        for c in (out.get("spec") or {}).get(key) or []:
            for part in ("requests", "limits"):
                rl = (c.get("resources") or {}).get(part) or {}
                if old in rl:
                    rl[new] = rl.pop(old)
    return out


def _gpu_asks(pod: Obj, res: str) -> list[tuple[float, dict[str, Any]]]:
    """(what it asks of ``res``, the container) for each container that asks it."""
    out = []
    for c in (pod.get("spec") or {}).get("containers") or []:
        r = c.get("resources") or {}
        limits, requests = r.get("limits") or {}, r.get("requests") or {}
        if res in limits or res in requests:
            out.append((parse_quantity(limits.get(res, requests.get(res))), c))
    return out


def _with_gpus(pod: Obj, res: str, total: float) -> dict[str, Any]:
    """The pod asking ``total`` of ``res`` in the container that asks the most of it."""
    out = _anon(pod)
    asks = _gpu_asks(out, res)
    if not asks:
        return out
    big_ask, big = max(asks, key=itemgetter(0))
    value = fmt_quantity(max(total - (sum(a for a, _ in asks) - big_ask), 0.0), res)
    for part in ("requests", "limits"):
        rl = big["resources"].get(part)
        if rl is not None and res in rl:
            rl[res] = value
    return out


def _with_requests(pod: Obj, want: Mapping[str, float]) -> dict[str, Any]:
    """The pod asking at most ``want`` of each resource (the biggest container gives way)."""
    out = _anon(pod)
    cs = (out.get("spec") or {}).get("containers") or []
    for res, total in want.items():
        asked = [(parse_quantity(((c.get("resources") or {}).get("requests") or {}).get(res)), c)
                 for c in cs]
        rest = sum(v for v, _ in asked) - max((v for v, _ in asked), default=0.0)
        _, big = max(asked, key=lambda a: a[0], default=(0.0, None))
        if big is None:
            continue
        value = fmt_quantity(max(total - rest, 0.0), res)
        r = big.setdefault("resources", {})
        r.setdefault("requests", {})[res] = value
        if res in (r.get("limits") or {}) and res in (CPU, MEMORY):
            r["limits"][res] = value
    return out


def _gates(findings: list[Finding]) -> list[Finding]:
    """Independent problems held before or outside the scheduler's filters (their cards
    name a ``gate``): a LimitRange's symptom is not another."""
    gates = [f for f in findings if f.severity.is_problem and card(f.code).gate]
    codes = {f.code for f in gates}
    causes = cause_codes(findings)
    return [f for f in gates if not set(causes.get(id(f), ())) & codes]


def find(ctx: PendingContext, fits: list[NodeFit], gpu_nodes: AbstractSet[str],
         physical: Callable[[str], float], findings: list[Finding]) -> Outcome:
    """fits_if for one pending GPU pod (see the module docstring)."""
    if ctx.gpu_request[0] is None:
        return Outcome([])
    gates = _gates(findings)
    placed = any(f.fits for f in fits)
    if placed:
        if len(gates) == 1:
            g = gates[0]
            return Outcome([_gate_change(ctx, g)])
        if len(gates) > 1:
            return Outcome([], "more than one thing holds the pod before the scheduler: "
                           + ", ".join(dict.fromkeys(g.code for g in gates)))
        return Outcome([])
    stack = _stack_codes()
    broken = {o.name for f in findings if f.severity.is_problem and f.code in stack
              for o in f.objects if o.kind == "Node"}
    s = _Search(ctx, fits, gpu_nodes, physical, broken)
    # Freeing GPUs before asking for fewer: a smaller request is ranked after it.
    for step in (s.uncordon, s.node_ready, s.tolerate, s.change_selector, s.fix_gpu_stack,
                 s.free_gpus, s.change_request, s.add_nodes):
        step()
    found = sorted(s.found or s.last_resort, key=lambda c: (c.cost, CHANGES.index(c.change)))
    if gates:
        lacks = ", ".join(dict.fromkeys(g.code for g in gates))
        near = f"{found[0].summary}, and still {lacks}" if found else f"placement and {lacks}"
        return Outcome([], f"no single change: {near}")
    if found:
        return Outcome(found)
    nearest = min(s.near, default=None)
    return Outcome([], f"no single change suffices; closest: {nearest[1]}" if nearest else
                   "no single change suffices")


def fits_as(ctx: PendingContext, template: Mapping[str, Any]) -> list[str]:
    """GPU nodes the pod would pass every filter on with ``template``'s spec (e.g. the
    revision before a rollout)."""
    pod = _anon(ctx.pod)
    pod["spec"] = copy.deepcopy(dict(template.get("spec") or {}))
    pod["metadata"]["labels"] = dict((template.get("metadata") or {}).get("labels") or {})
    got = _Sim(ctx).run(pod=pod)
    return sorted(n for n, f in got.items() if f.fits)


def _gate_change(ctx: PendingContext, g: Finding) -> FitChange:
    kind = str(card(g.code).gate)
    objs = [o for o in g.objects if o.kind != "Node"]
    summary = _quota_summary(ctx, g) if g.code == "QUOTA_EXCEEDED" else None
    if summary is None:
        first = g.fix.summary or (g.fix.commands[0] if g.fix.commands else g.summary)
        summary = f"{title(g.code)}: {first[:240]}"
    return FitChange(kind, summary, [], objs or [_workload_ref(ctx)], (1, 5))


def _quota_summary(ctx: PendingContext, g: Finding) -> str | None:
    """By how much: used + what the pod asks, against hard, from the quota object."""
    from handlers.kube.resources import pod_requests
    need = pod_requests(ctx.pod)
    for o in g.objects:
        if o.kind != "ResourceQuota":
            continue
        q = ctx.reader.get("ResourceQuota", o.name, o.namespace)
        st = (q or {}).get("status") or {}
        hard, used = st.get("hard") or {}, st.get("used") or {}
        for key, hv in hard.items():
            res = key.removeprefix("requests.")
            want = need.get(res, 0.0)
            if want and is_gpu_resource(res) and key in used:
                h, u = parse_quantity(hv), parse_quantity(used[key])
                if u + want > h:
                    return (f"raise ResourceQuota {o.name} {key} from {hv} to "
                            f"{fmt_quantity(u + want, res)} (+{fmt_quantity(u + want - h, res)})")
    return None

