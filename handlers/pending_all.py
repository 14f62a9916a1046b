"""pending: every pending GPU workload in a namespace (or the cluster), with its root cause.

A *pending GPU workload* is one of:

- unbound ``Pending`` pods that request a GPU resource (any ``nvidia.com/`` resource, MIG
  profiles and shared GPUs included), grouped by their owning controller: a Deployment's
  twenty pending replicas are one row; a pod without an owner is a row of its own;
- controllers whose pods were never created: a Deployment, StatefulSet or Job whose pod
  template requests a GPU, that has fewer active pods than it wants, and whose
  ``FailedCreate`` events (on the ReplicaSet, StatefulSet or Job) say why;
- GPU Jobs that Kueue keeps suspended (label ``kueue.x-k8s.io/queue-name``): their pods are
  not created until the Workload is admitted, and no event says so on the Job.

Each row's root cause is the first problem finding of ``why_pending.run`` for one
representative pod (or the controller's template when no pod exists). Every diagnosis
shares the caller's ``Reader``, so each list (nodes, pods, quotas, ...) is read once.

``details["rows"]``: one dict per diagnosed workload, worst first (severity, then GPUs
asked, then age)::

    {workload, kind, name, namespace, pods_pending, pods_not_created, gpus_requested,
     resources, age, age_seconds, pod, queue, code, severity, cause, fix, drilldown}

``pods_pending`` counts the pods the workload is missing (unbound pending pods plus pods
its controller could not create; the latter also in ``pods_not_created``).
``gpus_requested`` adds up every GPU-like unit asked (whole GPUs, MIG slices, shared
replicas); ``resources`` splits it per resource.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from handlers import batchjobs, why_pending
from handlers.dra import gpu_devices_asked, uses_claims
from handlers.errors import GpubotError
from handlers.finish import finish
from handlers.gpu import is_gpu_resource, name_of, ns_of
from handlers.kube.resources import pod_requests
from handlers.kube.selectors import match_labels, parse_label_selector
from handlers.model import Diagnosis, Finding, Severity
from handlers.queues import queue_rows
from handlers.target import KIND_ALIASES, Target
from handlers.timefmt import age_text, seconds_since
from handlers.view import ACTIVE_PODS, Obj, Reader

DEFAULT_LIMIT = 50
# The same selector PendingContext.active_pods uses, so the Reader serves both from one read.
FAILED_CREATE = "reason=FailedCreate"
# Kinds whose FailedCreate events mean "a pod of this controller could not be created".
_CREATING_KINDS = ("ReplicaSet", "StatefulSet", "Job", "Deployment")
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


# ------------------------------------------------------------------------------ discovery
@dataclass
class PendingWorkload:
    """One row before diagnosis: a controller (or a bare pod) with pods it is missing."""

    kind: str
    name: str
    namespace: str
    controller: Obj | None = None
    pods: list[Obj] = field(default_factory=list)  # unbound Pending pods asking for GPUs
    active: int = 0  # non-terminated pods the controller has (any phase), when known
    not_created: int = 0  # pods the controller wants but could not create
    failed_create: list[Obj] = field(default_factory=list)  # FailedCreate events, oldest first
    template: Obj | None = None  # the controller's pod template as a pod, when not_created
    queue: str | None = None  # Kueue LocalQueue of a suspended Job
    created: str = ""  # the controller's creationTimestamp (when nothing else dates the wait)
    dra: dict[str, float] = field(default_factory=dict)  # "<DeviceClass> (DRA)" -> devices

    @property
    def workload(self) -> str:
        return f"{self.kind.lower()}/{self.name}"

    @property
    def pods_pending(self) -> int:
        return len(self.pods) + self.not_created

    def resources(self) -> dict[str, float]:
        """GPU resources asked by the pending pods and the pods not created, per resource."""
        out: dict[str, float] = {}
        for p in self.pods:
            _add(out, gpu_requests(p))
        _add(out, self.dra)
        if self.not_created and self.template is not None:
            _add(out, {k: v * self.not_created for k, v in gpu_requests(self.template).items()})
        return dict(sorted(out.items()))

    @property
    def gpus(self) -> float:
        return sum(self.resources().values())

    def since(self) -> str:
        """When the wait started: the oldest pending pod, else the first FailedCreate."""
        stamps = [str(p.get("metadata", {}).get("creationTimestamp") or "") for p in self.pods]
        stamps += [str(e.get("firstTimestamp") or e.get("eventTime")
                       or e.get("lastTimestamp") or "") for e in self.failed_create]
        stamps = [s for s in stamps if s]
        return min(stamps) if stamps else self.created


def gpu_requests(pod: Obj) -> dict[str, float]:
    """The GPU-like resources a pod (or a template pod) requests, with their amounts."""
    return {k: v for k, v in pod_requests(pod).items() if is_gpu_resource(k) and v > 0}


def _waiting_unbound(pod: Obj) -> bool:
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    return ((pod.get("status") or {}).get("phase", "Pending") == "Pending"
            and not spec.get("nodeName") and not meta.get("deletionTimestamp"))


def is_pending_gpu_pod(pod: Obj) -> bool:
    """Pending, not bound to a node, not being deleted, and asking for a GPU resource."""
    return _waiting_unbound(pod) and bool(gpu_requests(pod))


def _add(into: dict[str, float], other: dict[str, float]) -> None:
    for k, v in other.items():
        into[k] = into.get(k, 0.0) + v


def _controller_ref(obj: Obj) -> dict[str, Any] | None:
    refs = obj.get("metadata", {}).get("ownerReferences") or []
    for r in refs:
        if r.get("controller"):
            return dict(r)
    return dict(refs[0]) if refs else None


def _owns(owner: Obj, obj: Obj, kind: str) -> bool:
    uid = owner.get("metadata", {}).get("uid")
    for r in obj.get("metadata", {}).get("ownerReferences") or []:
        if (uid and r.get("uid") == uid) or (r.get("kind") == kind
                                             and r.get("name") == name_of(owner)):
            return True
    return False


class _Scope:
    """The lists a pending scan reads, each read once through the Reader."""

    def __init__(self, reader: Reader, namespace: str | None) -> None:
        self.reader = reader
        self.namespace = namespace
        self.pods = [p for p in reader.list("Pod", field_selector=ACTIVE_PODS)
                     if namespace is None or ns_of(p) == namespace]
        self._rs: dict[tuple[str, str], Obj] | None = None

    def replicasets(self) -> dict[tuple[str, str], Obj]:
        if self._rs is None:
            self._rs = {(ns_of(rs), name_of(rs)): rs
                        for rs in self.reader.list("ReplicaSet", self.namespace)}
        return self._rs

    def top_owner(self, obj: Obj, ns: str) -> tuple[str, str] | None:
        """(kind, name) of the controller that owns ``obj``: a ReplicaSet's Deployment."""
        ref = _controller_ref(obj)
        if ref is None:
            return None
        kind, name = str(ref.get("kind", "")), str(ref.get("name", ""))
        if kind == "ReplicaSet":
            rs = self.replicasets().get((ns, name))
            dep = _controller_ref(rs) if rs is not None else None
            if dep is not None and dep.get("kind") == "Deployment":
                return "Deployment", str(dep.get("name", ""))
        return kind, name

    def controller(self, kind: str, name: str, ns: str) -> Obj | None:
        obj = self.reader.get(kind, name, ns) if kind in _CREATING_KINDS else None
        if obj is not None:
            obj.setdefault("kind", kind)
        return obj

    def active_pods_of(self, controller: Obj) -> int:
        kind = str(controller.get("kind"))
        ns = ns_of(controller)
        owners = [controller]
        if kind == "Deployment":
            owners = [rs for (rns, _), rs in self.replicasets().items()
                      if rns == ns and _owns(controller, rs, "Deployment")]
        return sum(1 for p in self.pods if ns_of(p) == ns
                   and any(_owns(o, p, str(o.get("kind") or "ReplicaSet")) for o in owners))


def _event_time(e: Obj) -> str:
    return str(e.get("firstTimestamp") or e.get("eventTime") or e.get("lastTimestamp") or "")


def find_pending(reader: Reader, namespace: str | None = None) -> list[PendingWorkload]:
    """Every pending GPU workload in ``namespace`` (None: all), undiagnosed, in no order."""
    namespace = namespace or None
    scope = _Scope(reader, namespace)
    groups: dict[tuple[str, str, str], PendingWorkload] = {}
    for pod in scope.pods:
        asked: dict[str, float] = {}
        if not is_pending_gpu_pod(pod):
            # A DRA pod asks its GPUs through claims for a GPU DeviceClass.
            if not (_waiting_unbound(pod) and uses_claims(pod)):
                continue
            asked = gpu_devices_asked(reader, pod)
            if not asked:
                continue
        ns = ns_of(pod)
        owner = scope.top_owner(pod, ns) or ("Pod", name_of(pod))
        key = (ns, *owner)
        if key not in groups:
            groups[key] = PendingWorkload(owner[0], owner[1], ns)
        groups[key].pods.append(pod)
        _add(groups[key].dra, {f"{cls} (DRA)": n for cls, n in asked.items()})

    if not reader.readable("Pod"):
        return list(groups.values())  # without pods, no controller can be called short
    events = reader.list("Event", namespace, field_selector=FAILED_CREATE)
    by_controller: dict[tuple[str, str, str], list[Obj]] = {}
    for e in events:
        inv = e.get("involvedObject") or {}
        kind = str(inv.get("kind") or "")
        if kind not in _CREATING_KINDS:
            continue
        ns = str(inv.get("namespace") or e.get("metadata", {}).get("namespace") or "")
        name = str(inv.get("name") or "")
        if kind == "ReplicaSet":
            rs = scope.replicasets().get((ns, name))
            dep = scope.top_owner(rs, ns) if rs is not None else None
            if dep is not None and dep[0] == "Deployment":
                kind, name = dep
        by_controller.setdefault((ns, kind, name), []).append(e)

    for (ns, kind, name), evs in sorted(by_controller.items()):
        ctrl = scope.controller(kind, name, ns)
        if ctrl is None:
            continue
        template = why_pending.template_pod(ctrl, ns)
        if not gpu_requests(template):
            continue
        active = scope.active_pods_of(ctrl)
        missing = why_pending.desired_pods(ctrl) - active
        if missing <= 0:
            continue
        w = groups.setdefault((ns, kind, name), PendingWorkload(kind, name, ns))
        w.controller, w.active, w.template = ctrl, active, template
        # Pods that exist but are pending are counted in `active`: the rest were never created.
        w.not_created = missing
        w.failed_create = sorted(evs, key=_event_time)

    for job in reader.list("Job", namespace):
        queue = (job.get("metadata", {}).get("labels") or {}).get(KUEUE_QUEUE_LABEL)
        if not queue or not (job.get("spec") or {}).get("suspend"):
            continue
        job.setdefault("kind", "Job")
        ns = ns_of(job)
        template = why_pending.template_pod(job, ns)
        if not gpu_requests(template):
            continue
        active = scope.active_pods_of(job)
        missing = why_pending.desired_pods(job, suspended_too=True) - active
        if missing <= 0:
            continue
        w = groups.setdefault((ns, "Job", name_of(job)), PendingWorkload("Job", name_of(job), ns))
        w.controller, w.active, w.template, w.queue = job, active, template, str(queue)
        w.not_created = missing
        w.created = str(job.get("metadata", {}).get("creationTimestamp") or "")
    for kind in batchjobs.KINDS:  # JobSet, RayJob, PyTorchJob held by Kueue
        for obj in reader.list(kind, namespace):
            queue = (obj.get("metadata", {}).get("labels") or {}).get(KUEUE_QUEUE_LABEL)
            if not queue or not batchjobs.suspended(obj):
                continue
            obj.setdefault("kind", kind)
            ns = ns_of(obj)
            template = why_pending.template_pod(obj, ns)
            if not gpu_requests(template):
                continue
            w = groups.setdefault((ns, kind, name_of(obj)), PendingWorkload(kind, name_of(obj), ns))
            w.controller, w.template, w.queue = obj, template, str(queue)
            w.not_created = batchjobs.pod_count(obj)
            w.created = str(obj.get("metadata", {}).get("creationTimestamp") or "")
    return list(groups.values())


def _selected(w: PendingWorkload, selector: str | None) -> bool:
    if not selector:
        return True
    pods = w.pods or ([w.template] if w.template is not None else [])
    return any(match_labels(selector, (p.get("metadata") or {}).get("labels")) for p in pods)


# ------------------------------------------------------------------------------ diagnosis
def _drilldown(w: PendingWorkload) -> str:
    if w.kind == "Pod" or w.kind.lower() not in KIND_ALIASES:
        pod = sorted(w.pods, key=name_of)[0] if w.pods else None
        return f"gpubot why-pending {w.namespace}/{name_of(pod) if pod else w.name}"
    return f"gpubot why-pending {w.workload} -n {w.namespace}"


def diagnose(reader: Reader, w: PendingWorkload) -> Diagnosis:
    """why-pending for one representative of the workload."""
    if w.pods:
        pod = sorted(w.pods, key=name_of)[0]
        return why_pending.run(reader, Target("Pod", name_of(pod), w.namespace))
    return why_pending.run(reader, Target(w.kind, w.name, w.namespace))


def root_cause(diag: Diagnosis) -> Finding | None:
    """The root cause (first, see handlers.finish); else the first finding that names
    anything at all."""
    for f in diag.findings:
        if f.severity.is_problem:
            return f
    return next((f for f in diag.findings if f.code != "ALL_CLEAR"), None)


def _row(w: PendingWorkload, now: datetime) -> dict[str, Any]:
    secs = seconds_since(now, w.since())
    pods = sorted(w.pods, key=name_of)
    return {
        "workload": w.workload, "kind": w.kind, "name": w.name, "namespace": w.namespace,
        "pods_pending": w.pods_pending, "pods_not_created": w.not_created,
        "gpus_requested": w.gpus, "resources": w.resources(),
        "age": age_text(secs), "age_seconds": secs or 0,
        "pod": name_of(pods[0]) if pods else None, "queue": w.queue,
        "code": None, "severity": str(Severity.INFO), "cause": "", "fix": None,
        "drilldown": _drilldown(w), "fits_if": [], "fits_if_closest": "",
    }


def diagnosed_row(reader: Reader, w: PendingWorkload, now: datetime,
                  unchecked: list[str]) -> tuple[dict[str, Any], Finding | None]:
    """The workload's row with its root cause (why-pending on one representative), and that
    finding; a diagnosis that fails says so in the row and in ``unchecked``."""
    row = _row(w, now)
    try:
        one = diagnose(reader, w)
        found = root_cause(one)
        row["fits_if"] = [c.to_json() for c in one.fits_if]
        row["fits_if_closest"] = one.details.get("fits_if_closest", "")
    except Exception as err:  # one broken diagnosis must not sink the whole report
        found = None
        why = str(err) if isinstance(err, GpubotError) else f"{type(err).__name__}: {err}"
        row["cause"] = f"could not diagnose: {why}"
        unchecked.append(f"why-pending {w.namespace}/{w.workload}: {why}")
    if found is not None:
        row.update(code=found.code, severity=str(found.severity), cause=found.summary,
                   fix=found.fix.to_json())
    elif not row["cause"]:
        row["cause"] = f"why-pending found no cause; run {row['drilldown']}"
    return row, found


def longest_waiting(reader: Reader, workloads: Iterable[PendingWorkload], n: int,
                    unchecked: list[str]) -> list[dict[str, Any]]:
    """The ``n`` workloads waiting longest, oldest first, each diagnosed (``diagnosed_row``)."""
    now = reader.now()
    oldest = sorted(workloads, key=lambda w: (w.since() or "~", w.namespace, w.workload))
    return [diagnosed_row(reader, w, now, unchecked)[0] for w in oldest[:max(n, 0)]]


def _severity_rank(sev: str) -> int:
    try:
        return Severity(sev).rank
    except ValueError:
        return Severity.INFO.rank


def run(reader: Reader, namespace: str | None = None, *, limit: int = DEFAULT_LIMIT,
        selector: str | None = None) -> Diagnosis:
    """``selector``: only workloads whose pods (or pod template) match this label selector
    (kubectl's ``-l``); a malformed one raises ``SelectorError``."""
    namespace = namespace or None  # "" means every namespace, as None does
    if selector:
        parse_label_selector(selector)  # refuse a malformed selector before any work
    scope_text = f"namespace {namespace}" if namespace else "all namespaces"
    diag = Diagnosis("pending", scope_text + (f", pods matching {selector}" if selector else ""))
    diag.check("unbound Pending pods requesting GPUs, grouped by controller")
    diag.check("GPU controllers short of pods with FailedCreate events")
    diag.check("why-pending for one pod (or pod template) per workload")
    now = reader.now()
    workloads = [w for w in find_pending(reader, namespace) if _selected(w, selector)]
    # Diagnose the biggest and oldest first when there are more than `limit`.
    workloads.sort(key=lambda w: (-w.gpus, -w.pods_pending, w.since() or "~",
                                  w.namespace, w.workload))
    limit = max(limit, 0)
    chosen, rest = workloads[:limit], workloads[limit:]

    rows: list[dict[str, Any]] = []
    causes: list[Finding] = []
    for w in chosen:
        row, found = diagnosed_row(reader, w, now, diag.unchecked)
        if found is not None:
            causes.append(found)
        rows.append(row)
    rows.sort(key=lambda r: (_severity_rank(r["severity"]), -r["gpus_requested"],
                             -r["age_seconds"], r["namespace"], r["workload"]))

    seen: set[tuple[str, str]] = set()
    for f in causes:
        if (f.code, f.summary) not in seen:
            seen.add((f.code, f.summary))
            diag.add(f)
    diag.details["rows"] = rows
    diag.details["totals"] = _totals(workloads)
    diag.details["more"] = len(rest)
    diag.details["more_pods"] = sum(w.pods_pending for w in rest)
    diag.details["more_gpus"] = sum(w.gpus for w in rest)
    diag.details["limit"] = limit
    diag.details["namespace"] = namespace
    diag.details["causes"] = _cause_summary(rows)
    diag.details["queues"] = queue_rows(reader, namespace)
    where = f"namespace {namespace}" if namespace else "any namespace"
    if workloads or not all(reader.readable(k) for k in ("Pod", "Event", "Job")):
        # Pending workloads are never "all clear", even when every cause is only info; and
        # nothing found in lists that could not be read proves nothing.
        diag.can_clear = False
    else:
        diag.add(Finding(
            "ALL_CLEAR", f"No GPU workload is pending in {where}.",
            evidence=("unbound Pending pods requesting a GPU: 0",
                      "GPU controllers short of pods with FailedCreate events: 0"),
        ))
    diag.unchecked.extend(u for u in reader.unchecked if u not in diag.unchecked)
    diag.withheld = list(reader.withheld)
    return finish(diag)


def _totals(workloads: Iterable[PendingWorkload]) -> dict[str, Any]:
    ws = list(workloads)
    return {"workloads": len(ws), "pods": sum(w.pods_pending for w in ws),
            "gpus": sum(w.gpus for w in ws)}


def _cause_summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per root-cause code: how many workloads, pods and GPUs it holds back."""
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        code = r["code"] or "UNKNOWN"
        c = out.setdefault(code, {"code": r["code"], "severity": r["severity"],
                                  "workloads": [], "pods": 0, "gpus": 0.0})
        c["workloads"].append(f"{r['namespace']}/{r['workload']}")
        c["pods"] += r["pods_pending"]
        c["gpus"] += r["gpus_requested"]
    return list(out.values())

