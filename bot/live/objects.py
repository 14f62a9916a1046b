"""What is done to every object read from the API before anyone sees it."""

from __future__ import annotations

import threading
from typing import Any

from bot.snapshot.events import normalise_event
from bot.snapshot.model import LoadProblem
from handlers.kube.shape import misfit
from handlers.view import Obj

from .kinds import KindInfo


class Misfits:
    """Objects the API answered with fields handlers cannot read (see
    ``handlers.kube.shape``), as ``LoadProblem``s for the "not read" lines: the newest
    ``limit``, one per object, forgotten when the object is read fine again. Thread-safe."""

    def __init__(self, source: str, limit: int = 50) -> None:
        self.source = source
        self.limit = limit
        self._lock = threading.Lock()
        self._by_key: dict[tuple[str, str, str], LoadProblem] = {}

    def add(self, obj: Obj, field: str) -> None:
        key = _key(obj)
        name = f"{key[1]}/{key[2]}" if key[1] else key[2]
        problem = LoadProblem(self.source, None, f"{key[0]} {name}: {field}; skipped",
                              namespace=key[1] or None)
        with self._lock:
            self._by_key.pop(key, None)
            self._by_key[key] = problem
            while len(self._by_key) > self.limit:
                del self._by_key[next(iter(self._by_key))]

    def fits(self, obj: Obj) -> None:
        if self._by_key:  # racy read, fine: a miss costs only a stale line
            with self._lock:
                self._by_key.pop(_key(obj), None)

    def problems(self) -> list[LoadProblem]:
        with self._lock:
            return list(self._by_key.values())


def _key(obj: Obj) -> tuple[str, str, str]:
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    ns, name = meta.get("namespace"), meta.get("name")
    return (str(obj.get("kind")), ns if isinstance(ns, str) else "",
            name if isinstance(name, str) else "?")


def prepare(info: KindInfo, items: list[Any], api_version: str = "",
            misfits: Misfits | None = None) -> list[Obj]:
    """The items handlers can read, each changed in place: ``kind`` and ``apiVersion`` set
    (list items lack them), ``metadata.managedFields`` dropped (``kubectl get -o json``
    hides them too), a Node's ``status.images`` dropped (unread, a third of its size),
    Events filled in to the core/v1 shape (``bot.snapshot.events.normalise_event``).
    Items that are not mappings, or whose fields do not fit ``handlers.kube.shape``, are
    left out and told to ``misfits``."""
    version = api_version or info.api_version
    out: list[Obj] = []
    for item in items:
        if not isinstance(item, dict):
            continue  # a list item that is not an object: nothing to name it by
        item["kind"] = info.kind
        item["apiVersion"] = version
        meta = item.get("metadata")
        if isinstance(meta, dict):
            meta.pop("managedFields", None)
        if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
            if misfits is not None:
                misfits.add(item, "metadata.name: missing")
            continue
        bad = misfit(item)
        if bad is not None:
            if misfits is not None:
                misfits.add(item, bad)
            continue
        if misfits is not None:
            misfits.fits(item)
        if info.kind == "Node" and isinstance(item.get("status"), dict):
            # The node's image list is a third of its JSON and no diagnosis reads it.
            item["status"].pop("images", None)
        if info.kind == "Event":
            normalise_event(item)
        out.append(item)
    return out
