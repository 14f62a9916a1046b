"""The digest's inputs: the sentinel's incidents of the window, read from the store, and
the report built from them and a view (``handlers/digest.py``); several clusters: one
report per cluster, and ``fleet_rows`` sums them up."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from bot.sentinel.incidents import Incident, IncidentBook
from handlers.digest import PastIncident
from handlers.view import Reader

if TYPE_CHECKING:
    from handlers.model import Diagnosis
    from handlers.runtime.source import MetricsSource
    from handlers.view import ClusterView

HISTORY = 1000  # archived incidents read (newest first): a day's worth and more


def past(inc: Incident, now: float) -> PastIncident:
    resolved = inc.resolved if inc.state == "resolved" else None
    return PastIncident(
        inc.detector, inc.title, inc.group, inc.state, inc.since, inc.opened, resolved,
        inc.gpus, inc.peak, inc.gpu_hours(now), inc.members_total, tuple(inc.pools),
        tuple(inc.namespaces))


def past_incidents(book: IncidentBook, now: float, hours: float) -> list[PastIncident]:
    """The book's cluster's incidents open or resolved within the last ``hours``: the live
    collection's and the archived ones (``incident-log``)."""
    start = now - hours * 3600
    out = []
    archived = [i for i in book.history(limit=HISTORY) if book.owns(i)]
    for inc in [*book.all(), *archived]:
        p = past(inc, now)
        if p.end(now) >= start:
            out.append(p)
    return out


def build(view: ClusterView, book: IncidentBook | None, *,
          metrics: MetricsSource | None = None, hours: float = 24.0, top: int = 5,
          namespaces: frozenset[str] | None = None) -> Diagnosis:
    """The digest of ``view``; ``book``: the incident store (None: none was read)."""
    from handlers import digest

    reader = Reader(view, metrics=metrics)
    now = reader.now().timestamp()
    incidents = past_incidents(book, now, hours) if book is not None else None
    return digest.run(reader, incidents, hours=hours, top=top, namespaces=namespaces)


def fleet_rows(parts: Sequence[tuple[str, Diagnosis]]) -> list[dict[str, Any]]:
    """One row per cluster's digest, then the total: GPUs lost over the window (the most
    at once, the GPU-hours), lost now, free, and GPU work pending."""
    rows: list[dict[str, Any]] = []
    for name, diag in parts:
        lost = diag.details.get("lost") or []
        totals = diag.details.get("totals") or {}
        pending = diag.details.get("pending_total") or {}
        rows.append({"cluster": name,
                     "peak": sum(float(r["peak"]) for r in lost),
                     "gpu_hours": round(sum(float(r["gpu_hours"]) for r in lost), 2),
                     "lost_now": float(totals.get("lost", 0)),
                     "free": float(totals.get("free", 0)),
                     "pending_gpus": float(pending.get("gpus", 0)),
                     "pending": int(pending.get("workloads", 0))})
    if rows:
        total: dict[str, Any] = {"cluster": "total"}
        for key in ("peak", "gpu_hours", "lost_now", "free", "pending_gpus", "pending"):
            total[key] = sum(r[key] for r in rows)
        total["gpu_hours"] = round(total["gpu_hours"], 2)
        rows.append(total)
    return rows
