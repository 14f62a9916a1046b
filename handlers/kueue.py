"""Kueue: its Workloads, queues and flavors, and its own words about why it waits.

Kueue (kubernetes-sigs/kueue) keeps a job suspended until its ``Workload`` is admitted by
the ClusterQueue its LocalQueue points to. Why it waits is written in the Workload's
``QuotaReserved`` condition (``Admitted`` before v0.5) and in ``Pending`` events, in the
wording of ``pkg/scheduler/flavorassigner/flavorassigner.go`` and
``pkg/controller/core/workload_controller.go``, which changed across releases:

- every release: ``couldn't assign flavors to pod set main: insufficient unused quota for
  nvidia.com/gpu in flavor a100, 8 more needed`` (reasons joined by ``, ``, pod sets by
  ``; ``), and ``. Pending the preemption of 1 workload(s)`` after it;
- v0.6: ``insufficient unused quota in cohort for R in flavor F, N more needed`` and
  ``borrowing limit for R in flavor F exceeded``;
- v0.10: ``insufficient quota for R in flavor F, request > maximum capacity (A > B)``;
  v0.13+: ``insufficient quota for R in flavor F, previously considered podsets requests
  (A) + current podset request (B) > maximum capacity (C)``;
- ``resource R unavailable in ClusterQueue``, ``flavor F not found``, ``untolerated taint T
  in flavor F``, ``flavor F doesn't match node affinity``;
- ``LocalQueue Q doesn't exist``, ``ClusterQueue Q doesn't exist``, ``ClusterQueue Q is
  inactive``, ``LocalQueue Q is stopped``, ``ClusterQueue Q is stopped``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from handlers.gpu import labels, name_of, ns_of
from handlers.kube.quantity import parse_quantity
from handlers.view import Obj, Reader

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
# Before v0.5 (and still accepted) the queue name could be an annotation.
QUEUE_ANNOTATION = "kueue.x-k8s.io/queue-name"
STOP_POLICIES = ("Hold", "HoldAndDrain")

# What kind of obstacle a reason is (drives summary and fix).
QUOTA = "quota"  # nominal quota used by other workloads
COHORT = "cohort"  # the cohort's unused quota is used up too
BORROWING = "borrowing"  # the borrowing limit is reached
MAX_CAPACITY = "max-capacity"  # more than the queue could ever have
NO_FLAVOR = "no-flavor"  # no flavor offers the resource or fits the pod
QUEUE_MISSING = "queue-missing"
QUEUE_STOPPED = "queue-stopped"
QUEUE_INACTIVE = "queue-inactive"

_QTY = r"(?P<qty>[0-9][0-9.]*[A-Za-z]*)"
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (COHORT, re.compile(r"insufficient unused quota in cohort for (?P<res>\S+) in flavor "
                        r"(?P<flavor>[^,\s]+), " + _QTY + " more needed")),
    (QUOTA, re.compile(r"insufficient unused quota for (?P<res>\S+) in flavor "
                       r"(?P<flavor>[^,\s]+), " + _QTY + " more needed")),
    (BORROWING, re.compile(r"borrowing limit for (?P<res>\S+) in flavor (?P<flavor>\S+) "
                           r"exceeded")),
    (MAX_CAPACITY, re.compile(r"insufficient quota for (?P<res>\S+) in flavor "
                              r"(?P<flavor>[^,\s]+), (?:request|previously considered).*?"
                              r"maximum capacity \((?:[^)]*> )?(?P<qty>[^)]+)\)")),
    (NO_FLAVOR, re.compile(r"resource (?P<res>\S+) unavailable in ClusterQueue")),
    (NO_FLAVOR, re.compile(r"flavor (?P<flavor>\S+) not found")),
    (NO_FLAVOR, re.compile(r"untolerated taint (?P<taint>.+?) in flavor (?P<flavor>[^,;\s]+)")),
    (NO_FLAVOR, re.compile(r"flavor (?P<flavor>\S+) doesn't match node affinity")),
    (QUEUE_MISSING, re.compile(r"(?P<queue_kind>LocalQueue|ClusterQueue) (?P<queue>\S+) "
                               r"doesn't exist")),
    (QUEUE_STOPPED, re.compile(r"(?P<queue_kind>LocalQueue|ClusterQueue) (?P<queue>\S+) "
                               r"is stopped")),
    (QUEUE_INACTIVE, re.compile(r"(?P<queue_kind>LocalQueue|ClusterQueue) (?P<queue>\S+) "
                                r"is inactive")),
)
PREEMPTING_RE = re.compile(r"Pending the preemption of (\d+) workload")
POD_SET_RE = re.compile(r"couldn't assign flavors to pod set (?P<ps>[^:]+): ")


@dataclass(frozen=True)
class Reason:
    """One obstacle Kueue named."""

    kind: str
    text: str  # the reason as Kueue wrote it
    pod_set: str = ""
    resource: str = ""
    flavor: str = ""
    quantity: str = ""  # "8" more needed, or the maximum capacity
    queue: str = ""
    queue_kind: str = ""


def parse_message(message: str) -> tuple[list[Reason], int]:
    """Kueue's reasons in a Workload condition or event message, and how many workloads it
    waits to see preempted (0 when it says nothing of it)."""
    reasons: list[Reason] = []
    preempting = PREEMPTING_RE.search(message)
    body = PREEMPTING_RE.split(message)[0] if preempting else message
    for chunk in body.split("; "):
        ps_match = POD_SET_RE.search(chunk)
        pod_set = ps_match["ps"] if ps_match else ""
        rest = chunk[ps_match.end():] if ps_match else chunk
        for kind, pattern in _PATTERNS:
            for m in pattern.finditer(rest):
                g = m.groupdict()
                reason = Reason(kind, m.group(0).rstrip(". "), pod_set, g.get("res") or "",
                                g.get("flavor") or "", (g.get("qty") or "").strip(),
                                g.get("queue") or "", g.get("queue_kind") or "")
                if not any(r.pod_set == pod_set and reason.text in r.text for r in reasons):
                    reasons.append(reason)
    return reasons, int(preempting.group(1)) if preempting else 0


# ---------------------------------------------------------------- objects
def conditions(obj: Obj) -> dict[str, Obj]:
    return {str(c.get("type")): c for c in (obj.get("status") or {}).get("conditions") or []}


def is_true(obj: Obj, cond: str) -> bool:
    return (conditions(obj).get(cond) or {}).get("status") == "True"


def is_admitted(wl: Obj) -> bool:
    return is_true(wl, "Admitted")


def is_finished(wl: Obj) -> bool:
    return is_true(wl, "Finished")


def queue_name(obj: Obj) -> str | None:
    """The LocalQueue a job, pod or Workload names."""
    if obj.get("kind") == "Workload":
        q = (obj.get("spec") or {}).get("queueName")
        if q:
            return str(q)
    ann = (obj.get("metadata") or {}).get("annotations") or {}
    return labels(obj).get(QUEUE_LABEL) or ann.get(QUEUE_ANNOTATION) or None


def workloads_for(reader: Reader, namespace: str, owners: Iterable[Obj]) -> list[Obj]:
    """The Workloads Kueue made for these objects (a job, a pod, a pod's owners)."""
    wanted: set[tuple[str, str]] = set()
    uids: set[str] = set()
    for o in owners:
        wanted.add((str(o.get("kind")), name_of(o)))
        uid = (o.get("metadata") or {}).get("uid")
        if uid:
            uids.add(str(uid))
    if not wanted:
        return []
    out = []
    for w in reader.list("Workload", namespace):
        refs = (w.get("metadata") or {}).get("ownerReferences") or []
        job_uid = labels(w).get("kueue.x-k8s.io/job-uid")
        if job_uid in uids or any((r.get("kind"), r.get("name")) in wanted
                                  or r.get("uid") in uids for r in refs):
            out.append(w)
    return out


def admitted_to(wl: Obj) -> str | None:
    """The ClusterQueue that reserved quota for the Workload."""
    adm = (wl.get("status") or {}).get("admission") or {}
    return str(adm["clusterQueue"]) if adm.get("clusterQueue") else None


def usage_of(wl: Obj) -> dict[tuple[str, str], float]:
    """(flavor, resource) -> quantity the Workload holds in its ClusterQueue."""
    out: dict[tuple[str, str], float] = {}
    adm = (wl.get("status") or {}).get("admission") or {}
    for psa in adm.get("podSetAssignments") or []:
        flavors = psa.get("flavors") or {}
        for res, qty in (psa.get("resourceUsage") or {}).items():
            key = (str(flavors.get(res, "")), str(res))
            out[key] = out.get(key, 0.0) + parse_quantity(qty)
    return out


def requests_of(wl: Obj) -> dict[str, float]:
    """Resource -> total the Workload asks (status.resourceRequests, else its pod sets)."""
    out: dict[str, float] = {}
    reqs = (wl.get("status") or {}).get("resourceRequests") or []
    for ps in reqs:
        for res, qty in (ps.get("resources") or {}).items():
            out[str(res)] = out.get(str(res), 0.0) + parse_quantity(qty)
    if out:
        return out
    from handlers.kube.resources import pod_requests

    for ps in (wl.get("spec") or {}).get("podSets") or []:
        tmpl = ps.get("template") or {}
        count = int(ps.get("count") or 1)
        for res, v in pod_requests({"spec": tmpl.get("spec") or {}}).items():
            out[res] = out.get(res, 0.0) + v * count
    return out


@dataclass(frozen=True)
class Quota:
    nominal: float
    borrowing_limit: float | None  # None: unlimited within the cohort
    used: float  # status.flavorsUsage total
    borrowed: float
    # Where it is set in the ClusterQueue: spec.resourceGroups[i].flavors[j].resources[k].
    path: str = ""


def quotas(cq: Obj) -> dict[tuple[str, str], Quota]:
    """(flavor, resource) -> the ClusterQueue's quota and usage."""
    used: dict[tuple[str, str], tuple[float, float]] = {}
    st = cq.get("status") or {}
    for fu in st.get("flavorsUsage") or st.get("flavorsReservation") or []:
        for r in fu.get("resources") or []:
            used[(str(fu.get("name")), str(r.get("name")))] = (
                parse_quantity(r.get("total")), parse_quantity(r.get("borrowed")))
    out: dict[tuple[str, str], Quota] = {}
    for i, rg in enumerate((cq.get("spec") or {}).get("resourceGroups") or []):
        for j, fl in enumerate(rg.get("flavors") or []):
            for k, r in enumerate(fl.get("resources") or []):
                key = (str(fl.get("name")), str(r.get("name")))
                lim = r.get("borrowingLimit")
                u, b = used.get(key, (0.0, 0.0))
                out[key] = Quota(parse_quantity(r.get("nominalQuota")),
                                 None if lim is None else parse_quantity(lim), u, b,
                                 f"spec.resourceGroups[{i}].flavors[{j}].resources[{k}]")
    return out


def cohort_of(cq: Obj) -> str | None:
    spec = cq.get("spec") or {}
    c = spec.get("cohort") or spec.get("cohortName")  # v1beta2 renamed it
    return str(c) if c else None


def stop_policy(obj: Obj) -> str | None:
    p = (obj.get("spec") or {}).get("stopPolicy")
    return str(p) if p in STOP_POLICIES else None


def holders(reader: Reader, cq_name: str, flavor: str, resource: str,
            exclude: Iterable[str] = ()) -> list[tuple[str, float, int]]:
    """Workloads admitted to a ClusterQueue that hold (flavor, resource): (ns/name, quantity,
    priority), the largest first."""
    skip = set(exclude)
    out = []
    for w in reader.list("Workload"):
        ref = f"{ns_of(w)}/{name_of(w)}"
        if ref in skip or admitted_to(w) != cq_name or is_finished(w):
            continue
        held = usage_of(w).get((flavor, resource), 0.0)
        if held > 0:
            out.append((ref, held, int((w.get("spec") or {}).get("priority") or 0)))
    return sorted(out, key=lambda h: (-h[1], h[0]))


def pending_checks(wl: Obj) -> list[Mapping[str, Any]]:
    """Admission checks of the Workload that are not Ready."""
    return [c for c in (wl.get("status") or {}).get("admissionChecks") or []
            if c.get("state") != "Ready"]
