"""The sentinel's eyes: every detector's observations, kept current from watch events.

``changed(kind, namespace, name)`` is what the watch cache calls for each object that really
changed (a heartbeat that changes nothing a handler reads does not call it); it only notes
the key. ``evaluate()`` (the sentinel's thread) runs the detectors on the noted objects alone,
so the cost follows the churn, not the cluster's size. ``relisted(kind)`` (a 410 re-list, the
first sync) evaluates every object of the kind once.

``poll()`` (the sentinel's timer, only with a metrics source) asks Prometheus for the polled
detectors' observations (``handlers/sentinel/polled.py``) and replaces theirs with them. A
Prometheus that cannot answer is noted (``metrics_error``) and they keep what they last saw,
so an outage neither opens nor resolves their incidents; the watch-based ones go on.

``due(now, thresholds, open_groups)``: the observations that have lasted their detector's
threshold (from the object's own timestamp when it has one, else from when it was first
seen), by incident group; an observation joins a group that is already open at once.

A detector with a ``relevance`` (``handlers/sentinel/detectors.py``) runs only on the objects
whose answer is yes; each object's answer is kept (``Answers``) while the subtrees its test
read are the same ones. Under the full-size benchmark's churn (1,500 pod restarts a second)
that spares the stack-down detector's look at the status of every pod that is not a GPU
stack pod.

``stats`` keeps the thread CPU time each detector took, for ``/metrics``.
"""

from __future__ import annotations

import logging
import operator
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from handlers.dra import slice_devices
from handlers.errors import GpubotError
from handlers.ledger import dra_gpus
from handlers.runtime.source import MetricsError, MetricsSource
from handlers.sentinel.detectors import REGISTRY, Detector, Observation, Relevance
from handlers.view import ClusterView, Obj, ViewError

log = logging.getLogger("gpubot.sentinel")

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
    by_detector: dict[str, float] = field(default_factory=dict)  # thread CPU time
    runs: dict[str, int] = field(default_factory=dict)  # evaluations (or polls) of each

    def add(self, detector: str, seconds: float) -> None:
        self.by_detector[detector] = self.by_detector.get(detector, 0.0) + seconds
        self.runs[detector] = self.runs.get(detector, 0) + 1


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

    def pod(self, namespace: str, name: str) -> Obj | None:
        try:
            return self.view.get("Pod", name, namespace)
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


class Answers:
    """A ``Relevance``'s answer per object, kept while the subtrees its test read are the
    same objects (held here, so that no other object can take their ids meanwhile).

    A tuple of references, a dict slot and the key per object: about 170 bytes, 25 MB for
    150,000 pods. (One tuple per distinct set of subtrees, shared by a controller's
    replicas, was smaller where pods share them and bigger where they do not.)
    """

    def __init__(self, relevance: Relevance) -> None:
        self.relevance = relevance
        self._yes: dict[Key, tuple[object, ...]] = {}
        self._no: dict[Key, tuple[object, ...]] = {}
        self.tests = 0  # times the test ran (an object new, or its subtrees changed)

    def __call__(self, key: Key, obj: Obj) -> bool:
        inputs = self.relevance.inputs(obj)
        was = self._no.get(key)
        if was is not None and all(map(operator.is_, was, inputs)):
            return False
        was = self._yes.get(key)
        if was is not None and all(map(operator.is_, was, inputs)):
            return True
        self.tests += 1
        answer = self.relevance.test(obj)
        (self._yes if answer else self._no)[key] = inputs
        (self._no if answer else self._yes).pop(key, None)
        return answer

    def forget(self, key: Key) -> None:
        self._yes.pop(key, None)
        self._no.pop(key, None)

    def keys(self) -> set[Key]:
        return self._yes.keys() | self._no.keys()


class Watcher:
    def __init__(self, view: ClusterView, detectors: Iterable[Detector] | None = None,
                 clock: Callable[[], float] = time.time, *,
                 metrics: MetricsSource | None = None) -> None:
        self.view = view
        chosen = list(REGISTRY.values() if detectors is None else detectors)
        self.detectors = {d.name: d for d in chosen if not d.needs_metrics}
        # Polled from Prometheus: only where one is configured.
        self.metrics = metrics
        self.polled = {d.name: d for d in chosen
                       if d.needs_metrics and d.poll is not None} if metrics else {}
        self.clock = clock
        # The kinds the detectors are evaluated on or depend on (asked on every watch
        # event), and the detectors of each kind: worked out once.
        self.kinds = frozenset(k for d in self.detectors.values() for k in (d.kind, *d.also))
        self._evaluated = frozenset(d.kind for d in self.detectors.values())
        self._by_kind: dict[str, list[Detector]] = {}
        for d in self.detectors.values():
            self._by_kind.setdefault(d.kind, []).append(d)
        self.seen: dict[str, dict[str, Seen]] = {
            name: {} for name in (*self.detectors, *self.polled)}
        self.answers = {name: Answers(d.relevance) for name, d in self.detectors.items()
                        if d.relevance is not None}
        self._look = _Lookup(view)
        self._lock = threading.Lock()
        self._dirty: dict[str, set[Key]] = {}
        self._full: set[str] = set()
        self.stats = Stats()
        self.errors: list[str] = []  # the last evaluation's unreadable kinds
        self.metrics_error: str | None = None  # why the last poll could not answer
        self.polled_at: float | None = None  # the sentinel's clock

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
        # The objects to evaluate, by kind; then each detector over them at once (its time).
        batches: list[tuple[str, list[tuple[Key, str, Obj | None]]]] = []
        for kind in sorted(full):
            if kind not in self._evaluated:
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
                answers = self.answers.get(d.name)
                if answers is not None:
                    for k in answers.keys() - keys.keys():
                        answers.forget(k)
            batches.append((kind, [(k, subject(kind, *k), o) for k, o in keys.items()]))
            dirty.pop(kind, None)
        for kind, keys2 in dirty.items():
            if kind not in self._evaluated:
                continue
            batch: list[tuple[Key, str, Obj | None]] = []
            for k in keys2:
                ns, name = k
                try:
                    batch.append((k, subject(kind, ns, name), self.view.get(kind, name,
                                                                          ns or None)))
                except ViewError as err:
                    self.errors.append(str(err))
            batches.append((kind, batch))
        n = 0
        for kind, objects in batches:
            if not objects:
                continue
            for d in self._of(kind):
                began = time.thread_time()
                answers = self.answers.get(d.name)
                for k, key, obj in objects:
                    if answers is not None:
                        if obj is None:
                            answers.forget(k)
                        elif not self._relevant(answers, k, obj):  # its verdict is None
                            self.seen[d.name].pop(key, None)
                            continue
                    self._observe(d, key, obj)
                self.stats.add(d.name, time.thread_time() - began)
            n += len(objects)
        self.stats.evaluated += n
        self.stats.seconds += time.thread_time() - started
        return n

    @staticmethod
    def _relevant(answers: Answers, key: Key, obj: Obj) -> bool:
        try:
            return answers(key, obj)
        except (GpubotError, ValueError, TypeError, KeyError):
            return True  # an odd object: the detector says what is wrong with it

    def _of(self, kind: str) -> list[Detector]:
        return self._by_kind.get(kind, [])

    def _observe(self, d: Detector, key: str, obj: Obj | None) -> None:
        seen = self.seen[d.name]
        try:
            obs = d.observe(self._look, obj) if obj is not None else None
        except (GpubotError, ValueError, TypeError, KeyError) as err:
            # One odd object must not stop the others' detection.
            self.errors.append(f"{d.name} on {key}: {type(err).__name__}: {err}")
            obs = None
        if obs is None:
            seen.pop(key, None)
            return
        was = seen.get(key)
        seen[key] = Seen(obs, was.first_seen if was is not None else self.clock())

    # -- the timer: the detectors over metrics --------------------------------------------

    def poll(self) -> int:
        """Ask Prometheus for every polled detector's observations; how many there are."""
        if self.metrics is None or not self.polled:
            return 0
        now = self.clock()
        at = datetime.fromtimestamp(now, UTC)
        failed: list[str] = []
        n = 0
        for d in self.polled.values():
            assert d.poll is not None
            began = time.thread_time()
            try:
                found = d.poll(self.metrics, self._look, at)
            except MetricsError as err:
                failed.append(f"{d.name}: {err}")
                continue  # what it last saw stands until Prometheus answers again
            except (GpubotError, ValueError, TypeError, KeyError) as err:
                failed.append(f"{d.name}: {type(err).__name__}: {err}")
                continue
            finally:
                self.stats.add(d.name, time.thread_time() - began)
            self._replace(d.name, found, now)
            n += len(found)
        error = "; ".join(failed) or None
        if error and error != self.metrics_error:
            log.warning("sentinel: the detectors over metrics keep what they last saw: %s",
                        error)
        elif self.metrics_error and not error:
            log.info("sentinel: %s answers again", self.metrics.source)
        self.metrics_error, self.polled_at = error, now
        return n

    def _replace(self, name: str, found: Iterable[Observation], now: float) -> None:
        before, fresh = self.seen[name], {}
        for obs in found:
            was = before.get(obs.subject)
            if was is not None and was.obs.since is not None and (
                    obs.since is None or was.obs.since < obs.since):
                # Still so: it began when the first poll that saw it could date it.
                obs = replace(obs, since=was.obs.since)
            fresh[obs.subject] = Seen(obs, was.first_seen if was is not None else now)
        self.seen[name] = fresh  # whole: /metrics reads it from another thread

    # -- what has lasted long enough ------------------------------------------------------

    def due(self, now: float, thresholds: Mapping[str, float],
            open_groups: frozenset[GroupKey] = frozenset()) -> dict[GroupKey, list[Seen]]:
        out: dict[GroupKey, list[Seen]] = {}
        for name, seen in self.seen.items():
            d = self.detectors.get(name) or self.polled[name]
            limit = thresholds.get(d.setting, d.default)
            for s in seen.values():
                gk = (name, s.obs.group)
                if gk in open_groups or now - s.start() >= limit:
                    out.setdefault(gk, []).append(s)
        return out


def _name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")
