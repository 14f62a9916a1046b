"""Fits elsewhere: whether a pending GPU pod would schedule now on another cluster of the fleet.

The pod is taken as it would be created there (its spec, labels and annotations; no uid, no
node, no status, a name no real pod has) and checked the way that cluster's API server and
scheduler would take it, first refusal wins:

- its namespace exists there (and is not Terminating), and so do its PriorityClass,
  RuntimeClass and the PersistentVolumeClaims it mounts (else the API server refuses it,
  or the scheduler never binds it);
- that namespace's LimitRange and ResourceQuota there admit it
  (``handlers.pending.quota``'s checks, as for a pod not created yet), the Kueue
  LocalQueue its workload names exists there, and so does the scheduler it names
  (``handlers.pending.queueing``);
- the scheduler's filters pass on a node there (``handlers.pending.placement``, the same
  filters as at home): so a pod pinned to a GPU model (``nvidia.com/gpu.product``, the
  family, an accelerator label) fits only where that model exists, and that is said.

Where it fits, the answer names the nodes (most free GPUs first) and the command that runs
the same workload there: its manifest as last applied with kubectl, read from the home
cluster and applied in the other (``kubectl apply view-last-applied ... | kubectl apply``).
A copy, not a move: nothing is run by gpubot, and the workload at home stays until deleted.

A detail of the why-pending diagnosis (``details["fits_elsewhere"]``), not a finding: it
is no cause of the pod being stuck. Each cluster is read through its own Reader (its watch
cache); the caller bounds the time (a cluster it could not check is said as such).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from handlers import batchjobs
from handlers.gpu import gpu_product, name_of
from handlers.kube.commands import line
from handlers.kube.quantity import fmt_quantity
from handlers.kueue import QUEUE_LABEL, queue_name
from handlers.model import Diagnosis
from handlers.pending.context import PendingContext, main_gpu_request
from handlers.pending.placement import TARGETING_LABELS, run_placement
from handlers.pending.queueing import check_scheduler
from handlers.pending.quota import check_limitrange_violation, check_quota_exceeded
from handlers.scheduler.filters import NodeFit
from handlers.target import Target
from handlers.view import Obj, Reader
from handlers.why_pending import template_pod
from handlers.words import counted

DETAIL = "fits_elsewhere"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
MAX_NODES = 5  # nodes named per cluster where it fits
# Owners whose manifest is the workload to run elsewhere, walked up from the pod
# (a ReplicaSet's Deployment, a Job's CronJob or JobSet, ...).
_OWNERS = ("ReplicaSet", "Deployment", "StatefulSet", "Job", "CronJob", *batchjobs.KINDS)
# The pod as created elsewhere: a name no pod has (the filters leave the target out of its
# node's pods by namespace/name; the pod at home is not the one there).
_ELSEWHERE = "<elsewhere>"

Verdict = Literal["fits", "does not fit", "not checked"]


@dataclass(frozen=True)
class Subject:
    """The pending GPU pod at home, and the workload that runs it."""

    pod: Obj  # as it would be created elsewhere (see ``_as_new``)
    namespace: str
    gpu_resource: str
    gpus: float
    workload: Obj  # the top owner whose manifest runs it (the pod itself when it has none)
    home: str  # the home cluster's name
    home_context: str | None  # its kubeconfig context, when the config names one

    @property
    def workload_ref(self) -> str:
        """``deployment/llm`` as kubectl takes it."""
        return f"{str(self.workload.get('kind') or 'Pod').lower()}/{name_of(self.workload)}"


@dataclass(frozen=True)
class NodeRoom:
    node: str
    gpu_free: float
    product: str


@dataclass(frozen=True)
class ClusterFit:
    """One other cluster's answer."""

    cluster: str
    verdict: Verdict
    nodes: tuple[NodeRoom, ...] = ()  # where it passes every filter (fits)
    more_nodes: int = 0  # fitting nodes beyond those named
    reasons: tuple[str, ...] = ()  # why not (does not fit), or why not checked
    command: str | None = None  # how to run it there (fits)
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "verdict": self.verdict,
                "nodes": [{"node": n.node, "gpu_free": _number(n.gpu_free),
                           "product": n.product} for n in self.nodes],
                "more_nodes": self.more_nodes, "reasons": list(self.reasons),
                "command": self.command, "notes": list(self.notes)}


def _number(v: float) -> float | int:
    return int(v) if float(v).is_integer() else v


# ------------------------------------------------------------------------------ the subject


def subject(reader: Reader, target: Target, diag: Diagnosis, *, home: str,
            home_context: str | None) -> Subject | None:
    """The pod a why-pending diagnosis was about, when it is a pending GPU pod that no
    node has taken; None otherwise (another command, a pod bound or running, no GPU asked,
    a DaemonSet's pod, which is for its node)."""
    if diag.command != "why-pending" or "pod" not in diag.details:
        return None
    ns = target.namespace
    name = diag.details.get("pod")
    if name:
        found = reader.get("Pod", str(name), ns)
        if found is None:
            return None
        pod: Obj = found
        start: Obj = {**found, "kind": "Pod"}
    else:  # no pod yet: the controller's template, as why-pending read it
        controller = reader.get(target.kind, target.name, ns)
        if controller is None:
            return None
        start = {**controller, "kind": target.kind}
        pod = template_pod(start, ns)
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    if spec.get("nodeName") or status.get("phase", "Pending") != "Pending":
        return None
    res, gpus = main_gpu_request(pod)
    if res is None:
        return None
    workload = _top_owner(reader, start, ns)
    if workload is None:
        return None
    return Subject(_as_new(pod, ns), ns, res, gpus, workload, home, home_context)


def _top_owner(reader: Reader, obj: Obj, ns: str) -> Obj | None:
    """The outermost owner gpubot can read (None for a DaemonSet's pod)."""
    for _ in range(4):  # Pod -> ReplicaSet -> Deployment; Pod -> Job -> CronJob/JobSet
        refs = (obj.get("metadata") or {}).get("ownerReferences") or []
        ref = next((r for r in refs if r.get("controller")), refs[0] if refs else None)
        if ref is None:
            break
        kind = str(ref.get("kind") or "")
        if kind == "DaemonSet":
            return None
        if kind not in _OWNERS:
            break
        owner = reader.get(kind, str(ref.get("name") or ""), ns)
        if owner is None:
            break
        obj = {**owner, "kind": kind}
    return obj


def _as_new(pod: Obj, ns: str) -> dict[str, Any]:
    """The pod as the API server elsewhere would get it from its workload."""
    meta = pod.get("metadata") or {}
    spec = copy.deepcopy(dict(pod.get("spec") or {}))
    spec.pop("nodeName", None)
    return {"kind": "Pod", "apiVersion": "v1", "metadata": {
        "name": f"{meta.get('name') or 'pod'}-{_ELSEWHERE}", "namespace": ns,
        "labels": dict(meta.get("labels") or {}),
        "annotations": dict(meta.get("annotations") or {})},
        "spec": spec, "status": {"phase": "Pending"}}


# ------------------------------------------------------------------------------ one cluster


def check_cluster(s: Subject, cluster: str, reader: Reader,
                  context: str | None) -> ClusterFit:
    """Whether ``s`` would be admitted and scheduled now on ``cluster`` (read by ``reader``);
    ``context``: its kubeconfig context, for the command."""
    ns = s.namespace
    space = reader.get("Namespace", ns)
    if space is None:
        if not reader.readable("Namespace"):
            return ClusterFit(cluster, "not checked", reasons=(
                f"could not read namespace {ns}: {_last(reader)}",))
        return ClusterFit(cluster, "does not fit", reasons=(
            f"namespace {ns} does not exist there: the pod cannot be created",))
    if (space.get("status") or {}).get("phase") == "Terminating":
        return ClusterFit(cluster, "does not fit", reasons=(
            f"namespace {ns} is Terminating there: no pod can be created in it",))
    ctx = PendingContext(reader, s.pod, False, ns)
    queue, queue_note = _queue(s, reader)
    reasons = [*_missing(s.pod, reader, ns), *_admission(ctx), *queue,
               *(f.summary for f in check_scheduler(ctx))]
    if reasons:
        return ClusterFit(cluster, "does not fit", reasons=tuple(reasons))
    fitting, why_not = _placed(ctx, s)
    if not fitting:
        return ClusterFit(cluster, "does not fit", reasons=why_not)
    rooms = sorted((NodeRoom(f.node, f.free.get(s.gpu_resource, 0.0),
                             gpu_product(ctx.nodes_by_name[f.node])) for f in fitting),
                   key=lambda r: (-r.gpu_free, r.node))
    command, notes = _run_there(s, cluster, reader, context)
    notes += queue_note
    # What could not be read there (a kind gpubot may not list): its check was left out.
    notes += tuple(f"not checked there: {u}" for u in reader.unchecked[:3])
    return ClusterFit(cluster, "fits", tuple(rooms[:MAX_NODES]),
                      max(len(rooms) - MAX_NODES, 0), command=command, notes=notes)


def not_checked(cluster: str, why: str) -> ClusterFit:
    return ClusterFit(cluster, "not checked", reasons=(why,))


def _last(reader: Reader) -> str:
    return reader.unchecked[-1] if reader.unchecked else "not readable"


def _missing(pod: Obj, reader: Reader, ns: str) -> Iterable[str]:
    """What the pod names that the cluster lacks: the API server refuses a pod whose
    PriorityClass or RuntimeClass does not exist; the scheduler never binds one whose
    claim does not."""
    spec = pod.get("spec") or {}
    pc = spec.get("priorityClassName")
    if pc and reader.get("PriorityClass", str(pc)) is None and reader.readable("PriorityClass"):
        yield f"PriorityClass {pc} does not exist there: the API server refuses the pod"
    rc = spec.get("runtimeClassName")
    if rc and reader.get("RuntimeClass", str(rc)) is None and reader.readable("RuntimeClass"):
        yield f"RuntimeClass {rc} does not exist there: the API server refuses the pod"
    for v in spec.get("volumes") or []:
        claim = (v.get("persistentVolumeClaim") or {}).get("claimName")
        if claim and reader.get("PersistentVolumeClaim", str(claim), ns) is None \
                and reader.readable("PersistentVolumeClaim"):
            yield (f"PersistentVolumeClaim {claim} does not exist in {ns} there: the pod "
                   "would wait for it")


def _queue(s: Subject, reader: Reader) -> tuple[list[str], tuple[str, ...]]:
    """(why not, notes) for a workload that names a Kueue LocalQueue: one that does not
    exist there holds it; one that does admits it by its ClusterQueue's quota, which is
    not checked here."""
    name = queue_name(s.workload) or queue_name(s.pod)
    if not name:
        return [], ()
    if reader.get("LocalQueue", name, s.namespace) is not None:
        return [], (f"Kueue admits it there through LocalQueue {name}: its ClusterQueue's "
                    "quota is not checked",)
    if reader.readable("LocalQueue"):
        return [f"LocalQueue {name} (its {QUEUE_LABEL}) does not exist in {s.namespace} "
                "there: Kueue would hold it"], ()
    return [], (f"LocalQueues could not be read there: if Kueue runs there, LocalQueue "
                f"{name} must exist in {s.namespace}",)


def _admission(ctx: PendingContext) -> list[str]:
    """The namespace's LimitRange and ResourceQuota there, as for a pod not created yet."""
    lrs = ctx.reader.list("LimitRange", ctx.namespace)
    quotas = ctx.reader.list("ResourceQuota", ctx.namespace)
    found = [*check_limitrange_violation(ctx, lrs), *check_quota_exceeded(ctx, quotas)]
    return [f.summary for f in found]


def _placed(ctx: PendingContext, s: Subject) -> tuple[list[NodeFit], tuple[str, ...]]:
    """(GPU nodes it passes every filter on, why none when there are none)."""
    p = run_placement(ctx)
    fitting = [f for f in p.fits if f.fits and f.node in p.gpu_nodes]
    if fitting and ctx.pod_scope is not None:
        # As at home: "it fits" only once every pod's anti-affinity is read.
        ctx.read_every_pod()
        p = run_placement(ctx)
        fitting = [f for f in p.fits if f.fits and f.node in p.gpu_nodes]
    if fitting:
        return fitting, ()
    pool = [f for f in p.fits if f.node in p.gpu_nodes]
    res = s.gpu_resource
    if not pool or not any(f.allocatable.get(res) for f in pool):
        return [], (f"no node there offers {res}",)
    wanted = wanted_model(ctx.pod)
    if wanted and all("NodeAffinity" in f.filters for f in pool):
        models = sorted({gpu_product(ctx.nodes_by_name[f.node]) for f in pool})
        return [], (f"no node of the GPU model the pod asks ({'; '.join(wanted)}): its GPU "
                    f"nodes are {', '.join(models)}",)
    best = min(pool, key=lambda f: (len(f.rejections), -f.free.get(res, 0.0), f.node))
    lacks = "; ".join(f"{r.filter}: {r.reason}" for r in best.rejections[:2])
    free = sum(max(f.free.get(res, 0.0), 0.0) for f in pool if not f.filters - {
        "NodeResourcesFit"})
    return [], (f"no GPU node passes the scheduler's filters now ({counted(len(pool), 'GPU node')}"
                f", {fmt_quantity(free, res)} {res} free where the pod may go); closest "
                f"{best.node}: {lacks}",)


def wanted_model(pod: Obj) -> list[str]:
    """The GPU model labels the pod's nodeSelector and required node affinity pin."""
    spec = pod.get("spec") or {}
    out = [f"{k}={v}" for k, v in (spec.get("nodeSelector") or {}).items()
           if k in TARGETING_LABELS]
    aff = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution") or {}
    for term in aff.get("nodeSelectorTerms") or []:
        for e in term.get("matchExpressions") or []:
            if e.get("key") in TARGETING_LABELS:
                values = ", ".join(str(v) for v in e.get("values") or [])
                out.append(f"{e.get('key')} {e.get('operator')} ({values})" if values
                           else f"{e.get('key')} {e.get('operator')}")
    return list(dict.fromkeys(out))


def _run_there(s: Subject, cluster: str, reader: Reader,
               context: str | None) -> tuple[str, tuple[str, ...]]:
    """The command that runs the same workload on ``cluster``, and what to know about it."""
    there = ("--context", context or cluster)
    notes: list[str] = []
    if context is None:
        notes.append(f"no kubeconfig context is configured for cluster {cluster}: "
                     f"--context {cluster} assumes yours is named so")
    kind = str(s.workload.get("kind") or "Pod")
    annotations = (s.workload.get("metadata") or {}).get("annotations") or {}
    if LAST_APPLIED in annotations:
        home = ("--context", s.home_context or s.home)
        if s.home_context is None:
            notes.append(f"no kubeconfig context is configured for cluster {s.home}: "
                         f"--context {s.home} assumes yours is named so")
        command = (line("kubectl", *home, "-n", s.namespace, "apply", "view-last-applied",
                        s.workload_ref, "-o", "yaml")
                   + " | " + line("kubectl", *there, "-n", s.namespace, "apply", "-f", "-"))
    else:
        command = line("kubectl", *there, "-n", s.namespace, "apply", "-f", "MANIFEST")
        notes.append(f"MANIFEST: the manifest {s.workload_ref} was made from ({kind} "
                     f"{name_of(s.workload)} carries no kubectl last-applied configuration "
                     "to copy)")
    if kind != "Pod" and reader.get(kind, name_of(s.workload), s.namespace) is not None:
        notes.append(f"{s.workload_ref} exists in {s.namespace} on {cluster} already: "
                     "applying changes that one")
    notes.append(f"a copy: {s.workload_ref} stays on {s.home} until deleted there")
    return command, tuple(notes)


# ------------------------------------------------------------------------------ the answer


def attach(diag: Diagnosis, s: Subject, fits: Iterable[ClusterFit]) -> None:
    """The clusters' answers into the diagnosis, those where it fits first."""
    order = {"fits": 0, "does not fit": 1, "not checked": 2}
    ranked = sorted(fits, key=lambda f: order[f.verdict])
    diag.details[DETAIL] = {
        "home": s.home, "resource": s.gpu_resource, "gpus": _number(s.gpus),
        "workload": s.workload_ref, "clusters": [f.to_json() for f in ranked]}

