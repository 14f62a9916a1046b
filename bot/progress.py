"""A live progress line on a terminal (stderr), erased when the work is done.

    with Progress.on(sys.stderr, enabled=not json_output) as progress:
        load_snapshot(path, progress=progress.files)

Nothing is written when the stream is not a terminal, when disabled, or when the work ends
before ``delay`` seconds: a small snapshot or cluster shows nothing at all. Thread-safe:
a live view lists kinds from a pool of threads.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import TextIO

_ERASE = "\r\x1b[K"


class Progress:
    def __init__(self, stream: TextIO, *, delay: float = 0.3, interval: float = 0.1,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream
        self.delay = delay
        self.interval = interval
        self._clock = clock
        self._start = clock()
        self._last = float("-inf")
        self._shown = False
        self._lock = threading.Lock()
        self._lists: dict[str, tuple[int, int]] = {}

    @classmethod
    def on(cls, stream: TextIO, *, enabled: bool = True, delay: float = 0.3) -> Progress:
        """A Progress that writes only if ``enabled`` and ``stream`` is a terminal."""
        return cls(stream, delay=delay) if enabled and _isatty(stream) else _Silent(stream)

    def show(self, text: str) -> None:
        now = self._clock()
        with self._lock:
            if now - self._start < self.delay or now - self._last < self.interval:
                return
            self._last = now
            self._shown = True
            self.stream.write(f"{_ERASE}gpubot: {text}")
            self.stream.flush()

    # -- what the loaders report -------------------------------------------------------------

    def files(self, files: int, nbytes: int) -> None:
        """A snapshot being read: files and bytes so far."""
        self.show(f"reading snapshot: {files:,} files, {_size(nbytes)}")

    def pages(self, kind: str, pages: int, objects: int) -> None:
        """A cluster being listed: pages and objects so far of ``kind``."""
        with self._lock:
            self._lists[kind] = (pages, objects)
            total = sum(o for _, o in self._lists.values())
        self.show(f"listing {kind}: page {pages}, {objects:,} objects "
                  f"({total:,} in {len(self._lists)} kinds)")

    def done(self) -> None:
        with self._lock:
            if self._shown:
                self.stream.write(_ERASE)
                self.stream.flush()
                self._shown = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.done()


class _Silent(Progress):
    def show(self, text: str) -> None:
        pass


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # closed or not a real stream
        return False


def _size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB"):
        if size < 1024:
            return f"{size:.0f} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"
