"""The request log: every request the fake answered (or dropped), in order."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO
from urllib.parse import parse_qsl, urlsplit


@dataclass
class RequestRecord:
    method: str
    path: str  # with the query string, as sent
    status: int = 0  # 0: connection dropped without a response
    verb: str = ""
    resource: str = ""
    namespace: str | None = None
    user_agent: str = ""
    dry_run: bool = False  # dryRun=All in the query or in a DeleteOptions body
    at: float = field(default_factory=time.time)

    @property
    def query(self) -> dict[str, str]:
        return dict(parse_qsl(urlsplit(self.path).query, keep_blank_values=True))

    def __str__(self) -> str:
        line = f"{self.method} {self.path} {self.status or '-'}"
        if self.dry_run and self.query.get("dryRun") != "All":
            line += " body:dryRun=All"  # kubectl delete --dry-run=server says it in the body
        return line


class RequestLog:
    """Every request, in order; also one line each to a file when given, flushed at once."""

    def __init__(self, path: str | Path | None = None) -> None:
        self._lock = threading.Lock()
        self._records: list[RequestRecord] = []
        self._file: IO[str] | None = None
        if path:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            self._file = open(path, "a", buffering=1)  # noqa: SIM115 (closed by close())

    def add(self, rec: RequestRecord) -> None:
        with self._lock:
            self._records.append(rec)
            if self._file is not None:
                self._file.write(f"{rec}\n")
                self._file.flush()

    def __iter__(self) -> Iterator[RequestRecord]:
        with self._lock:
            return iter(list(self._records))

    def __len__(self) -> int:
        return len(self._records)

    def __getitem__(self, i: int) -> RequestRecord:
        with self._lock:
            return self._records[i]

    def paths(self, method: str | None = None) -> list[str]:
        return [r.path for r in self if method is None or r.method == method]

    def find(self, method: str | None = None, path_prefix: str = "",
             **query: str) -> list[RequestRecord]:
        out = []
        for r in self:
            if method and r.method != method:
                continue
            if not r.path.startswith(path_prefix):
                continue
            q = r.query
            if all(q.get(k) == v for k, v in query.items()):
                out.append(r)
        return out

    def clear(self) -> None:
        with self._lock:
            self._records.clear()

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None
