"""``WatchCache``: a list+watch mirror of a few kinds, for the long-running bot.

Per kind, one thread: list (paged), then watch from the list's resourceVersion (raw JSON
lines, ``allowWatchBookmarks``, ``timeoutSeconds``), applying ADDED / MODIFIED / DELETED.

- the server ends a watch after ``timeoutSeconds``: watch again from the last
  resourceVersion seen (bookmarks keep it fresh), no re-list;
- 410 Gone (on the request or as an ERROR event): re-list at once;
- any other ERROR event, a dropped connection, a timeout: re-list after a backoff
  (exponential with jitter, ``backoff``..``max_backoff``). A kind stays served from the
  cache while a re-list is pending; a failed re-list marks it not synced, and ``LiveView``
  reads it from the server again (where the failure surfaces as a ``ViewError``).
- a kind whose API is not served (a CRD that is not installed) is synced and empty, and
  listed again every ``missing_retry`` seconds.

Memory: objects are kept lean (``bot/live/lean.py``: unread fields dropped, equal subtrees
shared, short strings interned); Events keep only the newest
``max_events`` (by arrival; a re-list keeps the newest by event time). ``stats()`` reports
objects and JSON bytes per kind; Python dicts take several times the JSON size in memory.
A list of ``freeze_at`` objects or more is moved out of the cycle collector's reach
(``gc.freeze``) once kept: see ``_relist``.
"""

from __future__ import annotations

import builtins
import contextlib
import gc
import logging
import random
import socket
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson
import urllib3

from bot.snapshot.events import event_time, involved_key
from handlers.kube.selectors import (
    match_fields,
    match_labels,
    parse_field_selector,
    parse_label_selector,
)
from handlers.memo import Memos
from handlers.view import Obj

from .errors import ApiForbidden, Op
from .kinds import KindInfo, kind_info
from .lean import Leaner
from .objects import Misfits, prepare
from .transport import MAX_RESPONSE, Response, RetryPolicy, Transport, gc_paused

log = logging.getLogger(__name__)

DEFAULT_KINDS = ("Node", "Pod", "Event", "Namespace", "DaemonSet", "ResourceQuota", "LimitRange",
                 "ClusterPolicy", "ConfigMap",
                 # change with every queued job and every DRA pod
                 "Workload", "ResourceClaim", "ResourceSlice")
# Kinds kept for one namespace only, as the bot's RBAC grants them (deploy/base/rbac.yaml):
# the GPU operator's ConfigMaps (device-plugin and sharing configs). Reads of any other
# namespace go to the server.
DEFAULT_NAMESPACES = {"ConfigMap": "gpu-operator"}
# Label keys indexed per kind at most: each index costs a scan to build and memory to keep,
# and the bot's own selectors use a handful of keys.
MAX_LABEL_INDEXES = 8

_Key = tuple[str, str]  # (namespace or "", name)


_IndexFn = Callable[[_Key, Obj], Hashable | None]


def _index_fns(info: KindInfo) -> dict[str, _IndexFn]:
    """Secondary indexes: what a diagnosis narrows by (a namespace, a node's pods, an
    object's events), so a warm read does not scan every object of the kind."""
    fns: dict[str, _IndexFn] = {}
    if info.namespaced:
        fns["namespace"] = lambda k, o: k[0]
    if info.kind == "Pod":
        fns["node"] = lambda k, o: str((o.get("spec") or {}).get("nodeName") or "")
    if info.kind == "Event":
        fns["about"] = lambda k, o: (about[:2] if (about := involved_key(o)) else None)
    return fns



class Listener(Protocol):
    """Told of the cache's changes (``WatchCache.listen``): the sentinel's watcher."""

    def changed(self, kind: str, namespace: str, name: str) -> None: ...

    def relisted(self, kind: str) -> None: ...

@dataclass
class _Store:
    info: KindInfo
    max_objects: int | None
    namespace: str | None = None  # kept for this namespace only
    lock: threading.Lock = field(default_factory=threading.Lock)
    objects: dict[_Key, Obj] = field(default_factory=dict)
    sizes: dict[_Key, int] = field(default_factory=dict)
    nbytes: int = 0
    synced: bool = False
    missing: bool = False
    forbidden: bool = False  # the last list was refused (403): reads go to the server
    resource_version: str = ""
    lists: int = 0
    watches: int = 0
    changes: int = 0
    evicted: int = 0
    errors: int = 0
    last_error: str | None = None
    said: str | None = None  # the error last logged as a warning since the kind last synced
    fns: dict[str, _IndexFn] = field(init=False)
    # index name -> value -> keys (a dict as an ordered set)
    indexes: dict[str, dict[Hashable, dict[_Key, None]]] = field(init=False)
    # (index name, value) -> the tuple lookup() handed out, dropped when the entry changes
    looked_up: dict[tuple[str, Hashable], tuple[Obj, ...]] = field(default_factory=dict)
    # label key -> value -> keys: built by the first selector on that key, then kept current
    labels: dict[str, dict[str, dict[_Key, None]]] = field(default_factory=dict)
    # projects and shares what is kept; used by this kind's watch thread only
    leaner: Leaner = field(default_factory=Leaner)

    def __post_init__(self) -> None:
        self.fns = _index_fns(self.info)
        self.indexes = {name: {} for name in self.fns}

    def key(self, obj: Obj) -> _Key:
        meta = obj.get("metadata") or {}
        ns = str(meta.get("namespace") or "") if self.info.namespaced else ""
        return ns, str(meta.get("name") or "")

    def lookup(self, index: str, value: Hashable) -> tuple[Obj, ...]:
        """Objects whose ``index`` value is ``value``; call with the lock held.

        The tuple is kept and handed out again until an object joins, leaves or is replaced
        in that entry (a warm diagnosis reads the pods of a thousand nodes this way): the
        same tuple means the same objects, so a NodeInfo built on it is still current.
        """
        found = self.looked_up.get((index, value))
        if found is None:
            keys = self.indexes[index].get(value, {})
            found = self.looked_up[(index, value)] = tuple(self.objects[k] for k in keys)
        return found

    def lookup_label(self, key: str, values: Iterable[str]) -> builtins.list[Obj] | None:
        """Objects whose label ``key`` has one of ``values``, or None when ``key`` is not
        indexed and no more label indexes may be built; call with the lock held."""
        index = self.labels.get(key)
        if index is None:
            if len(self.labels) >= MAX_LABEL_INDEXES:
                return None
            index = self.labels[key] = {}
            for k, obj in self.objects.items():
                self._index_label(key, index, k, obj)
        return [self.objects[k] for v in sorted(values) for k in index.get(v, {})]

    def _index_label(self, key: str, index: dict[str, dict[_Key, None]], k: _Key,
                     obj: Obj) -> None:
        value = ((obj.get("metadata") or {}).get("labels") or {}).get(key)
        if value is not None:
            index.setdefault(value, {})[k] = None

    def replace(self, items: builtins.list[Obj], version: str) -> None:
        if self.max_objects is not None and len(items) > self.max_objects:
            items.sort(key=event_time)
            dropped = len(items) - self.max_objects
            items = items[dropped:]
        else:
            dropped = 0
        sized = [(self.key(o), o, _size(o)) for o in items]
        with self.lock:
            self.objects = {k: o for k, o, _ in sized}
            self.sizes = {k: n for k, _, n in sized}
            self.nbytes = sum(self.sizes.values())
            self.evicted += dropped
            self.indexes = {name: {} for name in self.fns}
            self.looked_up = {}
            self.labels = {key: {} for key in self.labels}
            for k, o, _ in sized:
                self._index(k, o)
            self.resource_version = version
            self.synced = True
            self.lists += 1

    def kept(self, obj: Obj) -> Obj:
        """The cached object instead of ``obj`` when they are equal: a re-list (410 Gone)
        then holds one copy of every unchanged object, not two, and the memos built on
        them (NodeInfos, traits) stay valid."""
        with self.lock:
            old = self.objects.get(self.key(obj))
        return old if old is not None and old == obj else obj

    def put(self, obj: Obj) -> bool:
        """Keep ``obj``; False when it equals the kept one (nothing changed)."""
        k = self.key(obj)
        with self.lock:
            if self.objects.get(k) == obj:
                # Nothing a handler reads changed (a node's heartbeat): keep the object
                # and what was built on it (indexes, NodeInfos, traits).
                self.changes += 1
                return False
        n = _size(obj)
        with self.lock:
            self._remove(k)  # re-inserted at the end: dict order is arrival order
            self.objects[k] = obj
            self.sizes[k] = n
            self.nbytes += n
            self._index(k, obj)
            if self.max_objects is not None:
                while len(self.objects) > self.max_objects:
                    self._remove(next(iter(self.objects)))
                    self.evicted += 1
            self.changes += 1
        return True

    def delete(self, obj: Obj) -> None:
        with self.lock:
            self._remove(self.key(obj))
            self.changes += 1

    def _remove(self, k: _Key) -> None:
        old = self.objects.pop(k, None)
        if old is None:
            return
        self.nbytes -= self.sizes.pop(k, 0)
        for name, fn in self.fns.items():
            value = fn(k, old)
            keys = self.indexes[name].get(value) if value is not None else None
            self.looked_up.pop((name, value), None)
            if keys is not None:
                keys.pop(k, None)
                if not keys:
                    del self.indexes[name][value]
        labels = (old.get("metadata") or {}).get("labels") or {}
        for key, index in self.labels.items():
            value = labels.get(key)
            keys = index.get(value) if value is not None else None
            if value is not None and keys is not None:
                keys.pop(k, None)
                if not keys:
                    del index[value]

    def _index(self, k: _Key, obj: Obj) -> None:
        for name, fn in self.fns.items():
            value = fn(k, obj)
            if value is not None:
                self.indexes[name].setdefault(value, {})[k] = None
                self.looked_up.pop((name, value), None)
        for key, index in self.labels.items():
            self._index_label(key, index, k, obj)


class WatchCache:
    """Kinds kept current by list+watch; reads are local once a kind is synced."""

    def __init__(
        self,
        api_client: Any,
        kinds: Iterable[str] = DEFAULT_KINDS,
        *,
        timeout: float = 10.0,
        watch_timeout: int = 300,
        max_events: int = 50_000,
        page_size: int = 500,
        backoff: float = 1.0,
        max_backoff: float = 30.0,
        missing_retry: float = 300.0,
        freeze_at: int = 10_000,
        retry: RetryPolicy | None = None,
        namespaces: Mapping[str, str] | None = None,
        misfits: Misfits | None = None,
        hold_max: float = 1.0,
    ) -> None:
        """``namespaces``: kind -> the one namespace kept of it (default
        ``DEFAULT_NAMESPACES``); other kinds are kept for the whole cluster. ``hold_max``:
        how long watch events may wait for diagnoses to end (see ``reading``)."""
        self.transport = Transport(api_client, timeout=timeout, retry=retry, unreachable_ttl=0)
        self.misfits = misfits or Misfits(f"API server {self.transport.server}")
        self.watch_timeout = watch_timeout
        self.page_size = page_size
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.missing_retry = missing_retry
        self.freeze_at = freeze_at
        only = DEFAULT_NAMESPACES if namespaces is None else namespaces
        self._stores = {
            k: _Store(kind_info(k), max_events if k == "Event" else None,
                      only.get(k) if kind_info(k).namespaced else None)
            for k in dict.fromkeys(kinds)
        }
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._streams: dict[str, urllib3.BaseHTTPResponse] = {}
        self._streams_lock = threading.Lock()
        self._started = time.monotonic()
        self.hold_max = hold_max
        self._hold = threading.Condition()
        self._readers = 0  # diagnoses reading now (see reading)
        self._held_since: float | None = None  # when watch events first waited for them
        # What diagnoses work out from the cached objects, kept as long as the cache: it
        # replaces an object that changes, never edits it (handlers/memo.py).
        self.memos = Memos()
        self._listeners: builtins.list[Listener] = []

    def listen(self, listener: Listener) -> None:
        """Tell ``listener`` of every object that really changed (``changed(kind,
        namespace, name)``, called on the kind's watch thread: it must only take note) and
        of every full list of a kind (``relisted(kind)``). Add listeners before ``start``."""
        self._listeners.append(listener)

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(self._stores)

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        if self._threads:
            return
        self._stop.clear()
        self._started = time.monotonic()
        for kind, store in self._stores.items():
            thread = threading.Thread(target=self._run, args=(store,), daemon=True,
                                      name=f"gpubot-watch-{kind}")
            thread.start()
            self._threads.append(thread)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop every watch (open streams are shut down) and wait for the threads."""
        self._stop.set()
        with self._hold:
            self._hold.notify_all()
        with self._streams_lock:
            streams = builtins.list(self._streams.values())
        for resp in streams:
            _interrupt(resp)
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        self._threads = [t for t in self._threads if t.is_alive()]

    def __enter__(self) -> WatchCache:
        self.start()
        return self

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        """While a diagnosis reads, watch events wait for it to end, as kube-scheduler
        schedules a pod on a snapshot of its cache: the diagnosis sees one state of the
        cluster, and does not share the interpreter with the watch threads (under churn
        they took a quarter of it). Events wait ``hold_max`` seconds at most, from the
        first that waited until no diagnosis is reading, so overlapping diagnoses cannot
        keep the cache from catching up."""
        with self._hold:
            self._readers += 1
        try:
            yield
        finally:
            with self._hold:
                self._readers -= 1
                if not self._readers:
                    self._held_since = None
                    self._hold.notify_all()

    def _wait_for_readers(self) -> None:
        with self._hold:
            now = time.monotonic()
            if self._held_since is None:
                self._held_since = now
            left = self._held_since + self.hold_max - now
            if left > 0:
                self._hold.wait_for(lambda: not self._readers or self._stop.is_set(), left)

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def synced(self, kind: str) -> bool:
        store = self._stores.get(kind)
        return store is not None and store.synced

    def serves(self, kind: str, namespace: str | None) -> bool:
        """Whether reads of ``kind`` in ``namespace`` (None: every namespace) are answered
        here: the kind is synced and kept for that namespace."""
        store = self._stores.get(kind)
        # A required group the server does not serve is an error to report, not "none".
        return store is not None and store.synced and not (
            store.missing and store.info.required) and (
            store.namespace is None or namespace == store.namespace)

    def settled(self) -> bool:
        """Every kind is synced or was refused (403): the bot's RBAC may leave kinds out,
        whose reads then go to the server and come back as "not checked". Readiness and
        warming wait for this, not for every kind to sync."""
        return all(s.synced or s.forbidden for s in self._stores.values())

    def failing(self) -> str | None:
        """Why the API server cannot be read now: the error of a kind whose list or watch
        has failed since it last listed (a kind RBAC refuses aside), or None."""
        for s in self._stores.values():
            with s.lock:
                if s.said is not None and not s.forbidden:
                    return s.said
        return None

    def wait_synced(self, timeout: float | None = None) -> bool:
        """True once every kind has been listed or refused (``settled``); False if
        ``timeout`` passed first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.settled():
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(0.01)
        return True

    # -- reads ------------------------------------------------------------------------------

    def list(
        self, kind: str, namespace: str | None = None, *, label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> builtins.list[Obj]:
        """Like ``ClusterView.list``. Raises ``SelectorError`` for a selector the local
        matcher does not support (``LiveView`` then asks the server)."""
        store = self._stores[kind]
        reqs = parse_label_selector(label_selector) if label_selector else ()
        fields = parse_field_selector(field_selector) if field_selector else ()
        wanted = {key: value for key, op, value in fields if op == "="}
        ns = namespace if store.info.namespaced else None
        # Narrow by an index: the node's pods, a label's values, the namespace, else scan.
        by_label = next((r for r in reqs if r.op in ("=", "in")), None)
        with store.lock:
            objs: Sequence[Obj] | None = None
            if "spec.nodeName" in wanted and "node" in store.indexes:
                objs = store.lookup("node", wanted["spec.nodeName"])
                if len(fields) == 1:
                    field_selector = None  # the index answered it: no need to match again
            elif by_label is not None:
                objs = store.lookup_label(by_label.key, by_label.values)
                if objs is not None and len(reqs) == 1:
                    label_selector = None  # the index answered it: no need to match again
            if objs is None:
                objs = (store.lookup("namespace", ns) if ns is not None
                        else builtins.list(store.objects.values()))
            elif ns is not None:
                objs = [o for o in objs if o["metadata"].get("namespace") == ns]
        if label_selector:
            objs = [o for o in objs
                    if match_labels(label_selector, (o.get("metadata") or {}).get("labels"))]
        if field_selector:
            objs = [o for o in objs if match_fields(field_selector, o)]
        return objs if isinstance(objs, builtins.list) else builtins.list(objs)

    def pods_on(self, nodes: Iterable[str]) -> dict[str, tuple[Obj, ...]]:
        """The pods bound to each node (by ``spec.nodeName``), in one pass; a node's tuple
        is the same object until its pods change."""
        store = self._stores["Pod"]
        with store.lock:
            return {n: store.lookup("node", n) for n in nodes}

    def get(self, kind: str, name: str, namespace: str | None = None) -> Obj | None:
        store = self._stores[kind]
        ns = (namespace or "") if store.info.namespaced else ""
        with store.lock:
            return store.objects.get((ns, name))

    def events(self, kind: str, name: str, namespace: str | None = None) -> builtins.list[Obj]:
        """Events about one object, oldest first; ``namespace=None`` matches any."""
        store = self._stores["Event"]
        with store.lock:
            found = store.lookup("about", (kind, name))
        return sorted((e for e in found if namespace is None
                       or (involved_key(e) or ("", "", ""))[2] == namespace), key=event_time)

    def stats(self) -> dict[str, Any]:
        """Objects and approximate JSON bytes per kind (and in all), sync state, counters."""
        kinds: dict[str, Any] = {}
        for kind, s in self._stores.items():
            with s.lock:
                kinds[kind] = {
                    "objects": len(s.objects), "bytes": s.nbytes, "synced": s.synced,
                    "missing": s.missing, "resourceVersion": s.resource_version,
                    "lists": s.lists, "watches": s.watches, "changes": s.changes,
                    "evicted": s.evicted, "errors": s.errors, "last_error": s.last_error,
                }
        return {
            "objects": sum(k["objects"] for k in kinds.values()),
            "bytes": sum(k["bytes"] for k in kinds.values()),
            "kinds": kinds,
            "requests": self.transport.stats(),
        }

    # -- the watch loop -----------------------------------------------------------------------

    def _run(self, store: _Store) -> None:
        failures = gone = 0
        relist = True
        while not self._stop.is_set():
            listing = False
            try:
                if relist:
                    listing = True
                    self._relist(store)
                    listing = relist = False
                    failures = 0
                    store.said = None
                    if store.missing:
                        self._stop.wait(self.missing_retry)
                        relist = True
                        continue
                outcome, lines = self._watch(store)
            except Exception as err:  # LiveError, urllib3 stream errors, bad JSON
                if self._stop.is_set():
                    return
                failures += 1
                delay = self._delay(failures)
                text = f"{type(err).__name__}: {err}"
                with store.lock:
                    store.errors += 1
                    store.last_error = text
                    repeated, store.said = store.said == text, text
                    if listing:
                        store.synced = False
                        store.forbidden = isinstance(err, ApiForbidden)
                # The same error again (a kind RBAC leaves out, every 30 s): said once.
                log.log(logging.DEBUG if repeated else logging.WARNING,
                        "watch cache %s: %s %s; listing again in %.1fs", store.info.kind,
                        "list failed:" if listing else "watch broke:", text, delay)
                relist = True
                self._stop.wait(delay)
                continue
            if outcome == "gone":
                # Re-list at once; but a server that answers every fresh list's
                # resourceVersion with 410 again must not make us list in a tight loop.
                relist = True
                gone = gone + 1 if lines <= 1 else 1
                if gone > 1:
                    self._stop.wait(self._delay(gone - 1))
                continue
            gone = 0
            if lines:
                failures = 0
            if outcome == "error":
                relist = True
                failures += 1
                self._stop.wait(self._delay(failures))
            elif not lines:
                # Ended with nothing at all: do not spin if the server keeps doing that.
                failures += 1
                self._stop.wait(min(self._delay(failures), 5.0))

    def _delay(self, failures: int) -> float:
        base = min(self.max_backoff, self.backoff * 2 ** max(0, failures - 1))
        return float(base * random.uniform(0.5, 1.0))

    def _relist(self, store: _Store) -> None:
        with gc_paused():
            got = None
            info = store.info
            # resource.k8s.io: the newest version the server serves (v1, v1beta2, v1beta1).
            for version in store.info.versions:
                info = store.info if version == store.info.version else store.info.at(version)
                op = Op("list", info.kind, info.group, info.plural, store.namespace,
                        info.namespaced)

                def keep(page: builtins.list[Obj], api_version: str,
                         info: KindInfo = info) -> builtins.list[Obj]:
                    return [store.kept(store.leaner.lean(info.kind, o,
                                                         store.objects.get(store.key(o))))
                            for o in prepare(info, page, api_version, self.misfits)]

                got = self.transport.list_all(op, info.path(store.namespace),
                                              page_size=self.page_size, each_page=keep)
                if got is not None:
                    if info is not store.info:  # watch that version from now on
                        store.info = KindInfo(info.kind, info.group, info.version,
                                              info.plural, info.namespaced,
                                              store.info.older, store.info.required)
                    break
            if got is None:
                store.missing = True
                store.replace([], "")
                return
            store.missing = store.forbidden = False
            items, version, _ = got
            store.replace(items, version)
            for listener in self._listeners:
                listener.relisted(store.info.kind)
            if store.lists == 1:
                log.info("watch cache: %s synced, %d objects in %.1f s", info.kind, len(items),
                         time.monotonic() - self._started)
            store.leaner.sweep()  # the replaced objects' subtrees
            if len(items) >= self.freeze_at:
                # Out of the cycle collector's sight: the first full collection after
                # syncing 150,000 pods walked every kept object with the GIL held (23 s, the
                # whole bot stalled). They are acyclic JSON, freed by refcounting when
                # replaced or deleted. (Freezing also pins any cyclic garbage of the moment,
                # so small lists, cheap to scan anyway, are not worth it.)
                gc.freeze()

    def _watch(self, store: _Store) -> tuple[str, int]:
        """Watch until the stream ends: ("ended" | "gone" | "error", lines read)."""
        info = store.info
        op = Op("watch", info.kind, info.group, info.plural, store.namespace, info.namespaced)
        path = info.path(store.namespace)
        query = {"watch": "true", "resourceVersion": store.resource_version,
                 "allowWatchBookmarks": "true", "timeoutSeconds": str(self.watch_timeout)}
        resp = self.transport.stream(op, path, query, read_timeout=self.watch_timeout + 30,
                                     accept=(410,))
        if isinstance(resp, Response):
            return "gone", 0
        with self._streams_lock:
            self._streams[info.kind] = resp
        store.watches += 1
        lines = 0
        clean = False
        try:
            if self._stop.is_set():
                return "ended", 0
            for line in _lines(resp):
                lines += 1
                self.transport.count(path, nbytes=len(line) + 1)
                if self._readers:
                    self._wait_for_readers()
                outcome = self._apply(store, line)
                if outcome is not None:
                    return outcome, lines
            clean = True
            return "ended", lines
        finally:
            with self._streams_lock:
                self._streams.pop(info.kind, None)
            if clean:
                resp.release_conn()  # read to the end: the connection can be reused
            else:
                resp.close()

    def _apply(self, store: _Store, line: bytes) -> str | None:
        event = orjson.loads(line)
        if not isinstance(event, dict):
            return "error"
        kind = event.get("type")
        obj = event.get("object")
        if not isinstance(obj, dict):
            return None
        if kind == "ERROR":
            with store.lock:
                store.errors += 1
                store.last_error = f"watch ERROR {obj.get('code')}: {obj.get('message')}"
            return "gone" if obj.get("code") == 410 else "error"
        meta = obj.get("metadata")
        version = str(meta.get("resourceVersion") or "") if isinstance(meta, dict) else ""
        if kind in ("ADDED", "MODIFIED"):
            fits = prepare(store.info, [obj], "", self.misfits)
            if fits:
                # Only this thread writes the store: its current version cannot change now.
                was = store.objects.get(store.key(fits[0]))
                if store.put(store.leaner.lean(store.info.kind, fits[0], was)):
                    self._tell(store, fits[0])
            elif isinstance(obj.get("metadata"), dict):
                store.delete(obj)  # its new version cannot be read: not the old one either
                self._tell(store, obj)
        elif kind == "DELETED" and isinstance(obj.get("metadata"), dict):
            store.delete(obj)
            self._tell(store, obj)
        if version:
            store.resource_version = version
        return None


    def _tell(self, store: _Store, obj: Obj) -> None:
        if self._listeners:
            ns, name = store.key(obj)
            for listener in self._listeners:
                listener.changed(store.info.kind, ns, name)


# Collector thresholds for a process that holds a synced cache: see settle_gc.
GC_THRESHOLDS = (100_000, 20, 10)


def settle_gc() -> None:
    """Once the cache has synced and the memos are warm (``handlers.warm``): what exists now
    is moved out of the cycle collector's sight, and the collector runs far less often.

    With the default thresholds (700, 10, 10), a bot whose cache takes 2,000 watch changes
    a second (the full-size churn benchmark) spent 27% of its time in the collector and
    warm why-pending's p50 went from 0.17 s to 1.1 s; with higher ones, 2% (and 0.4 s).
    Cached objects are acyclic and a diagnosis's Reader is freed by reference counting
    (tests/test_reader_lifetime.py); the rest of the cyclic garbage waits for the
    collector: young objects every 100,000 net allocations, all every 20 million.
    """
    gc.collect()  # the warm-up's own cyclic garbage, not to be frozen with the rest
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def _size(obj: Obj) -> int:
    return len(orjson.dumps(obj))


def _lines(resp: urllib3.BaseHTTPResponse) -> Iterator[bytes]:
    """Newline-separated JSON documents, as they arrive (a chunked stream yields each chunk
    when it comes; a plain one is read with ``read1`` so a small event is not held back)."""
    if getattr(resp, "chunked", False) and hasattr(resp, "read_chunked"):
        chunks: Iterable[bytes] = resp.read_chunked(decode_content=True)
    elif hasattr(resp, "read1"):
        chunks = iter(lambda: resp.read1(65536), b"")
    else:  # pragma: no cover - urllib3 < 2.2
        chunks = resp.stream(1, decode_content=True)
    buf = b""
    for chunk in chunks:
        buf += chunk
        if b"\n" not in chunk:
            if len(buf) > MAX_RESPONSE:  # one event that never ends: relist instead
                raise ValueError(f"a watch event over {MAX_RESPONSE >> 20} MB")
            continue
        *done, buf = buf.split(b"\n")
        for line in done:
            if line.strip():
                yield line
    if buf.strip():
        yield buf


def _interrupt(resp: urllib3.BaseHTTPResponse) -> None:
    """Unblock a thread reading ``resp`` from another thread."""
    shutdown = getattr(resp, "shutdown", None)  # urllib3 >= 2.3
    if callable(shutdown):
        shutdown()
        return
    sock = getattr(getattr(resp, "connection", None), "sock", None)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
