"""The sentinel's loop: watch events in, incidents out.

    sentinel = Sentinel(watcher, book, publisher, thresholds, leader=..., ready=cache.settled)
    threading.Thread(target=sentinel.run, args=(stop,)).start()

Each tick: the watcher evaluates what changed; then, on the leader only (one replica posts:
``bot/sentinel/lease.py``) and only once the watch cache is synced (before, "no observation"
would resolve every open incident), the book makes the store agree with what has lasted long
enough, and every incident whose card is behind is handed to the publisher. A publisher that
fails leaves the incident behind for the next tick.

A tick runs every ``interval`` seconds, and sooner (at most once a ``min_gap``) when watch
events are waiting. The detectors over metrics (with Prometheus) are polled by the leader on
a timer of their own: on the first tick ``poll_every`` seconds after their last poll, never
for a watch event (a poll asks Prometheus over the whole window).

Every replica keeps the store's open incidents (``open_now``): what ``/gpu sentinel`` and
``/metrics`` show, without a store read of their own. The store is read again only when it
may have changed: after this replica wrote to it (or tried), when it becomes the leader, and
every ``interval`` (another replica's writes); in between, a tick works on what it last read.
Under churn a tick runs every second or so, and each read parses every incident's members:
reading the store four times a tick was a fifth of the sentinel's CPU at full size.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from bot.sentinel.incidents import Incident, IncidentBook
from bot.sentinel.watcher import Watcher
from bot.store import StoreError

log = logging.getLogger("gpubot.sentinel")


class Publisher(Protocol):
    def publish(self, incident: Incident, now: float) -> Mapping[str, Any] | None:
        """Show the incident as it now is; what was posted (kept as ``incident.posted``, with
        ``rev``), or None to try again next tick. May raise: the same."""
        ...


class Leader(Protocol):
    def is_leader(self) -> bool: ...


class Always:
    """One replica (the SQLite store): always the leader."""

    def is_leader(self) -> bool:
        return True


@dataclass
class TickResult:
    evaluated: int = 0
    changed: list[Incident] = field(default_factory=list)
    published: int = 0
    failed: int = 0
    leader: bool = False
    polled: bool = False  # the detectors over metrics asked Prometheus this tick


class Sentinel:
    def __init__(self, watcher: Watcher, book: IncidentBook, publisher: Publisher,
                 thresholds: Mapping[str, float], *, leader: Leader | None = None,
                 ready: Callable[[], bool] = lambda: True, interval: float = 15.0,
                 min_gap: float = 1.0, clock: Callable[[], float] = time.time,
                 on_tick: Callable[[TickResult, float], None] | None = None,
                 poll_every: float = 60.0,
                 unreadable: Callable[[], str | None] = lambda: None) -> None:
        self.watcher = watcher
        self.book = book
        self.publisher = publisher
        self.thresholds = dict(thresholds)
        self.leader = leader or Always()
        self.ready = ready
        # Why its cluster cannot be read now (the watch cache's failing list or watch), or
        # None: what /gpu sentinel says of a cluster that is down.
        self.unreadable = unreadable
        self.interval = interval
        self.min_gap = min_gap
        self.clock = clock
        self.on_tick = on_tick
        self._scanned = False
        self._wake = threading.Event()
        self.ticks = 0
        self.seconds = 0.0  # thread CPU time of every tick (the bench's detector share)
        self.poll_every = poll_every
        self._polled: float | None = None  # the clock at the last poll
        self.leading = False  # the last tick's
        # The store's open incidents after the last tick, and when they were read (None:
        # no tick yet has; the watch cache may not be synced).
        self.open_now: tuple[Incident, ...] = ()
        self.open_read: float | None = None
        # The store's incidents as last read, when (the clock), and the book's writes then.
        self._known: list[Incident] | None = None
        self._known_at = 0.0
        self._known_writes = 0

    def changed(self, kind: str, namespace: str, name: str) -> None:
        """The watch cache's listener: note the object, wake the loop."""
        self.watcher.changed(kind, namespace, name)
        self._wake.set()

    def relisted(self, kind: str) -> None:
        self.watcher.relisted(kind)
        self._wake.set()

    def wake(self) -> None:
        """Run the next tick now (or, once ``stop`` is set, end ``run`` now)."""
        self._wake.set()

    def tick(self) -> TickResult:
        started = time.thread_time()
        out = TickResult()
        if not self.ready():
            return out
        try:
            if not self._scanned:  # the first tick after the cache synced sees everything
                self.watcher.scan()
                self._scanned = True
            out.evaluated = self.watcher.evaluate()
            was_leading = self.leading
            out.leader = self.leading = self.leader.is_leader()
            if out.leader:
                out.polled = self._poll()
                now = self.clock()
                # Just elected: the last leader's writes are not in what this one read.
                known = self._incidents(fresh=not was_leading)
                due = self.watcher.due(now, self.thresholds, self.book.open_groups(known))
                out.changed = self.book.sync(due, now, known)
                out.published, out.failed = self.flush(now)
            self._read_open()
        finally:  # a tick the store failed counts too: it ran on the synced cache
            self.ticks += 1
            self.seconds += time.thread_time() - started
        if self.on_tick is not None:
            self.on_tick(out, time.thread_time() - started)
        return out

    def _poll(self) -> bool:
        """Poll the detectors over metrics when their timer is due."""
        now = self.clock()
        if not self.watcher.polled or (self._polled is not None
                                       and now - self._polled < self.poll_every):
            return False
        self._polled = now
        self.watcher.poll()
        return True

    def _incidents(self, *, fresh: bool = False) -> list[Incident]:
        """The store's incidents: read again when they may have changed (see above)."""
        now = self.clock()
        if (fresh or self._known is None or self.book.writes != self._known_writes
                or now - self._known_at >= self.interval):
            writes = self.book.writes
            self._known = self.book.all()
            self._known_at, self._known_writes = now, writes
        return self._known

    def _read_open(self) -> None:
        try:
            known = self._incidents()
        except StoreError as err:  # what was read last stands; the leader's sync says more
            log.warning("sentinel: cannot read the open incidents: %s", err)
            return
        self.open_now = tuple(i for i in known if i.state == "open")
        self.open_read = self._known_at

    def flush(self, now: float) -> tuple[int, int]:
        """Hand every incident whose card is behind to the publisher: (posted, failed)."""
        ok = failed = 0
        for inc in self.book.unposted(self._incidents()):
            try:
                posted = self.publisher.publish(inc, now)
            except Exception as err:  # Slack down, rate limited: the next tick tries again
                log.warning("incident %s (%s, %s): not posted: %s", inc.key[:8], inc.detector,
                            inc.group, err)
                posted = None
            if posted is None:
                failed += 1
                continue
            if self.book.mark_posted(inc, {**posted, "rev": inc.rev}):
                ok += 1
        return ok, failed

    def run(self, stop: threading.Event) -> None:
        last = 0.0
        while not stop.is_set():
            # Cleared before the tick: a change noted while it runs (a diagnosis can take
            # seconds) wakes the next one rather than waiting out the interval.
            self._wake.clear()
            try:
                self.tick()
            except Exception:  # the store or the view failed this tick: the bot stays up
                log.exception("sentinel tick failed")
            last = time.monotonic()
            # Sleep to the next timer tick, or wake for watch events (not more often than
            # min_gap: a burst of changes is evaluated together).
            while not stop.is_set():
                left = last + self.interval - time.monotonic()
                if left <= 0:
                    break
                if self._wake.wait(left) and not stop.is_set():
                    gap = last + self.min_gap - time.monotonic()
                    if gap > 0:
                        stop.wait(gap)
                    break
