"""The sentinel's eyes: every detector's observations, kept current from watch events.

``changed(kind, namespace, name)`` is what the watch cache calls for each object that really
changed (a heartbeat that changes nothing a handler reads does not call it); it only notes
the key. ``evaluate()`` (the sentinel's thread) runs the detectors on the noted objects alone,
so the cost follows the churn, not the cluster's size. ``relisted(kind)`` (a 410 re-list, the
first sync) evaluates every object of the kind once.

``due(now, thresholds, open_groups)``: the observations that have lasted their detector's
threshold (from the object's own timestamp when it has one, else from when it was first
seen), by incident group; an observation joins a group that is already open at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from handlers.dra import slice_devices
from handlers.errors import GpubotError
from handlers.ledger import dra_gpus
from handlers.sentinel.detectors import REGISTRY, Detector, Observation
from handlers.view import ClusterView, Obj, ViewError

Key = tuple[str, str]  # (namespace or "", name)
GroupKey = tuple[str, str]  # (detector, group)


def subject(kind: str, namespace: str, name: str) -> str:
    return f"{kind.lower()}/{namespace}/{name}" if namespace else f"{kind.lower()}/{name}"


@dataclass
class Seen:
    obs: Observation
    first_seen: float  # the sentinel's clock

    def start(self) -> float:
        return self.obs.since.timestamp() if self.obs.since is not None else self.first_seen


@dataclass
class Stats:
    evaluated: int = 0  # objects the detectors ran on
    seconds: float = 0.0  # thread CPU time spent evaluating
    by_detector: dict[str, float] = field(default_factory=dict)


class _Lookup:
    """What detectors may read beside their object: the view's nodes (the watch cache's on
    a live cluster), the GPUs ResourceSlices publish per node (worked out again only after a
    ResourceSlice changed)."""

    def __init__(self, view: ClusterView) -> None:
        self.view = view
        self._dra: dict[str, int] | None = None

    def node(self, name: str) -> Obj | None:
        try:
            return self.view.get("Node", name)
        except ViewError:
            return None

    def dra_gpus(self, node: str) -> int | None:
        if self._dra is None:
            try:
                slices = self.view.list("ResourceSlice")
            except ViewError:  # no DRA API, or not allowed: no node is served by DRA
                slices = []
            self._dra = dra_gpus(d for sl in slices for d in slice_devices(sl))
        return self._dra.get(node)

    def forget_dra(self) -> None:
        self._dra = None


class Watcher:
    def __init__(self, view: ClusterView, detectors: Iterable[Detector] | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.view = view
        self.detectors = {d.name: d for d in (REGISTRY.values() if detectors is None
                                              else detectors) if not d.needs_metrics}
        self.clock = clock
        self.seen: dict[str, dict[str, Seen]] = {name: {} for name in self.detectors}
        self._look = _Lookup(view)
        self._lock = threading.Lock()
        self._dirty: dict[str, set[Key]] = {}
        self._full: set[str] = set()
        self.stats = Stats()
        self.errors: list[str] = []  # the last evaluation's unreadable kinds

    @property
    def kinds(self) -> frozenset[str]:
        """Every kind the detectors are evaluated on or depend on."""
        out: set[str] = set()
        for d in self.detectors.values():
            out |= {d.kind, *d.also}
        return frozenset(out)

    # -- from the watch threads (cheap: only note what changed) ----------------------------

    def changed(self, kind: str, namespace: str, name: str) -> None:
        if kind not in self.kinds:
            return
        with self._lock:
            self._dirty.setdefault(kind, set()).add((namespace, name))

    def relisted(self, kind: str) -> None:
        if kind in self.kinds:
            with self._lock:
                self._full.add(kind)

    def scan(self) -> None:
        """Evaluate every object of every kind at the next ``evaluate``."""
        with self._lock:
            self._full |= self.kinds

    @property
    def pending(self) -> bool:
        with self._lock:
            return bool(self._dirty or self._full)

    # -- the sentinel's thread ------------------------------------------------------------

    def evaluate(self) -> int:
        """Run the detectors on what changed; the number of objects evaluated."""
        with self._lock:
            dirty, self._dirty = self._dirty, {}
            full, self._full = self._full, set()
        started = time.thread_time()
        for d in self.detectors.values():  # a kind a detector depends on changed
            if d.also & (full | dirty.keys()):
                full.add(d.kind)
        if "ResourceSlice" in full or "ResourceSlice" in dirty:
            self._look.forget_dra()
        self.errors = []
        n = 0
        for kind in sorted(full):
            if kind not in self._evaluated_kinds():
                continue
            try:
                objs = self.view.list(kind)
            except ViewError as err:
                self.errors.append(str(err))
                continue
            keys = {(str((o.get("metadata") or {}).get("namespace") or ""), _name(o)): o
                    for o in objs}
            for d in self._of(kind):
                gone = set(self.seen[d.name]) - {subject(kind, *k) for k in keys}
                for s in gone:
                    del self.seen[d.name][s]
            for (ns, name), obj in keys.items():
                self._observe(kind, ns, name, obj)
                n += 1
            dirty.pop(kind, None)
        for kind, keys2 in dirty.items():
            if kind not in self._evaluated_kinds():
                continue
            for ns, name in keys2:
                try:
                    now = self.view.get(kind, name, ns or None)
                except ViewError as err:
                    self.errors.append(str(err))
                    continue
                self._observe(kind, ns, name, now)
                n += 1
        self.stats.evaluated += n
        self.stats.seconds += time.thread_time() - started
        return n

    def _evaluated_kinds(self) -> frozenset[str]:
        return frozenset(d.kind for d in self.detectors.values())

    def _of(self, kind: str) -> list[Detector]:
        return [d for d in self.detectors.values() if d.kind == kind]

    def _observe(self, kind: str, ns: str, name: str, obj: Obj | None) -> None:
        key = subject(kind, ns, name)
        for d in self._of(kind):
            seen = self.seen[d.name]
            try:
                obs = d.observe(self._look, obj) if obj is not None else None
            except (GpubotError, ValueError, TypeError, KeyError) as err:
                # One odd object must not stop the others' detection.
                self.errors.append(f"{d.name} on {key}: {type(err).__name__}: {err}")
                obs = None
            if obs is None:
                seen.pop(key, None)
                continue
            was = seen.get(key)
            seen[key] = Seen(obs, was.first_seen if was is not None else self.clock())

    # -- what has lasted long enough ------------------------------------------------------

    def due(self, now: float, thresholds: Mapping[str, float],
            open_groups: frozenset[GroupKey] = frozenset()) -> dict[GroupKey, list[Seen]]:
        out: dict[GroupKey, list[Seen]] = {}
        for name, seen in self.seen.items():
            limit = thresholds.get(self.detectors[name].setting, self.detectors[name].default)
            for s in seen.values():
                gk = (name, s.obs.group)
                if gk in open_groups or now - s.start() >= limit:
                    out.setdefault(gk, []).append(s)
        return out


def _name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")
