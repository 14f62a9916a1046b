"""The object store behind the fake API server: etcd plus the generic registry's semantics.

* One global ``resourceVersion`` counter; every write takes the next value and leaves one
  event in a bounded history ring (what watches replay from; older -> 410 Expired).
* Objects are kept as JSON bytes serialised once per write (the list-item form: typed
  objects without ``kind``/``apiVersion``, as the apiserver lists them) plus the little
  they are selected by (labels, field-selector values, owner uids). Lists join bytes.
* Keys are kept sorted, so a namespace is a slice and ``continue`` is a bisect; pods are
  indexed by ``spec.nodeName`` and events by ``involvedObject.name``.

Create/update/patch/delete follow the apiserver: status is only written through
``/status`` for types that have it, ``resourceVersion`` preconditions give 409 Conflict,
no-op updates write nothing, finalizers and pod graceful deletion delay the removal,
deleting an owner deletes its dependents (background propagation), dry runs write nothing.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import builtins
import copy
import gc
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

from handlers.kube.selectors import (
    SelectorError,
    match_labels,
    parse_field_selector,
    parse_label_selector,
)

from . import defaults, events
from . import status as st
from .patch import PatchError, json_patch, merge_patch
from .resources import EVENTS_V1_TO_CORE, Registry, ResourceType

Obj = dict[str, Any]
Key = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped objects
_DUMP_OPTS = orjson.OPT_UTC_Z | orjson.OPT_NAIVE_UTC | orjson.OPT_NON_STR_KEYS
_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"  # what the apiserver's generateName uses
_FieldReqs = tuple[tuple[str, str, str], ...]


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def random_suffix(n: int = 5) -> str:
    return "".join(random.choice(_NAME_CHARS) for _ in range(n))


def dumps(obj: Any) -> bytes:
    return orjson.dumps(obj, option=_DUMP_OPTS)


# -- per-object selection data ------------------------------------------------------------------


def _dig(obj: Obj, path: str) -> Any:
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, dict):
            return None
        cur = cur.get(part)
    return cur


def field_value(obj: Obj, path: str) -> str:
    """A field as the apiserver's field-selector attributes render it."""
    value = _dig(obj, path)
    if path == "spec.unschedulable":
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass(frozen=True, slots=True)
class Entry:
    """One stored version of one object. Immutable: a write makes a new Entry."""

    ns: str
    name: str
    uid: str
    rv: int
    body: bytes  # list-item JSON (typed objects without kind/apiVersion)
    labels: dict[str, str]
    fields: dict[str, str]
    owners: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Change:
    """One write, as watches see it. ``entry`` is the new state (the last one for DELETED)."""

    rv: int
    type: str  # ADDED | MODIFIED | DELETED
    storage: str
    entry: Entry
    old: Entry | None


@dataclass
class ListResult:
    entries: list[Entry]
    rv: int
    continue_token: str | None = None
    remaining: int | None = None


@dataclass
class Bucket:
    """All objects of one storage (one resource)."""

    rtype: ResourceType
    objects: dict[Key, Entry] = field(default_factory=dict)
    keys: list[Key] = field(default_factory=list)  # sorted
    index: dict[str, dict[str, set[Key]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.index = {f: {} for f in self.rtype.indexed}
        kind, api = self.rtype.kind, self.rtype.api_version
        self.prefix = b'{"kind":"%s","apiVersion":"%s",' % (kind.encode(), api.encode())

    def insert(self, entry: Entry, *, bulk: bool = False) -> Entry | None:
        """Add or replace. ``bulk``: leave ``keys`` unsorted (call ``sort_keys`` after)."""
        key = (entry.ns, entry.name)
        old = self.objects.get(key)
        self.objects[key] = entry
        if old is None:
            if bulk:
                self.keys.append(key)
            else:
                bisect.insort(self.keys, key)
        for f, idx in self.index.items():
            if old is not None:
                idx.get(old.fields.get(f, ""), set()).discard(key)
            idx.setdefault(entry.fields.get(f, ""), set()).add(key)
        return old

    def sort_keys(self) -> None:
        self.keys = sorted(set(self.keys))

    def remove(self, key: Key) -> Entry | None:
        old = self.objects.pop(key, None)
        if old is None:
            return None
        i = bisect.bisect_left(self.keys, key)
        if i < len(self.keys) and self.keys[i] == key:
            del self.keys[i]
        for f, idx in self.index.items():
            idx.get(old.fields.get(f, ""), set()).discard(key)
        return old

    def namespace_slice(self, ns: str | None) -> tuple[int, int]:
        if ns is None:
            return 0, len(self.keys)
        return (bisect.bisect_left(self.keys, (ns,)),
                bisect.bisect_left(self.keys, (ns + "\x00",)))


Listener = Callable[[Change], None]


class Store:
    """Thread-safe object store. All public methods may be called from any thread."""

    def __init__(self, registry: Registry | None = None, *, history: int = 10_000) -> None:
        self.registry = registry or Registry()
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.rv = 0
        self.floor = 0  # watches can resume from rv >= floor (older history is gone)
        self.history_size = max(16, history)
        self._history: list[Change | None] = [None] * self.history_size
        self.buckets: dict[str, Bucket] = {}
        for rt in self.registry.storages():
            self.buckets[rt.storage] = Bucket(rt)
        self._owners: dict[str, set[tuple[str, Key]]] = {}
        self.listeners: list[Listener] = []
        self._pending: list[Change] = []
        self._depth = 0
        self.closed = False
        self._logs: dict[tuple[str, str, bool], str] = {}  # (pod uid, container, previous)
        self.log_source: Callable[[str, str, str], str | None] | None = None
        self.seeded_uids: set[str] = set()
        self.pod_termination: Callable[[ResourceType, Key], None] | None = None

    # -- plumbing ----------------------------------------------------------------------------

    def bucket(self, rt: ResourceType) -> Bucket:
        b = self.buckets.get(rt.storage)
        if b is None:
            with self.lock:
                b = self.buckets.setdefault(rt.storage, Bucket(self._storage_type(rt)))
        return b

    def _storage_type(self, rt: ResourceType) -> ResourceType:
        if rt.storage_of is None:
            return rt
        for t in self.registry.types:
            if t.qualified == rt.storage_of:
                return t
        return rt

    @contextmanager
    def _write(self) -> Iterator[None]:
        with self.lock:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
                pending: list[Change] = []
                if self._depth == 0 and self._pending:
                    pending, self._pending = self._pending, []
                    self.changed.notify_all()
        for change in pending:
            for listener in list(self.listeners):
                listener(change)

    def _record(self, type_: str, bucket: Bucket, entry: Entry, old: Entry | None) -> None:
        change = Change(entry.rv, type_, bucket.rtype.storage, entry, old)
        self._history[entry.rv % self.history_size] = change
        self._pending.append(change)

    def _next_rv(self) -> int:
        self.rv += 1
        return self.rv

    def oldest_watchable(self) -> int:
        """The smallest resourceVersion a watch may resume from: history holds every change
        after it (seeding leaves none, and the ring keeps the last ``history_size``)."""
        return max(self.floor, self.rv - self.history_size)

    def make_entry(self, rt: ResourceType, obj: Obj) -> Entry:
        if rt.builtin:
            defaults.fill(rt.kind, obj)
        meta = obj["metadata"]
        ordered: Obj = {}
        if not rt.builtin:
            ordered["apiVersion"] = rt.api_version
            ordered["kind"] = rt.kind
        ordered["metadata"] = meta
        for k, v in obj.items():
            if k not in ("kind", "apiVersion", "metadata"):
                ordered[k] = v
        labels = meta.get("labels") or {}
        owners = tuple(str(o.get("uid", "")) for o in meta.get("ownerReferences") or []
                       if isinstance(o, dict))
        return Entry(
            ns=meta.get("namespace") or "", name=meta["name"], uid=meta.get("uid", ""),
            rv=int(meta.get("resourceVersion") or 0), body=dumps(ordered),
            labels={str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict)
            else {},
            fields={f: field_value(obj, f) for f in rt.fields}, owners=owners,
        )

    def full(self, rt: ResourceType, entry: Entry) -> bytes:
        """The object as GET and watch return it (with kind and apiVersion)."""
        if rt.storage_of is not None:
            return dumps(events.to_v1(rt, self.load(entry)))
        if not rt.builtin:
            return entry.body
        b = self.bucket(rt)
        return b.prefix + entry.body[1:]

    def item(self, rt: ResourceType, entry: Entry) -> bytes:
        """The object as a list item."""
        if rt.storage_of is not None:
            obj = events.to_v1(rt, self.load(entry))
            obj.pop("kind", None)
            obj.pop("apiVersion", None)
            return dumps(obj)
        return entry.body

    def load(self, entry: Entry) -> Obj:
        obj: Obj = orjson.loads(entry.body)
        return obj

    def obj(self, rt: ResourceType, entry: Entry) -> Obj:
        """A fresh dict of the object with kind and apiVersion."""
        return events.to_v1(rt, self.load(entry)) if rt.storage_of else {
            "kind": rt.kind, "apiVersion": rt.api_version, **self.load(entry)}

    # -- selectors ---------------------------------------------------------------------------

    def parse_fields(self, rt: ResourceType, expr: str | None) -> _FieldReqs:
        """Validated field requirements, in the storage's field names. Raises 400."""
        if not expr:
            return ()
        parts = []
        for raw in expr.split(","):
            part = raw.strip()
            if not part:
                continue
            for op in ("!=", "==", "="):
                if op in part:
                    key, value = part.split(op, 1)
                    break
            else:
                raise st.bad_request(f"invalid selector: '{expr}'; can't understand '{part}'")
            key = key.strip()
            if key not in rt.fields:
                raise st.bad_request(rt.field_error(key))
            key = EVENTS_V1_TO_CORE.get(key, key) if rt.storage_of else key
            parts.append(f"{key}{op}{value.strip()}")
        try:
            return parse_field_selector(",".join(parts))
        except SelectorError as err:
            raise st.bad_request(str(err)) from err

    @staticmethod
    def check_labels(expr: str | None) -> None:
        if expr:
            try:
                match_labels(expr, {})
            except SelectorError as err:
                raise st.bad_request(f"unable to parse requirement: {err}") from err

    @staticmethod
    def matches(entry: Entry, label_expr: str | None, freqs: _FieldReqs) -> bool:
        return Store.matcher(label_expr, freqs)(entry)

    @staticmethod
    def matcher(label_expr: str | None, freqs: _FieldReqs) -> Callable[[Entry], bool]:
        """A predicate for one request's selectors (parsed once, not per object)."""
        reqs = parse_label_selector(label_expr) if label_expr else ()
        if not reqs and not freqs:
            return lambda entry: True

        def match(entry: Entry) -> bool:
            fields = entry.fields
            for key, op, value in freqs:
                if (fields.get(key, "") == value) != (op == "="):
                    return False
            labels = entry.labels
            return all(r.matches(labels) for r in reqs)

        if not freqs and len(reqs) == 1:
            only = reqs[0]
            return lambda entry: only.matches(entry.labels)
        return match

    # -- reads -------------------------------------------------------------------------------

    def get_entry(self, rt: ResourceType, ns: str, name: str) -> Entry:
        with self.lock:
            entry = self.bucket(rt).objects.get((ns if rt.namespaced else "", name))
        if entry is None:
            raise st.not_found(rt, name)
        return entry

    def get(self, rt: ResourceType, ns: str, name: str) -> Obj:
        return self.obj(rt, self.get_entry(rt, ns, name))

    def find(self, kind: str, name: str, namespace: str = "") -> Obj | None:
        """Test helper: the object of a kind (``"Pod"``) or None."""
        rt = self.registry.by_kind(kind)
        if rt is None:
            raise KeyError(kind)
        try:
            return self.get(rt, namespace, name)
        except st.ApiError:
            return None

    def names(self, kind: str) -> list[Key]:
        """Test helper: (namespace, name) of every object of a kind, without decoding any."""
        rt = self.registry.by_kind(kind)
        if rt is None:
            raise KeyError(kind)
        return [(e.ns, e.name) for e in self.list(rt, None).entries]

    def all(self, kind: str, namespace: str | None = None) -> list[Obj]:
        """Test helper: every object of a kind, as dicts with kind set."""
        rt = self.registry.by_kind(kind)
        if rt is None:
            raise KeyError(kind)
        return [self.obj(rt, e) for e in self.list(rt, namespace).entries]

    def list(
        self,
        rt: ResourceType,
        ns: str | None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int = 0,
        continue_token: str | None = None,
    ) -> ListResult:
        freqs = self.parse_fields(rt, field_selector)
        self.check_labels(label_selector)
        start: Key | None = None
        if continue_token:
            token_rv, start = self._decode_continue(continue_token)
            if token_rv < self.oldest_watchable():
                raise st.expired(
                    "The provided continue parameter is too old to display a consistent list "
                    "result. You can start a new list without the continue parameter, or use "
                    "the continue token in this response to retrieve the remainder of the "
                    "results. Continuing with the provided token results in an inconsistent "
                    "list - objects that were created, modified, or deleted between the time "
                    "the first chunk was returned and now may show up in the list.",
                    continue_token=self._encode_continue(self.rv, start))
        if not rt.namespaced:
            ns = None
        with self.lock:
            bucket = self.bucket(rt)
            keys = self._candidates(bucket, ns, freqs)
            first = bisect.bisect_right(keys, start) if start is not None else 0
            out: list[Entry] = []
            i = first
            n = len(keys)
            objects = bucket.objects
            selected = self.matcher(label_selector, freqs)
            while i < n:
                entry = objects[keys[i]]
                i += 1
                if selected(entry):
                    out.append(entry)
                    if limit and len(out) >= limit:
                        break
            result = ListResult(out, self.rv)
            if limit and i < n and out:
                last = out[-1]
                result.continue_token = self._encode_continue(self.rv, (last.ns, last.name))
                if not label_selector and not freqs:
                    result.remaining = n - i
        return result

    def _candidates(self, bucket: Bucket, ns: str | None,
                    freqs: _FieldReqs) -> builtins.list[Key]:
        for key, op, value in freqs:
            if op == "=" and key in bucket.index:
                found = bucket.index[key].get(value, set())
                return sorted(k for k in found if ns is None or k[0] == ns)
            if op == "=" and key == "metadata.name" and (
                    ns is not None or not bucket.rtype.namespaced):
                k = (ns or "", value)
                return [k] if k in bucket.objects else []
        lo, hi = bucket.namespace_slice(ns)
        return bucket.keys[lo:hi] if (lo, hi) != (0, len(bucket.keys)) else bucket.keys

    @staticmethod
    def _encode_continue(rv: int, key: Key) -> str:
        start = f"{key[0]}/{key[1]}\x00" if key[0] else f"{key[1]}\x00"
        raw = orjson.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": start})
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @staticmethod
    def _decode_continue(token: str) -> tuple[int, Key]:
        try:
            raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
            data = orjson.loads(raw)
            start = str(data["start"]).rstrip("\x00")
            rv = int(data["rv"])
        except (ValueError, KeyError, TypeError, binascii.Error, orjson.JSONDecodeError) as err:
            raise st.bad_request(f"continue key is not valid: {err}") from err
        ns, _, name = start.rpartition("/")
        return rv, (ns, name)

    # -- writes ------------------------------------------------------------------------------

    def _namespace_exists(self, ns: str) -> bool:
        nb = self.buckets.get("namespaces")
        return nb is None or ("", ns) in nb.objects

    def _commit(self, rt: ResourceType, obj: Obj, type_: str, old: Entry | None) -> Entry:
        bucket = self.bucket(rt)
        obj["metadata"]["resourceVersion"] = str(self._next_rv())
        entry = self.make_entry(bucket.rtype, obj)
        bucket.insert(entry)
        key = (entry.ns, entry.name)
        if old is not None:
            for uid in old.owners:
                self._owners.get(uid, set()).discard((bucket.rtype.storage, key))
        for uid in entry.owners:
            self._owners.setdefault(uid, set()).add((bucket.rtype.storage, key))
        self._record(type_, bucket, entry, old)
        return entry

    def _remove(self, rt: ResourceType, entry: Entry) -> Entry:
        """Delete for real: DELETED event carries the last state at a new resourceVersion."""
        bucket = self.bucket(rt)
        key = (entry.ns, entry.name)
        bucket.remove(key)
        for uid in entry.owners:
            self._owners.get(uid, set()).discard((bucket.rtype.storage, key))
        obj = self.load(entry)
        obj["metadata"]["resourceVersion"] = str(self._next_rv())
        final = self.make_entry(bucket.rtype, obj)
        self._record("DELETED", bucket, final, entry)
        return final

    def put(self, obj: Obj, *, kind: str | None = None) -> Obj:
        """Test/controller backdoor: create or replace an object as given (status included),
        filling uid/resourceVersion/creationTimestamp; watches see ADDED or MODIFIED."""
        obj = copy.deepcopy(obj)
        rt = self.registry.by_kind(kind or obj.get("kind", ""))
        if rt is None:
            raise KeyError(f"unknown kind {kind or obj.get('kind')!r}")
        meta = obj.setdefault("metadata", {})
        if not rt.namespaced:
            meta.pop("namespace", None)
        elif not meta.get("namespace"):
            meta["namespace"] = "default"
        with self._write():
            bucket = self.bucket(rt)
            old = bucket.objects.get((meta.get("namespace", ""), meta["name"]))
            if old is not None:
                meta["uid"] = old.uid
            obj = self._to_storage(rt, obj)
            self._fill_meta(rt, obj, keep_uid=True)
            entry = self._commit(rt, obj, "MODIFIED" if old else "ADDED", old)
        return self.obj(rt, entry)

    def seed(self, objs: Iterable[Obj]) -> int:
        """Load objects without watch events (history starts after them). Returns a count."""
        count = 0
        gc_was_on = gc.isenabled()
        gc.disable()  # millions of new objects, no cycles among them: skip the GC passes
        try:
            count = self._seed(objs)
        finally:
            if gc_was_on:
                gc.enable()
        return count

    def _seed(self, objs: Iterable[Obj]) -> int:
        count = 0
        with self.lock:
            for raw in objs:
                rt = self.registry.by_kind(raw.get("kind", ""))
                if rt is None:
                    continue
                obj = orjson.loads(dumps(raw))  # a private copy, normalised to JSON types
                meta = obj.setdefault("metadata", {})
                if not meta.get("name"):
                    continue
                if not rt.namespaced:
                    meta.pop("namespace", None)
                elif not meta.get("namespace"):
                    meta["namespace"] = "default"
                obj = self._to_storage(rt, obj)
                self._fill_meta(rt, obj, keep_uid=True)
                meta = obj["metadata"]
                meta["resourceVersion"] = str(self._next_rv())
                bucket = self.bucket(rt)
                entry = self.make_entry(bucket.rtype, obj)
                bucket.insert(entry, bulk=True)
                for uid in entry.owners:
                    self._owners.setdefault(uid, set()).add(
                        (bucket.rtype.storage, (entry.ns, entry.name)))
                if rt.kind == "Pod":
                    self.seeded_uids.add(entry.uid)
                count += 1
            for bucket in self.buckets.values():
                bucket.sort_keys()
            self._ensure_namespaces()
            self.floor = self.rv
            self._history = [None] * self.history_size
        return count

    def _ensure_namespaces(self) -> None:
        """Namespaces objects refer to exist (``cluster-info dump`` does not save them)."""
        ns_rt = self.registry.by_kind("Namespace")
        if ns_rt is None:
            return
        nb = self.bucket(ns_rt)
        wanted = {"default", "kube-system", "kube-public", "kube-node-lease"}
        for b in self.buckets.values():
            if b.rtype.namespaced:
                wanted.update(k[0] for k in b.objects)
        for name in sorted(wanted):
            if ("", name) in nb.objects:
                continue
            obj: Obj = {"metadata": {"name": name,
                                     "labels": {"kubernetes.io/metadata.name": name}},
                        "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}
            self._fill_meta(ns_rt, obj, keep_uid=False)
            obj["metadata"]["resourceVersion"] = str(self._next_rv())
            nb.insert(self.make_entry(ns_rt, obj))

    def _to_storage(self, rt: ResourceType, obj: Obj) -> Obj:
        if rt.storage_of is not None or (rt.kind == "Event" and "regarding" in obj
                                         and "involvedObject" not in obj):
            return events.to_core(obj)
        if rt.kind == "Event" and str(obj.get("apiVersion", "")).startswith("events.k8s.io"):
            return events.to_core(obj)
        return obj

    @staticmethod
    def _fill_meta(rt: ResourceType, obj: Obj, *, keep_uid: bool) -> None:
        meta = obj["metadata"]
        if not keep_uid or not meta.get("uid"):
            meta["uid"] = str(uuid.uuid4())
        if not meta.get("creationTimestamp"):
            meta["creationTimestamp"] = now_rfc3339()
        if (rt.group or not rt.builtin) and "generation" not in meta and rt.kind != "Event":
            meta["generation"] = 1
        obj.pop("kind", None)
        obj.pop("apiVersion", None)

    def create(self, rt: ResourceType, ns: str, body: Obj, *, dry_run: bool = False) -> Obj:
        if not isinstance(body, dict):
            raise st.bad_request("the body of the request is not a JSON object")
        self._check_kind(rt, body)
        obj = copy.deepcopy(body)
        meta = obj.get("metadata")
        if not isinstance(meta, dict):
            meta = obj["metadata"] = {}
        if rt.namespaced:
            if meta.get("namespace") and meta["namespace"] != ns:
                raise st.bad_request("the namespace of the provided object does not match the "
                                     "namespace sent on the request")
            meta["namespace"] = ns
        else:
            meta.pop("namespace", None)
        if not meta.get("name"):
            if meta.get("generateName"):
                meta["name"] = meta["generateName"] + random_suffix()
            else:
                raise st.invalid(rt, "", [("metadata.name", "FieldValueRequired",
                                           "Required value: name or generateName is required")])
        for k in ("uid", "resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"):
            meta.pop(k, None)
        meta.pop("creationTimestamp", None)
        obj = self._to_storage(rt, obj)
        meta = obj["metadata"]
        if rt.status_subresource:
            obj.pop("status", None)
        if rt.kind == "Pod":
            obj["status"] = {"phase": "Pending"}
        if rt.kind == "Namespace":
            obj.setdefault("spec", {"finalizers": ["kubernetes"]})
            obj["status"] = {"phase": "Active"}
            labels = meta.setdefault("labels", {})
            labels["kubernetes.io/metadata.name"] = meta["name"]
        with self._write():
            if rt.namespaced and not self._namespace_exists(ns):
                raise st.namespace_not_found(ns)
            bucket = self.bucket(rt)
            if (meta.get("namespace", ""), meta["name"]) in bucket.objects:
                raise st.already_exists(rt, meta["name"])
            self._fill_meta(rt, obj, keep_uid=False)
            if dry_run:
                return self._as_response(rt, obj)
            entry = self._commit(rt, obj, "ADDED", None)
        return self.obj(rt, entry)

    def _as_response(self, rt: ResourceType, stored: Obj) -> Obj:
        obj = events.to_v1(rt, stored) if rt.storage_of else stored
        obj["kind"] = rt.kind
        obj["apiVersion"] = rt.api_version
        return obj

    @staticmethod
    def _check_kind(rt: ResourceType, body: Obj) -> None:
        kind = body.get("kind")
        if kind and kind != rt.kind:
            raise st.bad_request(f'{kind} in version "{rt.version}" cannot be handled as a '
                                 f'{rt.kind}: the object kind does not match the resource')

    def update(self, rt: ResourceType, ns: str, name: str, body: Obj, *,
               subresource: str | None = None, dry_run: bool = False) -> Obj:
        if not isinstance(body, dict):
            raise st.bad_request("the body of the request is not a JSON object")
        self._check_kind(rt, body)
        body_name = (body.get("metadata") or {}).get("name")
        if body_name and body_name != name:
            raise st.bad_request(f"the name of the object ({body_name}) does not match the "
                                 f"name on the URL ({name})")
        with self._write():
            entry = self.get_entry(rt, ns, name)
            return self._apply_update(rt, entry, copy.deepcopy(body), subresource, dry_run)

    def patch(self, rt: ResourceType, ns: str, name: str, patch: bytes, content_type: str, *,
              subresource: str | None = None, dry_run: bool = False) -> Obj:
        ctype = content_type.split(";")[0].strip().lower()
        accepted = ["application/json-patch+json", "application/merge-patch+json",
                    "application/apply-patch+yaml"]
        if rt.builtin:
            accepted.insert(2, "application/strategic-merge-patch+json")
        if ctype not in accepted or ctype == "application/apply-patch+yaml":
            raise st.unsupported_media_type(ctype, accepted)
        try:
            doc = orjson.loads(patch)
        except orjson.JSONDecodeError as err:
            raise st.bad_request(f"error decoding patch: {err}") from err
        with self._write():
            entry = self.get_entry(rt, ns, name)
            current = self.obj(rt, entry)
            try:
                if ctype == "application/json-patch+json":
                    new = json_patch(current, doc)
                else:
                    if not isinstance(doc, dict):
                        raise PatchError("a merge patch must be a JSON object")
                    new = merge_patch(current, doc)
            except PatchError as err:
                raise st.ApiError(422 if "test" in str(err) else 500,
                                  "Invalid" if "test" in str(err) else "InternalError",
                                  str(err)) from err
            if not isinstance(new, dict):
                raise st.bad_request("the patch does not produce an object")
            return self._apply_update(rt, entry, new, subresource, dry_run)

    def _apply_update(self, rt: ResourceType, entry: Entry, new: Obj, subresource: str | None,
                      dry_run: bool) -> Obj:
        old = self.obj(rt, entry)
        meta = new.get("metadata")
        if not isinstance(meta, dict):
            meta = new["metadata"] = {}
        want_rv = meta.get("resourceVersion")
        if want_rv and str(want_rv) != str(entry.rv):
            raise st.conflict(rt, entry.name)
        if subresource == "status":
            merged = copy.deepcopy(old)
            if "status" in new:
                merged["status"] = new["status"]
            else:
                merged.pop("status", None)
            new = merged
        else:
            if rt.status_subresource:
                if "status" in old:
                    new["status"] = old["status"]
                else:
                    new.pop("status", None)
            meta = new["metadata"]
            for k in ("uid", "creationTimestamp", "deletionTimestamp",
                      "deletionGracePeriodSeconds", "generation"):
                if k in old["metadata"]:
                    meta[k] = old["metadata"][k]
                else:
                    meta.pop(k, None)
            meta["name"] = entry.name
            if rt.namespaced:
                meta["namespace"] = entry.ns
            else:
                meta.pop("namespace", None)
            if "generation" in meta and _spec_of(new) != _spec_of(old):
                meta["generation"] = int(meta["generation"]) + 1
        new["kind"] = rt.kind
        new["apiVersion"] = rt.api_version
        new["metadata"]["resourceVersion"] = str(entry.rv)
        if new == old:  # nothing changed: the apiserver skips the write
            return old
        if dry_run:
            return new
        stored = self._to_storage(rt, new)
        stored.pop("kind", None)
        stored.pop("apiVersion", None)
        bucket = self.bucket(rt)
        if (stored["metadata"].get("deletionTimestamp") and old["metadata"].get("finalizers")
                and not stored["metadata"].get("finalizers") and rt.kind != "Pod"):
            # The last finalizer is gone: the deletion completes.
            self._remove(rt, entry)
            self._collect_dependents(entry.uid)
            return new
        committed = self._commit(bucket.rtype, stored, "MODIFIED", entry)
        return self.obj(rt, committed)

    def delete(self, rt: ResourceType, ns: str, name: str, *, options: Obj | None = None,
               dry_run: bool = False) -> Obj:
        """Returns what the apiserver answers: the object, or a Status for kinds that do not
        return deleted objects."""
        opts = options or {}
        with self._write():
            entry = self.get_entry(rt, ns, name)
            pre = opts.get("preconditions") or {}
            if pre.get("uid") and pre["uid"] != entry.uid:
                raise st.conflict(rt, name, f"Precondition failed: UID in precondition: "
                                  f"{pre['uid']}, UID in object meta: {entry.uid}")
            if pre.get("resourceVersion") and str(pre["resourceVersion"]) != str(entry.rv):
                raise st.conflict(rt, name, "the ResourceVersion in the precondition "
                                  f"({pre['resourceVersion']}) does not match the "
                                  f"ResourceVersion in record ({entry.rv}). The object "
                                  "might have been modified")
            obj = self.obj(rt, entry)
            meta = obj["metadata"]
            grace = self._grace(rt, obj, opts)
            graceful = grace is not None and grace > 0
            if meta.get("finalizers") or graceful:
                if not meta.get("deletionTimestamp"):
                    meta["deletionTimestamp"] = now_rfc3339()
                    if graceful:
                        meta["deletionGracePeriodSeconds"] = grace
                    if dry_run:
                        return obj
                    stored = self._to_storage(rt, copy.deepcopy(obj))
                    stored.pop("kind", None)
                    stored.pop("apiVersion", None)
                    committed = self._commit(self.bucket(rt).rtype, stored, "MODIFIED", entry)
                    obj = self.obj(rt, committed)
                    if graceful and not meta.get("finalizers") and self.pod_termination:
                        self.pod_termination(rt, (committed.ns, committed.name))
                return obj
            if dry_run:
                return obj if rt.return_deleted else st.success(rt, name, entry.uid)
            final = self._remove(rt, entry)
            if rt.kind == "Namespace":
                self._empty_namespace(name)
            if opts.get("propagationPolicy") != "Orphan" and opts.get(
                    "orphanDependents") is not True:
                self._collect_dependents(entry.uid)
        if rt.return_deleted:
            return self.obj(rt, final)
        return st.success(rt, name, entry.uid)

    @staticmethod
    def _grace(rt: ResourceType, obj: Obj, opts: Obj) -> int | None:
        """Pods bound to a node are deleted gracefully (the kubelet finishes the deletion)."""
        if rt.kind != "Pod":
            return None
        spec = obj.get("spec") or {}
        if not spec.get("nodeName"):
            return 0
        if (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return 0
        grace = opts.get("gracePeriodSeconds")
        if grace is None:
            grace = spec.get("terminationGracePeriodSeconds", 30)
        return int(grace)

    def finish_pod_termination(self, rt: ResourceType, key: Key) -> None:
        """What the kubelet does when a deleted pod's containers are gone."""
        with self._write():
            entry = self.bucket(rt).objects.get(key)
            if entry is None:
                return
            meta = self.load(entry)["metadata"]
            if meta.get("deletionTimestamp") and not meta.get("finalizers"):
                self._remove(rt, entry)
                self._collect_dependents(entry.uid)

    def delete_collection(self, rt: ResourceType, ns: str | None, *, label_selector: str | None,
                          field_selector: str | None, options: Obj | None,
                          dry_run: bool) -> builtins.list[Obj]:
        found = self.list(rt, ns, label_selector=label_selector, field_selector=field_selector)
        out: builtins.list[Obj] = []
        for e in found.entries:
            try:
                out.append(self.delete(rt, e.ns, e.name, options=options, dry_run=dry_run))
            except st.ApiError as err:
                if err.code != 404:
                    raise
        return out

    def _empty_namespace(self, ns: str) -> None:
        """What the namespace controller does once a namespace is deleted."""
        for bucket in list(self.buckets.values()):
            if not bucket.rtype.namespaced:
                continue
            lo, hi = bucket.namespace_slice(ns)
            for key in bucket.keys[lo:hi]:
                self._remove(bucket.rtype, bucket.objects[key])

    def _collect_dependents(self, owner_uid: str) -> None:
        """Background cascading deletion: the garbage collector deletes dependents."""
        if not owner_uid:
            return
        for storage, key in sorted(self._owners.pop(owner_uid, set())):
            bucket = self.buckets.get(storage)
            if bucket is None:
                continue
            entry = bucket.objects.get(key)
            if entry is None:
                continue
            with suppress(st.ApiError):
                self.delete(bucket.rtype, key[0], key[1], options={})

    # -- logs --------------------------------------------------------------------------------

    def set_logs(self, namespace: str, pod: str, container: str, text: str, *,
                 previous: bool = False) -> None:
        """What ``pods/log`` answers for a container of the pod now named so."""
        rt = self.registry.by_kind("Pod")
        assert rt is not None
        uid = self.get_entry(rt, namespace, pod).uid
        with self.lock:
            self._logs[(uid, container, previous)] = text

    def container_log(self, uid: str, namespace: str, pod: str, container: str, *,
                      previous: bool = False) -> str | None:
        """Log text of a container of the pod with this uid (also after it is gone)."""
        text = self._logs.get((uid, container, previous))
        if text is None and previous:
            text = self._logs.get((uid, container, False))
        if text is None and self.log_source is not None and uid in self.seeded_uids:
            text = self.log_source(namespace, pod, container)
        return text

    def logs(self, rt: ResourceType, ns: str, name: str, *, container: str | None,
             previous: bool, tail_lines: int | None, limit_bytes: int | None) -> str:
        pod = self.get(rt, ns, name)
        spec = pod.get("spec") or {}
        names = [c.get("name", "") for c in spec.get("containers") or []]
        init = [c.get("name", "") for c in spec.get("initContainers") or []]
        if not container:
            if len(names) != 1:
                msg = f"a container name must be specified for pod {name}"
                if names:
                    msg += f", choose one of: [{' '.join(names)}]"
                    if init:
                        msg += f" or one of the init containers: [{' '.join(init)}]"
                raise st.bad_request(msg)
            container = names[0]
        if container not in names and container not in init:
            raise st.bad_request(f"container {container} is not valid for pod {name}")
        statuses = {s.get("name"): s for key in ("initContainerStatuses", "containerStatuses")
                    for s in (pod.get("status") or {}).get(key) or []}
        cstatus = statuses.get(container) or {}
        uid = pod["metadata"].get("uid", "")
        if previous and "terminated" not in (cstatus.get("lastState") or {}) and (
                (uid, container, True) not in self._logs):
            raise st.bad_request(
                f'previous terminated container "{container}" in pod "{name}" not found')
        text = self.container_log(uid, ns, name, container, previous=previous)
        if text is None:
            waiting = (cstatus.get("state") or {}).get("waiting") or {}
            if waiting and not (cstatus.get("lastState") or {}).get("terminated") and (
                    spec.get("nodeName")):
                raise st.bad_request(f'container "{container}" in pod "{name}" is waiting to '
                                     f'start: {waiting.get("reason", "ContainerCreating")}')
            text = ""
        if tail_lines is not None:
            lines = text.splitlines(keepends=True)
            text = "".join(lines[-tail_lines:]) if tail_lines > 0 else ""
        if limit_bytes is not None:
            text = text.encode()[:limit_bytes].decode("utf-8", "ignore")
        return text

    # -- watch -------------------------------------------------------------------------------

    def changes_after(self, rv: int, timeout: float) -> builtins.list[Change] | None:
        """Changes with resourceVersion > rv, waiting up to ``timeout`` for the first one.
        None when ``rv`` fell out of the history window."""
        with self.changed:
            if self.rv <= rv and not self.closed:
                self.changed.wait(timeout)
            if rv < self.oldest_watchable():
                return None
            out: builtins.list[Change] = []
            for r in range(rv + 1, self.rv + 1):
                ch = self._history[r % self.history_size]
                if ch is not None and ch.rv == r:
                    out.append(ch)
            return out

    def compact(self) -> None:
        """Forget the watch history, as etcd's compaction does: every watch behind the
        newest change ends with 410 Gone and its client must list again."""
        with self.changed:
            self.rv += 1  # a revision of its own, so that every watcher is behind it
            self.floor = self.rv
            self.changed.notify_all()

    def close(self) -> None:
        with self.changed:
            self.closed = True
            self.changed.notify_all()


def _spec_of(obj: Obj) -> Any:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "kind", "apiVersion")}


def wait_until(predicate: Callable[[], Any], timeout: float = 5.0, interval: float = 0.02) -> Any:
    """Poll ``predicate`` until it returns something truthy; raise TimeoutError."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"condition not met within {timeout}s")
        time.sleep(interval)
