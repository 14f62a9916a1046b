"""A bounded queue of alert groups between the webhook and Slack.

The webhook only merges the payload into the group's pending entry and returns; workers
take one group at a time (never the same group twice at once) and hand it to
``AlertThreads.handle``. A storm of webhooks for the same group collapses into the latest
merged state, so the card count is bounded by the groups, not the alerts; nothing is
dropped: alerts merge by fingerprint, and a group that fails (Slack still rate limiting
after its retries, another replica posting) goes back in the queue. When ``max_groups``
distinct groups are already waiting, ``submit`` says no and the receiver answers 503, so
Alertmanager retries later.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import replace

from bot.alerts.payload import AlertGroup

log = logging.getLogger("gpubot.alerts")


def merge(old: AlertGroup, new: AlertGroup) -> AlertGroup:
    by_fp = {a.fingerprint: a for a in old.alerts}
    by_fp.update({a.fingerprint: a for a in new.alerts})
    alerts = tuple(by_fp.values())
    status = "firing" if any(a.status == "firing" for a in alerts) else "resolved"
    return replace(new, alerts=alerts, status=status)


class AlertNotifier:
    def __init__(self, handle: Callable[[AlertGroup, str], None], *, max_groups: int = 256,
                 workers: int = 2, retry_delay: float = 1.0, max_attempts: int = 20,
                 key_of: Callable[[AlertGroup], str] | None = None) -> None:
        """``key_of``: what makes two webhooks one group (``AlertThreads.key_of``: the
        groupKey in its cluster); the groupKey alone by default."""
        self._handle = handle
        self._key_of = key_of or (lambda group: group.group_key)
        self.max_groups = max_groups
        self.retry_delay = retry_delay
        self.max_attempts = max_attempts
        self._cond = threading.Condition()
        self._pending: dict[str, tuple[AlertGroup, str, int]] = {}
        self._ready: deque[str] = deque()
        self._busy: set[str] = set()
        self._stopping = False
        self.handled = 0
        self.failed = 0
        self._threads = [threading.Thread(target=self._work, name=f"gpubot-alerts-{i}",
                                          daemon=True) for i in range(workers)]
        for t in self._threads:
            t.start()

    @property
    def queued(self) -> int:
        with self._cond:
            return len(self._pending)

    def submit(self, group: AlertGroup, channel: str) -> bool:
        """Queue the group (merged with its waiting state); False when the queue is full."""
        key = self._key_of(group)
        with self._cond:
            waiting = self._pending.get(key)
            if waiting is not None:
                self._pending[key] = (merge(waiting[0], group), waiting[1], waiting[2])
            else:
                if len(self._pending) >= self.max_groups or self._stopping:
                    return False
                self._pending[key] = (group, channel, 0)
                if key not in self._busy:
                    self._ready.append(key)
            self._cond.notify()
        return True

    def idle(self, timeout: float = 30.0) -> bool:
        """Wait until nothing is queued or running (tests, shutdown)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._pending or self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.1))
        return True

    def close(self, timeout: float = 10.0) -> None:
        self.idle(timeout)
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        for t in self._threads:
            t.join(timeout=1.0)

    def _take(self) -> tuple[str, AlertGroup, str, int] | None:
        with self._cond:
            while not self._stopping:
                while self._ready:
                    key = self._ready.popleft()
                    if key in self._busy or key not in self._pending:
                        continue
                    group, channel, attempts = self._pending.pop(key)
                    self._busy.add(key)
                    return key, group, channel, attempts
                self._cond.wait(0.5)
        return None

    def _work(self) -> None:
        while True:
            item = self._take()
            if item is None:
                return
            key, group, channel, attempts = item
            ok = False
            try:
                self._handle(group, channel)
                ok = True
                self.handled += 1
            except Exception as err:
                log.warning("alert group %s: %s: %s (attempt %d)", key, type(err).__name__,
                            err, attempts + 1)
            if not ok:
                if attempts + 1 >= self.max_attempts:
                    self.failed += 1
                    log.error("alert group %s dropped after %d attempts", key, attempts + 1)
                else:
                    time.sleep(min(self.retry_delay * (attempts + 1), 30.0))
            with self._cond:
                self._busy.discard(key)
                if not ok and attempts + 1 < self.max_attempts:
                    waiting = self._pending.get(key)
                    merged = merge(group, waiting[0]) if waiting else group
                    self._pending[key] = (merged, channel, attempts + 1)
                if key in self._pending:
                    self._ready.append(key)
                self._cond.notify_all()
