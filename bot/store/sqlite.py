"""``SqliteStore``: the store in one SQLite file (the default, for a single replica).

Each operation is one SQL statement in autocommit mode, so it is atomic by itself:
``INSERT OR IGNORE`` is create-if-absent, ``UPDATE ... WHERE version = ?`` is the
compare-and-swap. WAL mode lets readers run beside a writer; ``timeout`` is how long a
writer waits for another process's lock before giving up (``StoreError``). Each thread
gets its own connection (sqlite3 connections are not meant to be shared).
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .base import Record, StoreError, check_name

_SCHEMA = """
CREATE TABLE IF NOT EXISTS records (
    collection TEXT NOT NULL,
    key TEXT NOT NULL,
    data TEXT NOT NULL,
    version TEXT NOT NULL,
    created REAL NOT NULL,
    updated REAL NOT NULL,
    PRIMARY KEY (collection, key)
);
CREATE INDEX IF NOT EXISTS records_by_age ON records (collection, created);
"""
_COLUMNS = "collection, key, data, version, created, updated"


class SqliteStore:
    def __init__(self, path: str | Path, *, timeout: float = 10.0) -> None:
        self.path = Path(path)
        self.timeout = timeout
        self._local = threading.local()
        self._lock = threading.Lock()
        self._conns: list[sqlite3.Connection] = []
        self._closed = False
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise StoreError(f"cannot create the directory of the store {self.path}: "
                             f"{err.strerror}") from err
        with self._errors("open"):
            conn = self._conn()
            conn.execute("PRAGMA journal_mode=WAL")
            conn.executescript(_SCHEMA)

    # -- Store --------------------------------------------------------------------------------

    def get(self, collection: str, key: str) -> Record | None:
        check_name(collection, key)
        with self._errors("read"):
            row = self._conn().execute(
                f"SELECT {_COLUMNS} FROM records WHERE collection = ? AND key = ?",
                (collection, key)).fetchone()
        return _record(row) if row else None

    def create(self, collection: str, key: str, data: Mapping[str, Any]) -> bool:
        check_name(collection, key)
        text = _dumps(data)
        now = time.time()
        with self._errors("write"):
            cur = self._conn().execute(
                f"INSERT OR IGNORE INTO records ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",
                (collection, key, text, _version(), now, now))
        return cur.rowcount == 1

    def update(self, collection: str, key: str, data: Mapping[str, Any],
               expected_version: str) -> bool:
        check_name(collection, key)
        text = _dumps(data)
        with self._errors("write"):
            cur = self._conn().execute(
                "UPDATE records SET data = ?, version = ?, updated = ? "
                "WHERE collection = ? AND key = ? AND version = ?",
                (text, _version(), time.time(), collection, key, expected_version))
        return cur.rowcount == 1

    def list(self, collection: str, limit: int = 50) -> list[Record]:
        check_name(collection)
        with self._errors("read"):
            rows = self._conn().execute(
                f"SELECT {_COLUMNS} FROM records WHERE collection = ? "
                "ORDER BY created DESC, key DESC LIMIT ?", (collection, max(0, limit))).fetchall()
        return [_record(r) for r in rows]

    def delete(self, collection: str, key: str, expected_version: str | None = None) -> bool:
        check_name(collection, key)
        sql = "DELETE FROM records WHERE collection = ? AND key = ?"
        args: tuple[str, ...] = (collection, key)
        if expected_version is not None:
            sql += " AND version = ?"
            args += (expected_version,)
        with self._errors("write"):
            cur = self._conn().execute(sql, args)
        return cur.rowcount == 1

    def close(self) -> None:
        with self._lock:
            self._closed = True
            conns, self._conns = self._conns, []
        for conn in conns:
            conn.close()

    # -- plumbing ---------------------------------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
        with self._lock:
            if self._closed:
                raise StoreError(f"the store {self.path} is closed")
            conn = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None,
                                   check_same_thread=False)
            self._conns.append(conn)
        conn.execute("PRAGMA synchronous=NORMAL")  # durable at each checkpoint; WAL-safe
        self._local.conn = conn
        return conn

    @contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as err:
            raise StoreError(f"cannot {what} the store {self.path}: {err}") from err

    def __repr__(self) -> str:
        return f"SqliteStore({str(self.path)!r})"


def _version() -> str:
    return secrets.token_hex(8)


def _dumps(data: Mapping[str, Any]) -> str:
    try:
        return json.dumps(dict(data), separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError) as err:
        raise ValueError(f"store: record data must be JSON: {err}") from err


def _record(row: tuple[Any, ...]) -> Record:
    collection, key, data, version, created, updated = row
    return Record(collection, key, json.loads(data), version, float(created), float(updated))
