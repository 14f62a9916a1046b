"""What every store backend shares: the record, the interface, the errors and names."""

from __future__ import annotations

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
