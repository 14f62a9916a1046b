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
from typing import Any

from .audit import AuditLog
from .base import BACKENDS, MAX_KEY, Data, Record, Store, StoreError, check_name

__all__ = ["BACKENDS", "MAX_KEY", "AuditLog", "Data", "Record", "Store", "StoreError",
           "api_client_of", "check_name", "open_configured", "open_store"]


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



__all__ = ["BACKENDS", "AuditLog", "Data", "Record", "Store", "StoreError", "api_client_of",
           "check_name", "open_configured", "open_store"]
