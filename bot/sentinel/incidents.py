"""Incidents: one record per (cluster, detector, group) in the store, so a restart or a second
replica neither duplicates nor forgets them.

Several clusters (``gpubot serve`` with ``clusters``) share the one store: each cluster's
sentinel keeps its own book (``IncidentBook(store, cluster="prod")``), whose records carry
the cluster and whose keys include it, so two clusters' incidents about a node of the same
name are two incidents. One cluster (no ``clusters`` setting) has the cluster ``""``: the
keys and records of before. The fleet's first cluster also takes over those records, so a
bot that moves to a ``clusters`` config carries on its open incidents.

``IncidentBook.sync(due, now)`` (the leader only) makes the store agree with what has lasted
long enough: a new group opens an incident, a group whose members or GPUs changed updates it,
an open incident whose group is gone is resolved (with its duration and GPU-hours). A group
back within ``quiet_for`` of its resolution re-opens the same record, so its Slack thread is
the same; later, the old record goes to the ``incident-log`` collection (what the digest
reads) and a new one starts.

``writes`` counts the store writes the book has made or tried (its own: the leader's), so
the sentinel can keep what it last read until then (``known``: the argument ``open_groups``,
``unposted`` and ``sync`` take instead of reading the store again).

Publishing is separate: every visible change bumps ``rev``; the publisher (Slack threads, the
CLI's printer) is handed each incident whose ``posted.rev`` is behind and saves what it
posted with ``mark_posted``. A publisher that fails (Slack down) leaves ``posted`` behind,
so the next tick tries again: nothing is lost, and nothing is posted twice.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from bot.sentinel.watcher import GroupKey, Seen
from bot.store import Record, Store
from handlers.sentinel.detectors import REGISTRY

COLLECTION = "incidents"
LOG = "incident-log"
MAX_MEMBERS = 200  # kept per incident; `members_total` counts them all
MAX_OPEN = 1000  # records read per sync


def incident_key(detector: str, group: str, cluster: str = "") -> str:
    """The record's key; no cluster: the key of before clusters existed."""
    text = f"{detector}\0{group}" if not cluster else f"{cluster}\0{detector}\0{group}"
    return hashlib.sha256(text.encode()).hexdigest()[:40]


@dataclass
class Incident:
    """An incident record's data, typed."""

    key: str
    detector: str
    group: str
    title: str
    state: str  # "open" | "resolved"
    opened: float  # when the incident was opened (the sentinel's clock)
    since: float  # when its earliest member began (the objects' own timestamps)
    updated: float
    members: dict[str, dict[str, Any]]  # subject -> gpus, summary, since, node, pool, ...
    members_total: int
    gpus: float  # GPUs it costs now (0 once resolved)
    peak: float
    gpu_seconds: float  # up to `accounted`
    accounted: float
    resolved: float | None = None
    reopened: int = 0
    rev: int = 1  # bumped on every change the card shows
    posted: dict[str, Any] = field(default_factory=dict)  # the publisher's: rev, channel, ts
    cluster: str = ""  # the fleet's cluster it is about; "": the one cluster
    version: str = ""  # the store record's

    def gpu_hours(self, now: float) -> float:
        running = self.gpus * max(now - self.accounted, 0.0) if self.state == "open" else 0.0
        return (self.gpu_seconds + running) / 3600.0

    def duration(self, now: float) -> float:
        end = self.resolved if self.state == "resolved" and self.resolved else now
        return max(end - self.since, 0.0)

    @property
    def pools(self) -> list[str]:
        return sorted({str(m["pool"]) for m in self.members.values() if m.get("pool")})

    @property
    def namespaces(self) -> list[str]:
        return sorted({str(m["namespace"]) for m in self.members.values()
                       if m.get("namespace")})

    def diagnose(self, limit: int = 3) -> list[tuple[str, str]]:
        """The (command, target) pairs its thread runs: its members' first few, unique."""
        out: list[tuple[str, str]] = []
        for m in sorted(self.members.values(), key=lambda m: (-float(m["gpus"]),
                                                              str(m["summary"]))):
            pair = (str(m["diagnose"][0]), str(m["diagnose"][1]))
            if pair not in out:
                out.append(pair)
            if len(out) == limit:
                break
        return out

    def to_data(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k not in ("key", "version")}

    @classmethod
    def from_record(cls, rec: Record) -> Incident:
        data = {k: v for k, v in rec.data.items() if k in cls.__dataclass_fields__}
        return cls(key=rec.key, version=rec.version, **data)


def _member(s: Seen) -> dict[str, Any]:
    o = s.obs
    return {"gpus": o.gpus, "summary": o.summary, "since": s.start(), "node": o.node,
            "pool": o.pool, "namespace": o.namespace, "diagnose": list(o.diagnose),
            "objects": [str(r) for r in o.objects], "evidence": list(o.evidence[:6])}


def _members(seen: Sequence[Seen]) -> dict[str, dict[str, Any]]:
    ordered = sorted(seen, key=lambda s: (-s.obs.gpus, s.obs.subject))[:MAX_MEMBERS]
    return {s.obs.subject: _member(s) for s in ordered}


class IncidentBook:
    """One cluster's incidents (``cluster``: its name in the fleet, ``""``: the one cluster);
    ``legacy``: also the records of no cluster (the fleet's first cluster takes them over)."""

    def __init__(self, store: Store, quiet_for: float = 900.0, *, cluster: str = "",
                 legacy: bool = False) -> None:
        self.store = store
        self.quiet_for = quiet_for
        self.cluster = cluster
        self.legacy = legacy
        self.writes = 0  # store writes made or tried (a failed one may have changed it too)

    def owns(self, inc: Incident) -> bool:
        """Whether ``inc`` is this book's cluster's."""
        return inc.cluster == self.cluster or (self.legacy and not inc.cluster)

    # -- reading ----------------------------------------------------------------------------

    def all(self) -> list[Incident]:
        return [i for i in (Incident.from_record(r)
                            for r in self.store.list(COLLECTION, limit=MAX_OPEN))
                if self.owns(i)]

    def open(self) -> list[Incident]:
        return [i for i in self.all() if i.state == "open"]

    def open_groups(self, known: Sequence[Incident] | None = None) -> frozenset[GroupKey]:
        incidents = self.all() if known is None else known
        return frozenset((i.detector, i.group) for i in incidents if i.state == "open")

    def history(self, limit: int = 500) -> list[Incident]:
        """Every cluster's incidents archived from the live collection, newest first."""
        return [Incident.from_record(r) for r in self.store.list(LOG, limit=limit)]

    def unposted(self, known: Sequence[Incident] | None = None) -> list[Incident]:
        incidents = self.all() if known is None else known
        return [i for i in incidents if (i.posted or {}).get("rev") != i.rev]

    # -- writing (the leader) -------------------------------------------------------------

    def sync(self, due: Mapping[GroupKey, Sequence[Seen]], now: float,
             known: Sequence[Incident] | None = None) -> list[Incident]:
        """Make the store agree with ``due``; the incidents that changed. ``known``: the
        store's incidents as last read (a stale one's write fails on its version)."""
        changed: list[Incident] = []
        # Copies: an update changes the incident before it writes, and ``known`` may be
        # what another thread reads (the sentinel's ``open_now``).
        current = {(i.detector, i.group): replace(i)
                   for i in (self.all() if known is None else known)}
        for (det, group), seen in due.items():
            inc = current.get((det, group))
            if inc is not None and inc.state == "resolved" and inc.resolved is not None \
                    and now - inc.resolved > self.quiet_for:
                self._archive(inc)
                inc = None
            out = self._open(det, group, seen, now) if inc is None else \
                self._update(inc, seen, now)
            if out is not None:
                changed.append(out)
        for (det, group), inc in current.items():
            if (det, group) in due:
                continue
            if inc.state == "open":
                out = self._resolve(inc, now)
                if out is not None:
                    changed.append(out)
            elif inc.resolved is not None and now - inc.resolved > self.quiet_for \
                    and (inc.posted or {}).get("rev") == inc.rev:
                self._archive(inc)  # quiet long enough, and its card says so
        return changed

    def _open(self, det: str, group: str, seen: Sequence[Seen], now: float) -> Incident | None:
        members = _members(seen)
        gpus = sum(s.obs.gpus for s in seen)
        title = REGISTRY[det].title if det in REGISTRY else det
        # The cost so far counts from when each member began (its lost GPUs or its wait),
        # not from when the threshold let the incident open: the card says "since" that.
        cost = sum(s.obs.gpus * max(now - s.start(), 0.0) for s in seen)
        inc = Incident(incident_key(det, group, self.cluster), det, group, title, "open", now,
                       min(s.start() for s in seen), now, members, len(seen), gpus, gpus,
                       cost, now, cluster=self.cluster)
        self.writes += 1
        if not self.store.create(COLLECTION, inc.key, inc.to_data()):
            return None  # another replica opened it first: next sync updates it
        return self._reread(inc.key)

    def _update(self, inc: Incident, seen: Sequence[Seen], now: float) -> Incident | None:
        members = _members(seen)
        gpus = sum(s.obs.gpus for s in seen)
        visible = (inc.state != "open" or gpus != inc.gpus or len(seen) != inc.members_total
                   or {k: m["summary"] for k, m in members.items()}
                   != {k: m["summary"] for k, m in inc.members.items()})
        if not visible:
            return None
        inc.gpu_seconds += inc.gpus * max(now - inc.accounted, 0.0) if inc.state == "open" \
            else 0.0
        inc.accounted = now
        if inc.state == "resolved":  # back within quiet_for: the same incident, re-opened
            inc.state, inc.resolved = "open", None
            inc.reopened += 1
        inc.members, inc.members_total, inc.gpus = members, len(seen), gpus
        inc.cluster = self.cluster  # a record of no cluster, taken over, is this cluster's
        inc.peak = max(inc.peak, gpus)
        inc.since = min([inc.since, *(s.start() for s in seen)])
        inc.updated, inc.rev = now, inc.rev + 1
        return self._save(inc)

    def _resolve(self, inc: Incident, now: float) -> Incident | None:
        inc.gpu_seconds += inc.gpus * max(now - inc.accounted, 0.0)
        inc.accounted = now
        inc.state, inc.resolved, inc.gpus = "resolved", now, 0.0
        inc.updated, inc.rev = now, inc.rev + 1
        return self._save(inc)

    def _archive(self, inc: Incident) -> None:
        self.writes += 1
        self.store.create(LOG, f"{inc.key}-{int(inc.opened)}", inc.to_data())
        self.store.delete(COLLECTION, inc.key, inc.version)

    def _save(self, inc: Incident) -> Incident | None:
        self.writes += 1
        if not self.store.update(COLLECTION, inc.key, inc.to_data(), inc.version):
            return None  # changed under us (another replica): the next sync sees it
        return self._reread(inc.key)

    def _reread(self, key: str) -> Incident | None:
        rec = self.store.get(COLLECTION, key)
        return Incident.from_record(rec) if rec is not None else None

    def mark_posted(self, inc: Incident, posted: Mapping[str, Any]) -> bool:
        """Save what the publisher posted for ``inc`` (its ``rev`` among it)."""
        rec = self.store.get(COLLECTION, inc.key)
        if rec is None:
            return False
        data = dict(rec.data)
        data["posted"] = dict(posted)
        self.writes += 1
        return self.store.update(COLLECTION, inc.key, data, rec.version)
