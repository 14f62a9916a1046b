"""Placement: why no node takes the pod, node by node, the way kube-scheduler filters.

The scheduler's words are the symptom; this module finds the cause. Nodes are narrowed in
the scheduler's order (targeting filters, then node lifecycle, then resources); a GPU
shortage is explained by the discovery chain of the nodes that should have had the GPUs
before it is called "insufficient".
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from functools import cached_property
from operator import attrgetter

from handlers import ledger
from handlers.chain import check_chain
from handlers.fixes import not_ready_fix
from handlers.gpu import (
    GPU_RESOURCE,
    MIG_CONFIG_STATE_LABEL,
    MIG_NOT_APPLIED,
    MIG_RESOURCE_RE,
    MIG_STRATEGY_LABEL,
    VOLCANO_GPU_RESOURCES,
    gpu_memory_mib,
    gpu_product,
    labels,
    name_of,
)
from handlers.kube.commands import kubectl
from handlers.kube.commands import line as shell_line
from handlers.kube.quantity import fmt_quantity, parse_quantity
from handlers.kube.resources import pod_requests
from handlers.memo import Table
from handlers.model import Finding, Fix, NodeVerdict, ObjectRef
from handlers.pending.context import PendingContext
from handlers.pending.fitsif import fewest_holders
from handlers.scheduler.filters import NodeFit, Rejection
from handlers.scheduler.messages import SchedulingMessage, parse_scheduling_message
from handlers.view import Obj
from handlers.words import counted

# Filters that decide where a pod may go at all, in the order the finding is attributed.
TARGETING = ("NodeName", "NodeAffinity", "TaintToleration", "InterPodAffinity",
             "VolumeNodeAffinity")
LIFECYCLE = {"NodeUnschedulable": "NODE_UNSCHEDULABLE", "NodeReady": "NODE_NOT_READY",
             "NodePressure": "NODE_PRESSURE"}
TARGETING_CODES = {"NodeAffinity": "NODE_SELECTOR_MISMATCH", "NodeName": "NODE_SELECTOR_MISMATCH",
                   "TaintToleration": "TAINT_NOT_TOLERATED",
                   "InterPodAffinity": "POD_AFFINITY_MISMATCH",
                   "VolumeNodeAffinity": "VOLUME_NODE_AFFINITY"}
GPU_FAMILIES = ("kepler", "maxwell", "pascal", "volta", "turing", "ampere", "ada-lovelace",
                "hopper", "blackwell")
PCIE_ONLY_RE = re.compile(r"(-PCIE-|\bT4\b|-T4$|\bL4\b|-L4$|A10G?$|-A10G?-|L40S?|-A2$|A16)",
                          re.IGNORECASE)
TARGETING_LABELS = ("nvidia.com/gpu.family", "nvidia.com/gpu.product",
                    "cloud.google.com/gke-accelerator", "nvidia.com/gpu.machine",
                    "k8s.amazonaws.com/accelerator", "nvidia.com/gpu.memory")
GPU_MEMORY_LABEL = "nvidia.com/gpu.memory"
# A node exclusion that leaves the pod other nodes is not what blocks it (its cards).
OTHERS_USABLE = "others-usable"
CUDA_OOM_RE = re.compile(r"(CUDA out of memory|CUDA error: out of memory|OutOfMemoryError)")


@dataclass
class Placement:
    """Intermediate results shared by the placement checks."""

    fits: list[NodeFit]
    gpu_resource: str | None
    gpu_need: float
    gpu_nodes: AbstractSet[str]
    nodes_by_name: Mapping[str, Obj]
    findings: list[Finding] = field(default_factory=list)
    physical: dict[str, float] = field(default_factory=dict)  # see physical_gpus

    @cached_property
    def _fit_by_node(self) -> dict[str, NodeFit]:
        return {f.node: f for f in self.fits}

    def fit(self, name: str) -> NodeFit:
        return self._fit_by_node[name]


def _targeting_rejections(fit: NodeFit) -> list[Rejection]:
    return [r for r in fit.rejections if r.filter in TARGETING]


def _first_targeting(fit: NodeFit) -> Rejection | None:
    rs = _targeting_rejections(fit)
    return min(rs, key=lambda r: TARGETING.index(r.filter)) if rs else None


def _lifecycle(fit: NodeFit) -> list[Rejection]:
    return [r for r in fit.rejections if r.filter in LIFECYCLE]


def _resource_rejections(fit: NodeFit) -> list[Rejection]:
    return [r for r in fit.rejections if r.filter == "NodeResourcesFit"]


def _gpu_fits(fit: NodeFit, resource: str, need: float) -> bool:
    return fit.free.get(resource, 0.0) >= need



def _holders_text(fit: NodeFit, limit: int = 4) -> str:
    hs = sorted(fit.holders, key=lambda h: -h[1])
    text = ", ".join(f"{p} ({g:g})" for p, g in hs[:limit])
    if len(hs) > limit:
        text += f", and {len(hs) - limit} more"
    return text or "no pods"


def latest_failed_scheduling(events: Iterable[Obj]) -> tuple[Obj, SchedulingMessage] | None:
    fs = [e for e in events if e.get("reason") == "FailedScheduling"]
    if not fs:
        return None
    ev = fs[-1]
    return ev, parse_scheduling_message(str(ev.get("message", "")))


def run_placement(ctx: PendingContext) -> Placement:
    resource, need = ctx.gpu_request
    gpu_nodes = ctx.gpu_like | (ctx.plugin_nodes & ctx.nodes_by_name.keys())
    return Placement(ctx.node_fits, resource, need, gpu_nodes, ctx.nodes_by_name)


def verdicts(p: Placement) -> list[NodeVerdict]:
    """Per-node verdict table, GPU nodes first."""
    out = []
    res = p.gpu_resource or GPU_RESOURCE
    texts: dict[int, str] = {}  # by Rejection: simulate shares the ones that read the same
    by_name = sorted(p.fits, key=attrgetter("node"))
    gpu = [f for f in by_name if f.node in p.gpu_nodes]
    kept = _VERDICTS.of()
    for f in gpu + [f for f in by_name if f.node not in p.gpu_nodes] if gpu else by_name:
        hit = kept.get(f.node) if kept is not None else None
        if hit is not None and hit[0] is f and hit[1] == res:
            out.append(hit[2])
            continue
        reasons = []
        for r in f.rejections:
            text = texts.get(id(r))
            if text is None:
                text = texts[id(r)] = f"{r.filter}: {r.reason}"
            reasons.append(text)
        v = NodeVerdict(node=f.node, fits=f.fits, reasons=reasons,
                        gpu_free=f.free.get(res, 0.0),
                        gpu_allocatable=f.allocatable.get(res, 0.0))
        if kept is not None:
            kept.keep(f.node, (f, res, v))
        out.append(v)
    return out


# node -> (its last NodeFit, resource, verdict), in the diagnosis's Memos: simulate hands
# out the same NodeFit for a node that did not change (see NodeInfo.verdicts), so its table
# row is made once too.
_VERDICTS: Table[str, tuple[NodeFit, str, NodeVerdict]] = Table(50_000)


def check(ctx: PendingContext) -> tuple[list[Finding], Placement]:
    p = run_placement(ctx)
    ref = ctx.target_ref
    last = latest_failed_scheduling(ctx.events)
    fitting = [f for f in p.fits if f.fits]
    if fitting and ctx.pod_scope is not None:
        # "It fits" read from the GPU nodes' pods alone could miss an existing pod's
        # zone-wide anti-affinity on a CPU node: say it only after reading every pod.
        ctx.read_every_pod()
        p = run_placement(ctx)
        fitting = [f for f in p.fits if f.fits]
    if fitting:
        return _fits_somewhere(ctx, p, fitting, last, ref), p

    # Which nodes are we talking about: nodes offering the GPU resource (or meant to),
    # or every node for a pod that asks no GPU.
    pool = [f for f in p.fits if (f.node in p.gpu_nodes)] if p.gpu_resource else list(p.fits)
    if p.gpu_resource and not pool:
        return [], p  # no GPU node at all: UNKNOWN_GPU_RESOURCE / autoscaler speak to it
    out: list[Finding] = []
    feasible = [f for f in pool if not _targeting_rejections(f)]
    out += _targeting_findings(ctx, pool, ref)
    usable = [f for f in feasible if not _lifecycle(f)]
    out += _lifecycle_findings(ctx, p, feasible, usable, ref)
    # A volume that pins the pod away from free GPUs is the cause; "insufficient" on the
    # nodes it is pinned to is only its symptom.
    pinned = any(f.code == "VOLUME_NODE_AFFINITY" for f in out)
    if p.gpu_resource and not pinned:
        out += _gpu_findings(ctx, p, usable, ref)
        out += _gpu_fit_advisories(ctx, p, feasible, ref)
    if not pinned:
        out += _cpu_memory_findings(p, usable, ref)
    if last:
        out = _attach_event(out, last)
    return out, p


def _fits_somewhere(ctx: PendingContext, p: Placement, fitting: list[NodeFit],
                    last: tuple[Obj, SchedulingMessage] | None, ref: ObjectRef) -> list[Finding]:
    """A node fits right now: either the scheduler has not looked yet, or its event is stale."""
    names = ", ".join(f.node for f in fitting[:5])
    evidence = [f"fits now on: {names}" + (f" and {len(fitting) - 5} more"
                                           if len(fitting) > 5 else "")]
    summary = "The pod fits on a node now; the scheduler has not placed it yet."
    if last:
        ev, msg = last
        evidence.append(f"last FailedScheduling ({_when(ev)}): {ev.get('message', '')}")
        named = "; ".join(dict.fromkeys(
            f"{r.text} ({counted(r.count, 'node')})" if r.count else r.text for r in msg.reasons)
        ) or "a failure"
        summary = (f"The scheduler reported {named} at {_when(ev)}; the current state shows "
                   f"no such blocker: the pod fits on {names}.")
        # Not "all clear": the scheduler saw something this state does not show.
        ctx.details["scheduler_disagrees"] = True
    out = [Finding(
        "PENDING_NO_EVENTS", summary,
        (ref,), tuple(evidence),
        Fix("Wait for the scheduler's next attempt (backoff up to 5 min), or read its log "
            "(on a managed control plane its pods are not listed).",
            (kubectl("logs", "-l", "component=kube-scheduler", "--tail=50",
                     namespace="kube-system"),)),
        conditions=frozenset({"fits-now"}),
    )]
    out += _gpu_fit_advisories(ctx, p, [f for f in fitting if f.node in p.gpu_nodes], ref)
    return out


def _when(ev: Obj) -> str:
    return str(ev.get("lastTimestamp") or ev.get("eventTime") or ev.get("firstTimestamp")
               or "unknown time")


def _attach_event(findings: list[Finding], last: tuple[Obj, SchedulingMessage]) -> list[Finding]:
    """The scheduler's own words go with the first problem as proof (with each of its
    per-node twins, so that the finisher, grouping them, says it once for all)."""
    ev, _ = last
    msg = f"FailedScheduling ({_when(ev)}): {ev.get('message', '')}"
    first = next((f for f in findings if f.severity.is_problem), None)
    if first is None:
        return findings
    return [replace(f, evidence=(*f.evidence, msg))
            if f is first or (f.code == first.code and f.severity == first.severity
                              and len([o for o in f.objects if o.kind == "Node"]) == 1)
            else f for f in findings]


def _targeting_findings(ctx: PendingContext, pool: list[NodeFit],
                        ref: ObjectRef) -> list[Finding]:
    """Narrow the nodes filter by filter, in the scheduler's order. The filter that
    removes the last candidates is the cause; a later filter is never blamed for nodes an
    earlier one already excluded. A filter that leaves candidates is still reported when
    the nodes it excluded have the GPUs free (except the pod's own selector: that is
    intent, not a cause)."""
    out = []
    survivors = pool
    for flt in TARGETING:
        items = [(f, r) for f in survivors for r in _targeting_rejections(f) if r.filter == flt]
        if not items:
            continue
        rejected = {f.node for f, _ in items}
        # One rejection per node is enough evidence.
        items = list({f.node: (f, r) for f, r in reversed(items)}.values())[::-1]
        survivors = [f for f in survivors if f.node not in rejected]
        would_fit = [f for f, _ in items if not _lifecycle(f) and not _resource_rejections(f)
                     and not [r for r in _targeting_rejections(f) if r.filter != flt]]
        if survivors and (not would_fit or flt in ("NodeAffinity", "NodeName")):
            continue
        if flt == "NodeAffinity" and all(r.label == GPU_MEMORY_LABEL for _, r in items):
            out.append(_memory_selector_finding(items, ref))
            continue
        # A bound volume leaves the pod no choice; other filters leave it the survivors.
        others = frozenset({OTHERS_USABLE} if survivors and flt != "VolumeNodeAffinity"
                           else ())
        out.append(_targeting_finding(ctx, flt, items, others, ref, would_fit))
    return out


def _memory_selector_finding(items: list[tuple[NodeFit, Rejection]], ref: ObjectRef) -> Finding:
    return Finding(
        "GPU_MEMORY_TOO_SMALL",
        f"The pod needs more GPU memory than any of the {counted(len(items), 'GPU node')} has.",
        (ref, *(ObjectRef("Node", f.node) for f, _ in items[:5])),
        tuple(f"node {f.node}: {r.reason}" for f, r in items[:6]),
        Fix("Add nodes with bigger GPUs (the labels show what exists), or shrink the model to "
            "fit (quantisation, tensor parallelism over more GPUs).",
            (kubectl("get", "nodes", "-L", "nvidia.com/gpu.memory,nvidia.com/gpu.product"),)),
    )


def _targeting_finding(ctx: PendingContext, flt: str, items: list[tuple[NodeFit, Rejection]],
                       others: frozenset[str], ref: ObjectRef, would_fit: list[NodeFit]
                       ) -> Finding:
    code = TARGETING_CODES[flt]
    nodes = [f.node for f, _ in items]
    objs = (ref, *(ObjectRef("Node", n) for n in nodes[:5]))
    evidence = tuple(f"node {f.node}: {r.reason}" for f, r in items[:6])
    if len(items) > 6:
        evidence += (f"... and {len(items) - 6} more nodes",)
    extra = f" ({len(would_fit)} of them have the GPUs free)" if would_fit else ""
    if code == "TAINT_NOT_TOLERATED":
        taints = _distinct_taints(r for _, r in items)
        shown = ", ".join(_taint_text(t) for t in taints)
        tols = [_toleration(t) for t in taints]
        fix = Fix(f"Let {ctx.spec_owner.kind.lower()} {ctx.spec_owner.name} tolerate the "
                  "taint (the patch).", (ctx.add_to_spec("tolerations", tols),),
                  ctx.pod_patch(tols, "tolerations"),
                  ("https://kubernetes.io/docs/concepts/scheduling-eviction/"
                   "taint-and-toleration/",))
        carry = "carries" if len(nodes) == 1 else "carry"
        return Finding(code, f"{counted(len(nodes), 'GPU node')} {carry} taint {shown} that "
                       f"the pod does not tolerate{extra}.", objs, evidence, fix, conditions=others)
    if code == "NODE_SELECTOR_MISMATCH":
        missing = _missing_labels(ctx, [f.node for f, _ in items], items)
        summary = (f"The pod's node selector/affinity matches none of the "
                   f"{counted(len(nodes), 'GPU node')}{extra}"
                   + (f"; no GPU node has {missing[0]}." if missing else "."))
        return Finding(code, summary, objs, (*[f"no GPU node has {m}"
                                               for m in missing[:3]], *evidence),
                       Fix("Fix the selector to a label the GPU nodes carry, or label the "
                           "nodes; their labels:",
                           (kubectl("get", "nodes", "-L", ",".join(_selector_keys(ctx, items))),)),
                       conditions=others)
    if code == "POD_AFFINITY_MISMATCH":
        return Finding(code, f"Inter-pod affinity/anti-affinity rules exclude "
                       f"{counted(len(nodes), 'GPU node')}{extra}.", objs, evidence,
                       Fix("Relax spec.affinity.podAffinity/podAntiAffinity (use preferred "
                           "rules, or a wider topologyKey), or move the pods it conflicts "
                           "with."),
                       conditions=others)
    return Finding(code, f"A bound volume pins the pod away from "
                   f"{counted(len(nodes), 'GPU node')}{extra}.", objs, evidence,
                   Fix("Use a StorageClass with volumeBindingMode: WaitForFirstConsumer, or "
                       "recreate the PVC in the GPU nodes' zone."))


def _distinct_taints(rs: Iterable[Rejection]) -> list[dict[str, str]]:
    seen: dict[tuple[str, str, str], dict[str, str]] = {}
    for r in rs:
        if r.taint:
            t = {k: str(v) for k, v in r.taint.items() if v is not None}
            seen.setdefault((t.get("key", ""), t.get("value", ""), t.get("effect", "")), t)
    return list(seen.values())


def _taint_text(t: dict[str, str]) -> str:
    v = f"={t['value']}" if t.get("value") else ""
    return f"{t.get('key', '')}{v}:{t.get('effect', '')}"


def _toleration(t: dict[str, str]) -> dict[str, str]:
    tol = ({"key": t.get("key", ""), "operator": "Equal", "value": t["value"]}
           if t.get("value") else {"key": t.get("key", ""), "operator": "Exists"})
    if t.get("effect"):
        tol["effect"] = t["effect"]
    return tol


def _selector_keys(ctx: PendingContext, items: list[tuple[NodeFit, Rejection]]) -> list[str]:
    """The label keys the pod selects on, to list beside the nodes."""
    keys = list((ctx.pod.get("spec") or {}).get("nodeSelector") or {})
    keys += sorted({r.label for _, r in items if r.label and r.label not in keys})
    return keys or ["nvidia.com/gpu.product", "nvidia.com/gpu.memory"]


def _missing_labels(ctx: PendingContext, nodes: list[str],
                    items: list[tuple[NodeFit, Rejection]]) -> list[str]:
    """Selector labels (key=value) that not one GPU node carries."""
    sel = ctx.pod.get("spec", {}).get("nodeSelector") or {}
    out = []
    node_objs = [n for n in ctx.nodes if name_of(n) in set(nodes)]
    for k, v in sel.items():
        if not any(labels(n).get(k) == v for n in node_objs):
            have = sorted({labels(n)[k] for n in node_objs if k in labels(n)})
            out.append(f"{k}={v}" + (f" (they have: {', '.join(have[:4])})" if have else
                                     " (no GPU node has the key)"))
    if not out:
        keys = sorted({r.label for _, r in items if r.label})
        out = [f"a value of {k} that the pod's node affinity accepts" for k in keys]
    return out


def _leaving(ctx: PendingContext, node: str, res: str) -> float:
    """GPUs held on ``node`` by pods being deleted: on a node that is not Ready they stay
    Terminating (no kubelet confirms the deletion), and free their GPUs once it is back."""
    return sum(pod_requests(q).get(res, 0.0) for q in ctx.pods_by_node.get(node, ())
               if (q.get("metadata") or {}).get("deletionTimestamp"))


def _lifecycle_findings(ctx: PendingContext, p: Placement, feasible: list[NodeFit],
                        usable: list[NodeFit], ref: ObjectRef) -> list[Finding]:
    out = []
    res = p.gpu_resource
    for flt, code in LIFECYCLE.items():
        hit = [(f, r) for f in feasible for r in _lifecycle(f) if r.filter == flt]
        if not hit:
            continue
        # Relevant when nothing usable is left, or the blocked nodes have the GPUs free
        # (counting the GPUs of the pods that leave them once they are back).
        helpful = [f for f, _ in hit if res is None or f.free.get(res, 0.0)
                   + _leaving(ctx, f.node, res) >= p.gpu_need]
        if usable and not helpful:
            continue
        nodes = sorted({f.node for f, _ in hit})
        what = {"NODE_UNSCHEDULABLE": "cordoned", "NODE_NOT_READY": "NotReady",
                "NODE_PRESSURE": "under resource pressure"}[code]
        fix = _lifecycle_fix(code, nodes[0])
        leaving = {f.node: _leaving(ctx, f.node, res) for f in helpful} if res else {}
        evidence = [f"node {f.node}: {r.reason}" for f, r in hit[:6]]
        evidence += [f"node {n}: {g:g} {res} held by pods being deleted (Terminating), free "
                     "once the node is back" for n, g in leaving.items() if g]
        out.append(Finding(
            code, f"{counted(len(nodes), 'GPU node')} the pod could use "
                  f"{'is' if len(nodes) == 1 else 'are'} {what}"
            + (f"; {len(helpful)} of them have the GPUs free." if helpful and res else "."),
            (ref, *(ObjectRef("Node", n) for n in nodes[:5])), tuple(evidence), fix,
            conditions=frozenset({OTHERS_USABLE} if usable else ()),
        ))
    return out


def _lifecycle_fix(code: str, node: str) -> Fix:
    if code == "NODE_NOT_READY":
        return not_ready_fix(node, gone=True)
    if code == "NODE_UNSCHEDULABLE":
        return Fix("Uncordon it once its maintenance is over; its annotations may say who "
                   "cordoned it.", (kubectl("get", "node", node, "-o",
                                            "jsonpath={.metadata.annotations}"),
                                    kubectl("uncordon", node)))
    return Fix("Free disk or memory on the node, or evict the pods using it.",
               (shell_line("kubectl", "describe", "node", node) + " | grep -A8 Conditions",))


def _gpu_findings(ctx: PendingContext, p: Placement, usable: list[NodeFit],
                  ref: ObjectRef) -> list[Finding]:
    res, need = p.gpu_resource or GPU_RESOURCE, p.gpu_need
    if any(_gpu_fits(f, res, need) for f in usable):
        return []
    out: list[Finding] = []
    # MIG strategy: nodes that split their GPUs into MIG profiles advertise no nvidia.com/gpu.
    if res == GPU_RESOURCE:
        mixed = [f for f in usable if labels(p.nodes_by_name[f.node]).get(MIG_STRATEGY_LABEL)
                 == "mixed" and any(MIG_RESOURCE_RE.match(k) and v > 0
                                    for k, v in f.allocatable.items())]
        if mixed and len(mixed) == len(usable):
            profiles = sorted({k for f in mixed for k, v in f.allocatable.items()
                               if MIG_RESOURCE_RE.match(k) and v > 0})
            return [Finding(
                "MIG_STRATEGY_MISMATCH",
                "The pod asks for nvidia.com/gpu, but the GPU nodes it can use run MIG with "
                "the mixed strategy and offer only MIG profiles.",
                (ref, *(ObjectRef("Node", f.node) for f in mixed[:5])),
                tuple(f"node {f.node}: {MIG_STRATEGY_LABEL}=mixed, offers "
                      + ", ".join(f"{k}={f.allocatable[k]:g}" for k in profiles
                                  if f.allocatable.get(k)) for f in mixed[:5]),
                Fix(f"Request a MIG profile instead: {', '.join(profiles)}.", patch=(
                    ctx.swap_resource(GPU_RESOURCE, profiles[0], int(need))
                    if profiles and float(need).is_integer() else None)),
            )]
    # The discovery chain of the nodes that should offer the GPUs: a node advertising
    # fewer GPUs than it has is a root cause, not "insufficient".
    short = [f for f in usable if _advertises_less(p, f, res)]
    if MIG_RESOURCE_RE.match(res):
        # A MIG profile appears only once mig-manager applied the node's config: ask the
        # chain about nodes whose config failed or is still pending.
        short += [f for f in usable if labels(p.nodes_by_name[f.node]).get(
            MIG_CONFIG_STATE_LABEL) in MIG_NOT_APPLIED and f.allocatable.get(res, 0.0) < need]
    if short:
        chain = check_chain(ctx.reader, [p.nodes_by_name[f.node] for f in short])
        out += [c for c in chain.findings if c.severity.is_problem]
    max_size = max((physical_gpus(p, n) for n in p.gpu_nodes),
                   default=0.0)
    if max_size == 0:
        return out  # nobody offers it: UNKNOWN_GPU_RESOURCE or the chain findings say why
    if need > max_size:
        out.append(Finding(
            "REQUEST_EXCEEDS_NODE_SIZE",
            f"The pod asks {need:g} {res} but the largest node has {max_size:g}.",
            (ref,), (f"requested {res}: {need:g}", f"largest node: {max_size:g} {res}"),
            Fix(f"Ask for at most {max_size:g} GPUs per pod and spread the job over several "
                "pods (torchrun / MPIJob / JobSet), or add bigger nodes."),
        ))
        return out
    # Would the pod fit if every usable node advertised all its GPUs?
    if short and any(physical_gpus(p, f.node) - _used(f, res) >= need
                     for f in short):
        return out
    total_free = sum(f.free.get(res, 0.0) for f in usable)
    candidates = sorted(usable, key=lambda f: -f.free.get(res, 0.0))
    table = tuple(f"node {f.node}: {f.free.get(res, 0.0):g} free of "
                  f"{f.allocatable.get(res, 0.0):g} allocatable; held by {_holders_text(f)}"
                  for f in candidates[:8])
    if usable and total_free >= need:
        out.append(Finding(
            "GPU_FRAGMENTATION",
            f"{total_free:g} {res} are free across {counted(len(usable), 'node')}, but no "
            f"single node has the {need:g} the pod needs.",
            (ref, *(ObjectRef("Node", f.node) for f in candidates[:5])), table,
            _least_disruptive(usable, res, need).then(Fix(
                "Or enable bin-packing (NodeResourcesFit MostAllocated scoring) so that jobs "
                "stop spreading. A smaller request fits only if the workload is changed to use "
                "fewer GPUs too (see Fits if).")),
        ))
    elif usable:
        out.append(Finding(
            "INSUFFICIENT_GPU",
            f"Other pods hold the GPUs: {total_free:g} {res} free on the "
            f"{counted(len(usable), 'node')} the pod can use; it needs {need:g}.",
            (ref, *(ObjectRef("Node", f.node) for f in candidates[:5])), table,
            Fix("Wait for the holders to finish, give the pod a higher PriorityClass to "
                "preempt, or add GPU nodes. A smaller request fits only if the workload is "
                "changed to use fewer GPUs too (see Fits if)."),
        ))
    return out


def _least_disruptive(usable: list[NodeFit], res: str, need: float) -> Fix:
    """The node where the fewest, then smallest, GPU holders must move, and which pods."""
    best: tuple[tuple[int, float, str], NodeFit, list[tuple[str, float]]] | None = None
    for f in usable:
        pick = fewest_holders(f.holders, need - f.free.get(res, 0.0))
        if pick:
            key = (len(pick), sum(g for _, g in pick), f.node)
            if best is None or key < best[0]:
                best = (key, f, pick)
    if best is None:
        return Fix()
    _, f, pick = best
    pods = ", ".join(f"{r} ({counted(g, 'GPU')})" for r, g in pick)
    return Fix(
        f"Least disruptive: move {counted(len(pick), 'pod')} off {f.node}: {pods}; it then has "
        f"{f.free.get(res, 0.0) + sum(g for _, g in pick):g} free. Cordon it first so that "
        "they are recreated elsewhere, and uncordon it once they are.",
        (kubectl("cordon", f.node),
         *(kubectl("delete", "pod", r.split("/", 1)[1], namespace=r.split("/", 1)[0])
           for r, _ in pick),
         kubectl("uncordon", f.node)))


def _advertises_less(p: Placement, fit: NodeFit, res: str) -> bool:
    """The node offers fewer GPUs than it physically has (or none at all)."""
    alloc = fit.allocatable.get(res, 0.0)
    if res in VOLCANO_GPU_RESOURCES:  # vGPU slots, not cards: only "none" is telling
        return alloc == 0
    return res == GPU_RESOURCE and (alloc == 0 or alloc < physical_gpus(p, fit.node))


def _physical(node: Obj, fit: NodeFit, res: str) -> float:
    """What the node has of ``res``: the most of allocatable, capacity and, for
    nvidia.com/gpu, the GPU ledger's count (handlers/ledger.py) in the resource's units."""
    cap = parse_quantity((node.get("status", {}).get("capacity") or {}).get(res))
    if res != GPU_RESOURCE:
        return max(fit.allocatable.get(res, 0.0), cap)
    led = ledger.of(node)
    has = 0 if led.at_least else led.physical  # "at least one" sizes no node
    return max(fit.allocatable.get(res, 0.0), cap, float(has * led.replicas))


def physical_gpus(p: Placement, node: str) -> float:
    """The GPUs ``node`` has of the pod's GPU resource, advertised or not (worked out once
    per node: the placement checks and fits-if ask it of every GPU node)."""
    got = p.physical.get(node)
    if got is None:
        got = p.physical[node] = _physical(p.nodes_by_name[node], p.fit(node),
                                           p.gpu_resource or GPU_RESOURCE)
    return got


def _used(fit: NodeFit, res: str) -> float:
    return fit.requested.get(res, 0.0)


def _cpu_memory_findings(p: Placement, usable: list[NodeFit], ref: ObjectRef) -> list[Finding]:
    res = p.gpu_resource
    cands = [f for f in usable if (res is None or _gpu_fits(f, res, p.gpu_need))]
    hit = []
    for f in cands:
        other = [r for r in _resource_rejections(f) if r.resource != res]
        if other:
            hit.append((f, other))
    if not hit or len(hit) < len(cands):
        return []
    return [Finding(
        "INSUFFICIENT_CPU_MEMORY", f"{counted(len(hit), 'node')} "
        f"{'has' if len(hit) == 1 else 'have'} the GPUs free but not the "
        + "/".join(sorted({r.resource or "?" for _, rs in hit for r in rs}))
        + " the pod also asks.",
        (ref, *(ObjectRef("Node", f.node) for f, _ in hit[:5])),
        tuple(f"node {f.node}: {r.reason}" for f, rs in hit[:6] for r in rs),
        Fix("Lower the pod's cpu/memory requests to what a GPU node can give (the finding's "
            "evidence gives each node's), or move CPU-only pods off the GPU nodes (taint them "
            "nvidia.com/gpu=present:NoSchedule)."),
    )]


def _gpu_fit_advisories(ctx: PendingContext, p: Placement, nodes: list[NodeFit],
                        ref: ObjectRef) -> list[Finding]:
    """GPU_MEMORY_TOO_SMALL, WRONG_GPU_TYPE, MULTI_GPU_TOPOLOGY over the nodes it may land on."""
    if not p.gpu_resource or not nodes:
        return []
    objs = [p.nodes_by_name[f.node] for f in nodes]
    return [*_memory_too_small(ctx, objs, ref), *_wrong_type(ctx, objs, ref),
            *_topology(ctx, p, objs, ref)]


def _memory_need(pod: Obj) -> tuple[int | None, str]:
    ann = pod.get("metadata", {}).get("annotations") or {}
    if "gpubot.io/gpu-memory-mib" in ann:
        try:
            return int(ann["gpubot.io/gpu-memory-mib"]), \
                f"annotation gpubot.io/gpu-memory-mib={ann['gpubot.io/gpu-memory-mib']}"
        except ValueError:
            pass
    aff = (pod.get("spec", {}).get("affinity") or {}).get("nodeAffinity") or {}
    req = aff.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    for term in req.get("nodeSelectorTerms") or []:
        for e in term.get("matchExpressions") or []:
            if e.get("key") == "nvidia.com/gpu.memory" and e.get("operator") == "Gt":
                try:
                    v = int((e.get("values") or ["0"])[0])
                    return v + 1, f"node affinity nvidia.com/gpu.memory Gt {v}"
                except ValueError:
                    pass
    return None, ""


def _memory_too_small(ctx: PendingContext, nodes: list[Obj], ref: ObjectRef) -> list[Finding]:
    need, why = _memory_need(ctx.pod)
    evidence: list[str] = []
    if need is not None:
        known = [(name_of(n), m) for n in nodes if (m := gpu_memory_mib(n)) is not None]
        small = [(n, m) for n, m in known if m < need]
        if small and len(small) == len(known):
            evidence = [why, *(f"node {n}: nvidia.com/gpu.memory={m}" for n, m in small[:6])]
    if not evidence and ctx.pod_exists:
        evidence = _oom_proof(ctx)
    if not evidence:
        return []
    return [Finding(
        "GPU_MEMORY_TOO_SMALL",
        "The pod needs more GPU memory than the GPUs it can land on have.",
        (ref,), tuple(evidence),
        Fix("Target bigger GPUs (the patch: GFD's nvidia.com/gpu.memory, in MiB).",
            patch=ctx.pod_patch({"nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{
                    "matchExpressions": [{"key": "nvidia.com/gpu.memory", "operator": "Gt",
                                          "values": [str((need or 40000) - 1)]}]}]}}},
                "affinity")),
        conditions=frozenset({"schedulable"}),
    )]


def _oom_proof(ctx: PendingContext) -> list[str]:
    out = []
    for cs in ctx.pod.get("status", {}).get("containerStatuses") or []:
        for st in (cs.get("state") or {}, cs.get("lastState") or {}):
            term = st.get("terminated") or {}
            if term.get("reason") == "OOMKilled" and ctx.pod.get("spec", {}).get("nodeName"):
                out.append(f"container {cs.get('name')} OOMKilled on "
                           f"{ctx.pod['spec']['nodeName']}")
    text = ctx.reader.logs(ctx.namespace, ctx.pod_name) or ""
    for line in text.splitlines():
        if CUDA_OOM_RE.search(line):
            out.append(f"log: {line.strip()[:300]}")
            break
    return out


def _family(node: Obj) -> str | None:
    fam = labels(node).get("nvidia.com/gpu.family", "").lower()
    return fam if fam in GPU_FAMILIES else None


def _targets_gpu_type(pod: Obj) -> bool:
    spec = pod.get("spec", {})
    if any(k in TARGETING_LABELS for k in (spec.get("nodeSelector") or {})):
        return True
    aff = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    req = aff.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    return any(e.get("key") in TARGETING_LABELS for t in req.get("nodeSelectorTerms") or []
               for e in t.get("matchExpressions") or [])


def _wrong_type(ctx: PendingContext, nodes: list[Obj], ref: ObjectRef) -> list[Finding]:
    if _targets_gpu_type(ctx.pod):
        return []
    fams = {name_of(n): f for n in nodes if (f := _family(n))}
    if not fams:
        return []
    ann = ctx.pod.get("metadata", {}).get("annotations") or {}
    wanted = str(ann.get("gpubot.io/gpu-family", "")).lower()
    if wanted in GPU_FAMILIES:
        weaker = {n: f for n, f in fams.items()
                  if GPU_FAMILIES.index(f) < GPU_FAMILIES.index(wanted)}
        if not weaker:
            return []
        why = f"annotation gpubot.io/gpu-family={wanted}"
    elif len(set(fams.values())) > 1:
        best = max(fams.values(), key=GPU_FAMILIES.index)
        weaker = {n: f for n, f in fams.items() if f != best}
        wanted, why = best, "the pod does not target a GPU type and the nodes mix families"
    else:
        return []
    return [Finding(
        "WRONG_GPU_TYPE",
        f"The pod can land on {counted(len(weaker), 'node')} with an older GPU family than "
        f"{wanted}.",
        (ref, *(ObjectRef("Node", n) for n in list(weaker)[:5])),
        (why, *(f"node {n}: nvidia.com/gpu.family={f}, "
                f"{gpu_product(ctx.nodes_by_name[n])}"
                for n, f in list(weaker.items())[:5])),
        Fix("Pin the GPU type with GFD's labels.",
            patch=ctx.pod_patch({"nvidia.com/gpu.family": wanted}, "nodeSelector")),
    )]


def _topology(ctx: PendingContext, p: Placement, nodes: list[Obj],
              ref: ObjectRef) -> list[Finding]:
    if p.gpu_need < 2:
        return []
    products = {name_of(n): gpu_product(n) for n in nodes}
    pcie = {n: prod for n, prod in products.items() if PCIE_ONLY_RE.search(prod)}
    if not pcie or len(pcie) < len(products):
        return []
    return [Finding(
        "MULTI_GPU_TOPOLOGY",
        f"The pod asks {p.gpu_need:g} GPUs, but every node it can use links its GPUs over "
        "PCIe only (no NVLink): multi-GPU training will be slower.",
        (ref,), tuple(f"node {n}: nvidia.com/gpu.product={prod}"
                      for n, prod in list(pcie.items())[:5]),
        Fix("For multi-GPU training target NVLink/SXM nodes (nodeSelector on "
            "nvidia.com/gpu.product, e.g. NVIDIA-A100-SXM4-80GB), or run one GPU per pod."),
    )]


def resource_summary(req: dict[str, float]) -> str:
    return ", ".join(f"{k}={fmt_quantity(v, k)}" for k, v in sorted(req.items()))
