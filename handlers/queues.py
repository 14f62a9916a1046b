"""GPU usage of the queues in front of the scheduler, for the ``pending`` and ``quota`` reports.

One row per queue and GPU resource (and Kueue flavor)::

    {system: "kueue"|"volcano", queue, flavor, resource, used, limit, limit_kind,
     borrowed, cohort, namespaces, pending, admitted}

Kueue: ClusterQueues (those the namespace's LocalQueues point to, when a namespace is given),
``nominalQuota`` against ``status.flavorsUsage``. Volcano: Queues, ``capability`` (else
``deserved``) against ``status.allocated``. A cluster without either shows no section, and
its unreadable queue kinds are not listed as "not checked" (nothing there to check).
"""

from __future__ import annotations

from typing import Any

from handlers import kueue
from handlers.gpu import is_gpu_resource, name_of, ns_of
from handlers.kube.quantity import parse_quantity
from handlers.view import Reader


def queue_rows(reader: Reader, namespace: str | None = None) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for system in ("kueue", "volcano"):
        before = len(reader.unchecked)
        found = _kueue_rows(reader, namespace) if system == "kueue" else _volcano_rows(reader)
        if not found:  # that queue system is absent: nothing to report as unchecked
            del reader.unchecked[before:]
        rows += found
    return rows


def _kueue_rows(reader: Reader, namespace: str | None) -> list[dict[str, Any]]:
    lqs = reader.list("LocalQueue", namespace)
    serving: dict[str, set[str]] = {}
    for lq in lqs:
        target = str((lq.get("spec") or {}).get("clusterQueue") or "")
        serving.setdefault(target, set()).add(ns_of(lq))
    rows: list[dict[str, Any]] = []
    for cq in reader.list("ClusterQueue") if lqs or namespace is None else []:
        name = name_of(cq)
        if namespace is not None and name not in serving:
            continue
        st = cq.get("status") or {}
        for (flavor, res), q in sorted(kueue.quotas(cq).items()):
            if not is_gpu_resource(res):
                continue
            rows.append({
                "system": "kueue", "queue": name, "flavor": flavor, "resource": res,
                "used": q.used, "limit": q.nominal, "limit_kind": "nominalQuota",
                "borrowed": q.borrowed, "cohort": kueue.cohort_of(cq),
                "namespaces": sorted(serving.get(name, set())),
                "pending": int(st.get("pendingWorkloads") or 0),
                "admitted": int(st.get("admittedWorkloads") or 0),
                "stopped": kueue.stop_policy(cq) is not None,
            })
    return rows


def _volcano_rows(reader: Reader) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for q in reader.list("Queue"):
        spec, st = q.get("spec") or {}, q.get("status") or {}
        limits = spec.get("capability") or {}
        kind = "capability"
        if not any(is_gpu_resource(str(r)) for r in limits):
            limits, kind = spec.get("deserved") or {}, "deserved"
        allocated = st.get("allocated") or {}
        for res, v in sorted(limits.items()):
            if not is_gpu_resource(str(res)):
                continue
            rows.append({
                "system": "volcano", "queue": name_of(q), "flavor": "", "resource": str(res),
                "used": parse_quantity(allocated.get(res)) if res in allocated else None,
                "limit": parse_quantity(v), "limit_kind": kind, "borrowed": 0.0,
                "cohort": None, "namespaces": [],
                "pending": int(st.get("pending") or 0), "admitted": int(st.get("running") or 0),
                "stopped": str(st.get("state") or "Open") != "Open",
            })
    return rows
