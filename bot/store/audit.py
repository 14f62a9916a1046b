"""``AuditLog``: an append-only list of JSON entries on top of any ``Store``.

Keys are the time in nanoseconds (zero-padded, so they sort) plus a random suffix, so two
replicas appending at once never collide and ``last(n)`` is the newest n. Entries are never
updated; the oldest beyond ``keep`` are dropped every ``prune_every`` appends (a ConfigMap
per entry must not grow without bound).
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .base import Record, Store

COLLECTION = "audit"


class AuditLog:
    def __init__(self, store: Store, *, collection: str = COLLECTION, keep: int = 1000,
                 prune_every: int = 100) -> None:
        self.store = store
        self.collection = collection
        self.keep = keep
        self.prune_every = max(1, prune_every)
        self._appends = 0
        self._lock = threading.Lock()

    def append(self, entry: Mapping[str, Any]) -> str:
        """Store ``entry``; returns its key."""
        while True:
            key = f"{time.time_ns():020d}-{secrets.token_hex(4)}"
            if self.store.create(self.collection, key, entry):
                break
        with self._lock:
            self._appends += 1
            due = self._appends % self.prune_every == 0
        if due:
            self.prune()
        return key

    def last(self, n: int = 20) -> list[Record]:
        """The newest ``n`` entries, newest first."""
        return self.store.list(self.collection, limit=n)

    def prune(self) -> int:
        """Delete entries beyond the newest ``keep``; returns how many went."""
        old = self.store.list(self.collection, limit=self.keep + 10_000)[self.keep:]
        return sum(self.store.delete(self.collection, r.key) for r in old)
