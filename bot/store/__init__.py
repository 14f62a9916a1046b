"""Small durable state for the bot: JSON records in named collections.

    store = open_store("sqlite", path="/var/lib/gpubot/state.db")       # the default
    store = open_store("kubernetes", api_client=api, namespace="gpubot")  # several replicas

    store.create("approvals", req_id, {...})            # False: the key exists already
    rec = store.get("approvals", req_id)                # Record | None
    store.update("approvals", req_id, {...}, rec.version)  # False: someone wrote first
    store.list("audit", limit=20)                       # newest first (by creation)
    store.delete("alert-threads", key)

    AuditLog(store).append({...}); AuditLog(store).last(20)   # append-only, on top

Every write is atomic on one record: ``create`` is create-if-absent and ``update`` is a
compare-and-swap on the version ``get`` returned, so "run exactly once" is: read the record,
decide, ``update(..., rec.version)``; only the caller whose update returns True goes on.
That holds across threads, processes on one SQLite file, and bot replicas sharing the
Kubernetes store. Versions are opaque strings, never reused for a key (a deleted and
re-created record gets a fresh one).

Implementations (both pass ``tests/test_store.py``):
- ``SqliteStore`` (``sqlite.py``): one file, WAL mode, one connection per thread;
- ``KubeStore`` (``kube.py``): one ConfigMap per record in the bot's namespace;
  409 AlreadyExists makes ``create`` False, 409 Conflict on the resourceVersion makes
  ``update`` False.

Collections are short lowercase names (``approvals``, ``alert-threads``, ``audit``); keys
are any non-empty string up to 512 characters. Failures of the backend (unreachable API,
refused by RBAC, a locked or unreadable file) raise ``StoreError``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from handlers.errors import GpubotError

Data = dict[str, Any]

COLLECTION_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$")
MAX_KEY = 512
BACKENDS = ("sqlite", "kubernetes")


class StoreError(GpubotError):
    """The store could not be read or written; ``str()`` says why and where."""


@dataclass(frozen=True)
class Record:
    collection: str
    key: str
    data: Data = field(compare=False)
    version: str  # opaque; pass it back to update() / delete()
    created: float  # seconds since the epoch, when the record was first created
    updated: float


@runtime_checkable
class Store(Protocol):
    """What every backend offers. All methods are thread-safe."""

    def get(self, collection: str, key: str) -> Record | None: ...

    def create(self, collection: str, key: str, data: Mapping[str, Any]) -> bool:
        """Write a new record; False (and nothing written) when the key exists."""
        ...

    def update(self, collection: str, key: str, data: Mapping[str, Any],
               expected_version: str) -> bool:
        """Replace the record's data if its version is still ``expected_version``; False
        when it changed or is gone."""
        ...

    def list(self, collection: str, limit: int = 50) -> list[Record]:
        """The newest ``limit`` records (by creation time), newest first."""
        ...

    def delete(self, collection: str, key: str, expected_version: str | None = None) -> bool:
        """False when the record is absent (or, given a version, has another one)."""
        ...

    def close(self) -> None: ...


def check_name(collection: str, key: str | None = None) -> None:
    """Refuse collection names a backend could not store (they name ConfigMap labels)."""
    if not COLLECTION_RE.match(collection):
        raise ValueError(f"store: collection {collection!r} must be 1-40 of [a-z0-9-]")
    if key is not None and not 0 < len(key) <= MAX_KEY:
        raise ValueError(f"store: key must be 1-{MAX_KEY} characters")


def open_store(backend: str = "sqlite", *, path: str | None = None, api_client: Any = None,
               namespace: str | None = None, timeout: float = 10.0) -> Store:
    """A store by name: ``sqlite`` needs ``path``; ``kubernetes`` needs a kubernetes
    ``ApiClient`` and the namespace the bot's ConfigMaps live in."""
    if backend == "sqlite":
        from .sqlite import SqliteStore

        if not path:
            raise StoreError("the sqlite store needs a file path (store_path)")
        return SqliteStore(path, timeout=timeout)
    if backend == "kubernetes":
        from .kube import KubeStore

        if api_client is None or not namespace:
            raise StoreError("the kubernetes store needs a live cluster and a namespace "
                             "(store_namespace)")
        return KubeStore(api_client, namespace, timeout=timeout)
    raise StoreError(f"unknown store {backend!r}: one of {', '.join(BACKENDS)}")


SA_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
DEFAULT_PATH = "~/.local/state/gpubot/state.db"


def api_client_of(view: Any) -> Any:
    """The kubernetes ApiClient under the bot's view (SharedReads and GuardedView wrap the
    LiveView as ``.view``), or None on a snapshot."""
    while view is not None and not hasattr(view, "api_client"):
        view = getattr(view, "view", None)
    return None if view is None else view.api_client


def open_configured(settings: Any, api_client: Any) -> Store:
    """The store the settings name (``store``, ``store_path``, ``store_namespace``): the
    SQLite file (its directory made), or ConfigMaps in the configured namespace, else the
    pod's own (its service account's), else ``default``. One store for approvals and alert
    threads alike."""
    namespace = settings.store_namespace
    if not namespace:
        try:
            with open(SA_NAMESPACE) as f:
                namespace = f.read().strip()
        except OSError:
            namespace = "default"
    path = settings.store_path or os.path.expanduser(DEFAULT_PATH)
    if settings.store == "sqlite":
        try:
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        except OSError as err:
            raise StoreError(f"cannot make the directory of the store file {path}: "
                             f"{err.strerror}") from None
    return open_store(settings.store, path=path, api_client=api_client, namespace=namespace,
                      timeout=settings.kube_timeout)


from .audit import AuditLog  # noqa: E402 (audit imports Store and Record from here)

__all__ = ["BACKENDS", "AuditLog", "Data", "Record", "Store", "StoreError", "api_client_of",
           "check_name", "open_configured", "open_store"]
