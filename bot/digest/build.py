"""The digest's inputs: the sentinel's incidents of the window, read from the store, and
the report built from them and a view (``handlers/digest.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

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
    """Every incident open or resolved within the last ``hours``: the live collection's
    and the archived ones (``incident-log``)."""
    start = now - hours * 3600
    out = []
    for inc in [*book.all(), *book.history(limit=HISTORY)]:
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
