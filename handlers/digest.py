"""digest: the last day in GPUs, for the daily post in Slack and ``gpubot digest``.

- GPUs lost and GPU-hours lost per pool over the window, from the sentinel's incidents
  (open and archived), which the caller reads from the store and hands in as
  ``PastIncident``s (handlers read no store); ``None``: no store was read;
- the GPU work that has waited longest, each with its root cause (``pending_all``);
- idle allocated GPUs per namespace, when Prometheus is configured (``runtime``);
- fragmentation: free GPUs that no pending GPU pod can use, by the scheduler's filters run
  for each pending workload on the nodes with free GPUs (``simulate``);
- the ledger per GPU model (``nodes``: what the supply-and-demand chart draws,
  ``handlers/chart.py``) and what is wrong with the GPUs now (its findings).

``namespaces``: what the channel it is posted to may see (None: everything). Workload
rows, idle namespaces and findings about other namespaces' objects are left out; node-level
figures stay, as ``nodes`` answers in every mapped channel.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from handlers import nodes, pending_all
from handlers.finish import finish
from handlers.gpu import name_of
from handlers.grouping import pool_of
from handlers.model import Diagnosis, Finding
from handlers.pending.context import main_gpu_request
from handlers.runtime.checks import idle_pods
from handlers.scheduler.filters import simulate
from handlers.timefmt import age_text
from handlers.view import Obj, Reader

LOST_DETECTOR = "gpu-capacity-lost"
NO_POOL = "(no pool)"
SIMULATED = 20  # pending workloads whose fit is simulated for fragmentation
NODES_SHOWN = 10


@dataclass(frozen=True)
class PastIncident:
    """What the digest reads of a sentinel incident (``bot/sentinel/incidents.py``); times
    are seconds since the epoch."""

    detector: str
    title: str
    group: str
    state: str  # "open" | "resolved"
    since: float  # when its earliest member began
    opened: float  # when it was opened: its GPU-hours count from here
    resolved: float | None
    gpus: float  # now (0 once resolved)
    peak: float
    gpu_hours: float  # up to the digest's time
    members: int
    pools: tuple[str, ...] = ()
    namespaces: tuple[str, ...] = ()

    def end(self, now: float) -> float:
        return self.resolved if self.resolved is not None else now

    def hours_within(self, start: float, end: float) -> float:
        """Its GPU-hours that fall in [start, end], spread evenly over the time it was open
        (the store keeps the sum, not the series)."""
        stop = self.end(end)
        span = stop - self.opened
        if span <= 0:
            return self.gpu_hours if start <= self.opened <= end else 0.0
        return self.gpu_hours * max(min(stop, end) - max(self.opened, start), 0.0) / span


def run(reader: Reader, incidents: Sequence[PastIncident] | None, *, hours: float = 24.0,
        top: int = 5, namespaces: frozenset[str] | None = None) -> Diagnosis:
    now = reader.now()
    end = now.timestamp()
    start = end - hours * 3600
    diag = Diagnosis("digest", f"last {hours:g} h")
    diag.can_clear = False  # a report
    diag.details["window"] = {"hours": hours, "from": _iso(start), "to": _iso(end)}

    ledger = nodes.run(reader)  # the chart's data; its findings are what is wrong now
    diag.details["models"] = ledger.details.get("models") or []
    diag.details["totals"] = ledger.details.get("totals") or {}
    diag.check("GPU ledger per node and model (nodes)")
    diag.add_all(f for f in ledger.findings
                 if f.severity.is_problem and _visible(f, namespaces))
    diag.node_pools = dict(ledger.node_pools)
    diag.unchecked.extend(ledger.unchecked)
    diag.withheld.extend(ledger.withheld)

    if incidents is None:
        diag.details["history"] = False
        diag.unchecked.append("GPUs lost over the window: no incident store was read "
                              "(the sentinel keeps them: gpubot serve, gpubot watch "
                              "--store-path)")
    else:
        diag.details["history"] = True
        diag.check("sentinel incidents over the window (open and archived)")
        seen = [i for i in incidents if i.end(end) >= start and i.opened <= end
                and (namespaces is None or set(i.namespaces) <= namespaces)]
        diag.details["lost"] = lost_per_pool(seen, start, end)
        diag.details["incidents"] = incident_rows(seen, start, end)

    every = pending_all.find_pending(reader)
    workloads = [w for w in every if namespaces is None or w.namespace in namespaces]
    diag.check("the GPU workloads pending longest, with their root cause (why-pending)")
    diag.details["pending"] = pending_all.longest_waiting(reader, workloads, top,
                                                          diag.unchecked)
    diag.details["pending_total"] = {"workloads": len(workloads),
                                     "pods": sum(w.pods_pending for w in workloads),
                                     "gpus": sum(w.gpus for w in workloads)}

    diag.check("free GPUs no pending GPU pod can use (the scheduler's filters)")
    diag.details["fragmentation"] = fragmentation(reader, ledger.details.get("rows") or [],
                                                  every)

    if reader.metrics is not None:
        diag.details["idle"] = idle_per_namespace(idle_pods(reader, diag), namespaces)
    diag.unchecked[:] = list(dict.fromkeys(diag.unchecked))
    return finish(diag)


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _visible(f: Finding, namespaces: frozenset[str] | None) -> bool:
    """No finding about another namespace's objects in a channel that may not see it."""
    return namespaces is None or all(o.namespace is None or o.namespace in namespaces
                                     for o in f.objects)


def lost_per_pool(incidents: Iterable[PastIncident], start: float, end: float
                  ) -> list[dict[str, Any]]:
    """Per pool: the lost-GPU incidents, the most GPUs lost at once, those still lost, and
    the GPU-hours lost within the window; most GPU-hours first."""
    pools: dict[str, dict[str, Any]] = {}
    for i in incidents:
        if i.detector != LOST_DETECTOR:
            continue
        name = ", ".join(i.pools) or NO_POOL
        row = pools.setdefault(name, {"pool": name, "incidents": 0, "peak": 0.0,
                                      "lost_now": 0.0, "gpu_hours": 0.0, "longest_s": 0.0})
        row["incidents"] += 1
        row["peak"] = max(row["peak"], i.peak)
        row["lost_now"] += i.gpus if i.state == "open" else 0.0
        row["gpu_hours"] += i.hours_within(start, end)
        row["longest_s"] = max(row["longest_s"], i.end(end) - i.since)
    for row in pools.values():
        row["gpu_hours"] = round(row["gpu_hours"], 2)
        row["longest"] = age_text(row["longest_s"])
    return sorted(pools.values(), key=lambda r: (-r["gpu_hours"], -r["peak"], r["pool"]))


def incident_rows(incidents: Iterable[PastIncident], start: float, end: float,
                  limit: int = 15) -> list[dict[str, Any]]:
    """Every incident of the window, open ones first, then by GPU-hours."""
    rows: list[dict[str, Any]] = [{
        "detector": i.detector, "title": i.title, "group": i.group, "state": i.state,
        "since": _iso(i.since), "duration": age_text(i.end(end) - i.since),
        "gpus": i.gpus, "peak": i.peak, "members": i.members,
        "gpu_hours": round(i.hours_within(start, end), 2)} for i in incidents]
    rows.sort(key=lambda r: (r["state"] != "open", -r["gpu_hours"], r["detector"], r["group"]))
    return rows[:limit]


def idle_per_namespace(idle: dict[tuple[str, str], int],
                       namespaces: frozenset[str] | None) -> list[dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for (ns, pod), gpus in idle.items():
        if namespaces is not None and ns not in namespaces:
            continue
        row = out.setdefault(ns, {"namespace": ns, "gpus": 0, "pods": []})
        row["gpus"] += gpus
        row["pods"].append(pod)
    for row in out.values():
        row["pods"].sort()
    return sorted(out.values(), key=lambda r: (-r["gpus"], r["namespace"]))


def fragmentation(reader: Reader, rows: Sequence[dict[str, Any]],
                  workloads: Sequence[pending_all.PendingWorkload]) -> dict[str, Any]:
    """Free GPUs (``nodes``' rows: Ready, schedulable) that no pending GPU pod can use: on
    a node where none of them passes every filter (its GPUs too few, a taint, a selector).
    One representative pod per workload, the oldest ``SIMULATED`` workloads."""
    free = {r["node"]: float(r["free"]) for r in rows
            if r.get("free") and r.get("ready") and not r.get("cordoned")}
    out: dict[str, Any] = {"free": sum(free.values()), "free_nodes": len(free),
                           "largest_free": max(free.values(), default=0.0)}
    reps = [p for p in (_representative(w) for w in sorted(
        workloads, key=lambda w: (w.since() or "~", w.namespace, w.workload)))
        if p is not None and main_gpu_request(p)[0] is not None]
    out["pending"] = len(reps)
    out["asks"] = sorted({main_gpu_request(p)[1] for p in reps})
    if not reps or not free:
        out["stranded"] = None if not reps else 0.0  # nothing waits: spare, not stranded
        out["nodes"] = []
        return out
    by_name = {name_of(n): n for n in reader.list("Node")}
    candidates = [by_name[n] for n in free if n in by_name]
    pods_by_node = reader.pods_on(free)
    usable: set[str] = set()
    for pod in reps[:SIMULATED]:
        res = main_gpu_request(pod)[0]
        usable |= {f.node for f in simulate(pod, candidates, pods_by_node, gpu_resource=res)
                   if f.fits}
        if len(usable) == len(candidates):
            break
    stranded = sorted(((n, g) for n, g in free.items() if n not in usable),
                      key=lambda ng: (-ng[1], ng[0]))
    out["stranded"] = sum(g for _, g in stranded)
    out["stranded_nodes"] = len(stranded)
    out["simulated"] = min(len(reps), SIMULATED)
    out["nodes"] = [{"node": n, "pool": pool_of(by_name.get(n)), "free": g}
                    for n, g in stranded[:NODES_SHOWN]]
    return out


def _representative(w: pending_all.PendingWorkload) -> Obj | None:
    if w.pods:
        return sorted(w.pods, key=name_of)[0]
    return w.template
