"""Deliveries seen recently, so that a repeated one never runs a command twice."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable


class Dedupe:
    """A bounded set of keys that expire after ``ttl`` seconds. ``first(key)`` is atomic:
    exactly one caller gets True for a key within the TTL."""

    def __init__(self, ttl: float = 600.0, max_keys: int = 50_000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self.max_keys = max_keys
        self._clock = clock
        self._lock = threading.Lock()
        self._keys: OrderedDict[str, float] = OrderedDict()

    def first(self, key: str) -> bool:
        now = self._clock()
        with self._lock:
            while self._keys:
                oldest, at = next(iter(self._keys.items()))
                if now - at < self.ttl and len(self._keys) < self.max_keys:
                    break
                del self._keys[oldest]
            if key in self._keys:
                return False
            self._keys[key] = now
            return True

    def __len__(self) -> int:
        return len(self._keys)
