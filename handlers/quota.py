"""quota: GPU ResourceQuota used/hard per namespace and resource, who holds it, what waits.

A quota entry is a GPU entry when its key counts a GPU resource (``requests.nvidia.com/gpu``,
``limits.nvidia.com/gpu``, a bare ``nvidia.com/gpu``, MIG profiles such as
``requests.nvidia.com/mig-1g.10gb``, shared GPUs ``requests.nvidia.com/gpu.shared``) or
otherwise names GPUs (``count/...`` or DRA device-class entries with ``gpu``/``nvidia`` in
the key). cpu, memory and plain ``count/pods`` entries are left out.

``used`` is ``status.used`` when the quota controller has written it; otherwise it is
computed from the active pods in the quota's namespace and scope, and the row says so
(``used_source: "pods"``). The API server enforces only ``requests.<name>`` for extended
resources (``isExtendedResourceNameForQuota``), so ``limits.`` and bare GPU entries never
get a ``status.used`` and are marked ``enforced: False``.

``details["rows"]``, one per (quota, GPU entry)::

    {namespace, quota, resource, counts, used, hard, pct, used_source, enforced,
     holders: [{pod, count, phase, node}], pending, waiting: [{workload, kind, name,
     pods_pending, pods_not_created, count, not_created_count}], notes: [...]}

``pending`` is the demand of the namespace's pending GPU workloads for the entry: unbound
pending pods (already charged to ``used``) plus pods their controllers could not create.
``details["without_quota"]``: namespaces asking for GPUs under no GPU quota,
``{namespace, in_use: {resource: n}, pending: {resource: n}}``; ``details["info"]``: lines
such as "no GPU quota at all".

Findings: ``QUOTA_EXCEEDED`` (warning) where an enforced entry is used up and GPU pods wait
on it: pods their controllers could not create, or ``FailedCreate`` events saying
``exceeded quota`` for it (pods that exist were admitted, so pending pods alone do not
count: they wait for nodes, not quota), and
``QUOTA_REQUESTS_LIMITS_UNEQUAL`` (as why-pending reports it). Nothing else: this is a report.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from handlers.finish import finish
from handlers.fixes import raise_quota
from handlers.gpu import is_gpu_resource, name_of, ns_of
from handlers.kube.quantity import QuantityError, fmt_quantity, parse_quantity
from handlers.kube.resources import is_best_effort, pod_requests
from handlers.model import Diagnosis, Finding, ObjectRef
from handlers.pending.context import PendingContext
from handlers.pending.quota import EXCEEDED_RE, check_requests_limits_unequal
from handlers.pending_all import FAILED_CREATE, PendingWorkload, find_pending
from handlers.queues import queue_rows
from handlers.view import ACTIVE_PODS, Obj, Reader
from handlers.words import counted

REQUESTS = "requests."
LIMITS = "limits."
_GPU_WORD_RE = re.compile(r"gpu|nvidia", re.IGNORECASE)
_PART_ORDER = {"requests": 0, "bare": 1, "limits": 2, "other": 3}
HOLDER_LINES = 6


@dataclass(frozen=True)
class QuotaKey:
    """A GPU entry of a quota: ``key`` as written, the pod resource it counts, if any."""

    key: str
    resource: str | None  # nvidia.com/gpu for requests./limits./bare keys; None otherwise
    part: str  # requests | limits | bare | other
    enforced: bool


def gpu_quota_key(key: str) -> QuotaKey | None:
    """The key as a GPU quota entry, or None when it does not count or name GPUs."""
    for prefix, part in ((REQUESTS, "requests"), (LIMITS, "limits")):
        if key.startswith(prefix) and is_gpu_resource(key[len(prefix):]):
            return QuotaKey(key, key[len(prefix):], part, part == "requests")
    if is_gpu_resource(key):
        return QuotaKey(key, key, "bare", False)
    if _GPU_WORD_RE.search(key):  # count/<gpu things>, DRA deviceclass entries
        return QuotaKey(key, None, "other", True)
    return None


def _q(value: Any) -> float | None:
    if value is None:
        return None
    try:
        return parse_quantity(value)
    except QuantityError:
        return None


# ------------------------------------------------------------------------------ pods
def pod_limits(pod: Obj) -> dict[str, float]:
    """Pod limits the way quota counts ``limits.*``: containers summed, init containers'
    maximum taken when larger."""
    spec = pod.get("spec") or {}
    total: dict[str, float] = {}
    for c in spec.get("containers") or []:
        for k, v in ((c.get("resources") or {}).get("limits") or {}).items():
            total[k] = total.get(k, 0.0) + (_q(v) or 0.0)
    for c in spec.get("initContainers") or []:
        for k, v in ((c.get("resources") or {}).get("limits") or {}).items():
            total[k] = max(total.get(k, 0.0), _q(v) or 0.0)
    return total


def pod_amount(pod: Obj, qk: QuotaKey) -> float:
    if qk.resource is None:
        return 0.0
    if qk.part == "limits":
        return pod_limits(pod).get(qk.resource, 0.0)
    return pod_requests(pod).get(qk.resource, 0.0)


def _terminating(pod: Obj) -> bool:
    ads = (pod.get("spec") or {}).get("activeDeadlineSeconds")
    return isinstance(ads, int) and ads >= 0


def _cross_namespace_affinity(pod: Obj) -> bool:
    aff = (pod.get("spec") or {}).get("affinity") or {}
    for kind in ("podAffinity", "podAntiAffinity"):
        a = aff.get(kind) or {}
        terms = list(a.get("requiredDuringSchedulingIgnoredDuringExecution") or [])
        terms += [t.get("podAffinityTerm") or {} for t in
                  a.get("preferredDuringSchedulingIgnoredDuringExecution") or []]
        if any(t.get("namespaces") or t.get("namespaceSelector") is not None for t in terms):
            return True
    return False


def quota_applies(quota: Obj, pod: Obj) -> bool:
    """Whether the quota's scopes and scopeSelector cover the pod (pods.go
    podMatchesScopeFunc)."""
    spec = quota.get("spec") or {}
    exprs: list[dict[str, Any]] = [{"scopeName": s, "operator": "Exists"}
                                   for s in spec.get("scopes") or []]
    exprs += list((spec.get("scopeSelector") or {}).get("matchExpressions") or [])
    pc = str((pod.get("spec") or {}).get("priorityClassName") or "")
    for e in exprs:
        scope, op = e.get("scopeName"), e.get("operator", "Exists")
        values = e.get("values") or []
        if scope == "PriorityClass":
            ok = {"In": pc in values, "NotIn": pc not in values, "Exists": bool(pc),
                  "DoesNotExist": not pc}.get(str(op), True)
        else:
            has = {"Terminating": _terminating(pod), "NotTerminating": not _terminating(pod),
                   "BestEffort": is_best_effort(pod), "NotBestEffort": not is_best_effort(pod),
                   "CrossNamespacePodAffinity": _cross_namespace_affinity(pod)}.get(
                       str(scope), True)
            ok = has if op != "DoesNotExist" else not has
        if not ok:
            return False
    return True


# ------------------------------------------------------------------------------ rows
def _holders(pods: Iterable[Obj], quota: Obj, qk: QuotaKey) -> list[dict[str, Any]]:
    out = []
    for p in pods:
        amount = pod_amount(p, qk)
        if amount > 0 and quota_applies(quota, p):
            out.append({"pod": name_of(p), "count": amount,
                        "phase": (p.get("status") or {}).get("phase", "Pending"),
                        "node": (p.get("spec") or {}).get("nodeName") or None})
    return sorted(out, key=lambda h: (-h["count"], h["pod"]))


def _waiting(workloads: Iterable[PendingWorkload], quota: Obj,
             qk: QuotaKey) -> list[dict[str, Any]]:
    out = []
    for w in workloads:
        pods = [p for p in w.pods if pod_amount(p, qk) > 0 and quota_applies(quota, p)]
        charged = sum(pod_amount(p, qk) for p in pods)
        not_created, uncharged = 0, 0.0
        if w.not_created and w.template is not None and quota_applies(quota, w.template):
            per_pod = pod_amount(w.template, qk)
            if per_pod > 0:
                not_created, uncharged = w.not_created, per_pod * w.not_created
        if charged + uncharged > 0:
            out.append({"workload": w.workload, "kind": w.kind, "name": w.name,
                        "pods_pending": len(pods), "pods_not_created": not_created,
                        "count": charged + uncharged, "not_created_count": uncharged})
    return sorted(out, key=lambda x: (-x["count"], x["workload"]))


def _exceeded_events(events: Iterable[Obj], quota: str, key: str) -> list[str]:
    """Messages of FailedCreate events saying ``quota`` refused a pod over ``key``."""
    out = []
    for e in events:
        msg = str(e.get("message") or "")
        m = EXCEEDED_RE.search(msg)
        if not m or m["quota"] != quota:
            continue
        limited = {part.partition("=")[0].strip() for part in m["limited"].split(",")}
        if key in limited and msg not in out:
            out.append(msg)
    return out


def _refused_amount(messages: list[str], key: str) -> float:
    """What the newest refused pod asked for ``key`` (``requested: key=4``)."""
    for msg in reversed(messages):
        m = EXCEEDED_RE.search(msg)
        if m:
            for part in m["requested"].split(","):
                k, _, v = part.partition("=")
                if k.strip() == key:
                    return _q(v.strip()) or 0.0
    return 0.0


def _row(quota: Obj, qk: QuotaKey, pods: list[Obj] | None,
         workloads: list[PendingWorkload]) -> dict[str, Any]:
    """One report row; ``pods`` None when the pods could not be read."""
    spec_hard = (quota.get("spec") or {}).get("hard") or {}
    status = quota.get("status") or {}
    hard = _q(spec_hard.get(qk.key, (status.get("hard") or {}).get(qk.key)))
    used_map = status.get("used")
    holders = _holders(pods, quota, qk) if qk.resource and pods is not None else []
    computed = sum((h["count"] for h in holders), 0.0)
    notes: list[str] = []
    status_used = _q(used_map.get(qk.key)) if isinstance(used_map, dict) else None
    if status_used is not None:
        used: float | None = status_used
        source = "status"
        if qk.resource and pods is not None and computed != status_used:
            notes.append(f"status.used says {fmt_quantity(status_used)}, the pods in scope "
                         f"hold {fmt_quantity(computed)} (status behind, or pods terminating)")
    elif qk.resource and pods is not None:
        used, source = computed, "pods"
        notes.append("status.used has no entry: used computed from the pods")
    else:
        used, source = None, "unknown"
        notes.append("status.used has no entry, and the pods do not show this usage"
                     if pods is not None else "status.used has no entry; pods unreadable")
    if not qk.enforced:
        notes.append(f"not enforced: the API server only enforces requests.{qk.resource} "
                     "for extended resources")
    waiting = _waiting(workloads, quota, qk)
    pct = round(used / hard * 100, 1) if used is not None and hard else None
    return {
        "namespace": ns_of(quota), "quota": name_of(quota), "resource": qk.key,
        "counts": qk.resource, "used": used, "hard": hard, "pct": pct,
        "used_source": source, "enforced": qk.enforced, "holders": holders,
        "pending": sum((w["count"] for w in waiting), 0.0), "waiting": waiting, "notes": notes,
    }


# ------------------------------------------------------------------------------ findings
def _exceeded(row: dict[str, Any], events: list[Obj]) -> Finding | None:
    used, hard = row["used"], row["hard"]
    if not row["enforced"] or used is None or hard is None or used < hard:
        return None
    refused = _exceeded_events(events, row["quota"], row["resource"])
    waiting = row["waiting"]
    # Quota admission happens at creation: a pod that exists got past it, so only pods
    # that could not be created (or refusal events) show that the quota holds work back.
    if not refused and not any(w["pods_not_created"] for w in waiting):
        return None
    ns, q, key = row["namespace"], row["quota"], row["resource"]
    res = row["counts"] or key
    not_created = sum(w["pods_not_created"] for w in waiting)
    pending_pods = sum(w["pods_pending"] for w in waiting)
    uncharged = sum(w["not_created_count"] for w in waiting)  # not in `used` yet
    parts = []
    if not_created:
        parts.append(f"{counted(not_created, 'pod')} could not be created")
    if pending_pods:
        parts.append(f"{counted(pending_pods, 'unscheduled pending pod')} "
                     f"{'holds' if pending_pods == 1 else 'hold'} part of it")
    if not parts:
        parts.append("pod creation was refused")
    source = "status.used" if row["used_source"] == "status" else "used (computed from pods)"
    evidence = [f"ResourceQuota {q} {source} {key}: {fmt_quantity(used)}",
                f"ResourceQuota {q} hard {key}: {fmt_quantity(hard)}"]
    evidence += [f"holder {ns}/{h['pod']}: {res}={fmt_quantity(h['count'])} "
                 f"({h['phase']} on {h['node'] or 'no node'})"
                 for h in row["holders"][:HOLDER_LINES]]
    if len(row["holders"]) > HOLDER_LINES:
        evidence.append(f"... and {len(row['holders']) - HOLDER_LINES} more holders")
    evidence += [f"waiting {ns}/{w['workload']}: {w['pods_pending']} pending, "
                 f"{w['pods_not_created']} not created, asks {res}={fmt_quantity(w['count'])}"
                 for w in waiting[:HOLDER_LINES]]
    evidence += refused[-1:]
    objects = [ObjectRef("ResourceQuota", q, ns)]
    objects += [ObjectRef(w["kind"], w["name"], ns) for w in waiting[:HOLDER_LINES]]
    raise_to = fmt_quantity(max(hard, used) + (uncharged or _refused_amount(refused, key)))
    fix = raise_quota(ns, q, key, raise_to, "stop or scale down a holder")
    return Finding(
        "QUOTA_EXCEEDED",
        f"ResourceQuota {q} in {ns} is used up for {key}: {fmt_quantity(used)} of "
        f"{fmt_quantity(hard)}; {', '.join(parts)}.",
        tuple(objects), tuple(evidence), fix,
    )


# ------------------------------------------------------------------------------ run
def _without_quota(pods: Iterable[Obj], quoted: set[str]) -> list[dict[str, Any]]:
    """Namespaces whose pods ask for GPUs under no GPU quota: GPUs held by pods bound
    to nodes (``in_use``) and asked by pods not bound yet (``pending``)."""
    out: dict[str, dict[str, Any]] = {}
    for p in pods:
        if ns_of(p) in quoted:
            continue
        for k, v in pod_requests(p).items():
            if is_gpu_resource(k) and v > 0:
                row = out.setdefault(ns_of(p), {"namespace": ns_of(p), "in_use": {},
                                                "pending": {}})
                part = row["in_use"] if (p.get("spec") or {}).get("nodeName") else row["pending"]
                part[k] = part.get(k, 0.0) + v
    return [out[ns] for ns in sorted(out)]


def run(reader: Reader, namespace: str | None = None) -> Diagnosis:
    namespace = namespace or None  # "" means every namespace, as None does
    scope_text = f"namespace {namespace}" if namespace else "all namespaces"
    diag = Diagnosis("quota", scope_text)
    diag.check("ResourceQuota GPU entries: used/hard, holders, pending demand")
    diag.can_clear = False  # a report, not a check of the chain
    quotas = sorted(reader.list("ResourceQuota", namespace),
                    key=lambda q: (ns_of(q), name_of(q)))
    gpu_quotas: list[tuple[Obj, list[QuotaKey]]] = []
    for q in quotas:
        hard = dict((q.get("status") or {}).get("hard") or {})
        hard.update((q.get("spec") or {}).get("hard") or {})
        keys = [k for k in (gpu_quota_key(key) for key in hard) if k is not None]
        if keys:
            keys.sort(key=lambda k: (_PART_ORDER[k.part], k.resource or "", k.key))
            gpu_quotas.append((q, keys))

    pods = [p for p in reader.list("Pod", field_selector=ACTIVE_PODS)
            if namespace is None or ns_of(p) == namespace]
    pods_known = reader.readable("Pod")
    by_ns: dict[str, list[Obj]] = {}
    for p in pods:
        by_ns.setdefault(ns_of(p), []).append(p)
    rows: list[dict[str, Any]] = []
    if gpu_quotas:
        workloads: dict[str, list[PendingWorkload]] = {}
        for w in find_pending(reader, namespace):
            workloads.setdefault(w.namespace, []).append(w)
        events: dict[str, list[Obj]] = {}
        for e in reader.list("Event", namespace, field_selector=FAILED_CREATE):
            events.setdefault(ns_of(e), []).append(e)
        for q, keys in gpu_quotas:
            ns = ns_of(q)
            for qk in keys:
                row = _row(q, qk, by_ns.get(ns, []) if pods_known else None,
                           workloads.get(ns, []))
                rows.append(row)
                found = _exceeded(row, events.get(ns, []))
                if found is not None:
                    diag.add(found)
        for ns in sorted({ns_of(q) for q, _ in gpu_quotas}):
            ctx = PendingContext(reader, {}, False, ns)
            diag.add_all(check_requests_limits_unequal(
                ctx, [q for q, _ in gpu_quotas if ns_of(q) == ns]))

    quoted = {ns_of(q) for q, _ in gpu_quotas}
    diag.details["rows"] = rows
    diag.details["without_quota"] = _without_quota(pods, quoted)
    info: list[str] = []
    if not gpu_quotas and reader.readable("ResourceQuota"):
        where = f"namespace {namespace}" if namespace else "any namespace"
        info.append(f"No ResourceQuota in {where} limits a GPU resource"
                    + (f" ({counted(len(quotas), 'quota')} "
                       f"{'limits' if len(quotas) == 1 else 'limit'} other resources)."
                       if quotas else "."))
    diag.details["info"] = info
    diag.details["queues"] = queue_rows(reader, namespace)
    diag.unchecked.extend(u for u in reader.unchecked if u not in diag.unchecked)
    return finish(diag)
