"""Once a day at ``digest_time`` (``HH:MM``, UTC), on the leader only.

The day is recorded in the store (collection ``digest``, one record) before posting, with a
compare-and-swap: of two replicas, or of a bot and its restarted self, only the one whose
write wins posts. A post that fails hands the day back (the next check tries again); a
claim left by a process that died while posting is taken over after ``CLAIM_TTL``. A bot
that was down at the time posts when it comes back, the same UTC day.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from bot.sentinel.service import Always, Leader
from bot.store import Store

log = logging.getLogger("gpubot.digest")

COLLECTION = "digest"
KEY = "daily"
CLAIM_TTL = 600.0  # seconds a claim to post holds


def parse_hhmm(text: str) -> tuple[int, int]:
    hh, mm = text.split(":")
    return int(hh), int(mm)


class DailyDigest:
    """``post()`` builds and posts the digest and returns what it posted (channel, ts);
    it may raise (Slack down): the day is then handed back."""

    def __init__(self, at: str, store: Store, post: Callable[[], Mapping[str, Any]], *,
                 leader: Leader | None = None, clock: Callable[[], float] = time.time,
                 check_every: float = 60.0) -> None:
        self.hour, self.minute = parse_hhmm(at)
        self.store = store
        self.post = post
        self.leader = leader or Always()
        self.clock = clock
        self.check_every = check_every
        self._done: str | None = None  # the last day seen posted: no store read until tomorrow

    def scheduled(self, now: float) -> datetime:
        """Today's time of the digest (UTC)."""
        day = datetime.fromtimestamp(now, UTC)
        return day.replace(hour=self.hour, minute=self.minute, second=0, microsecond=0)

    def due(self, now: float) -> str | None:
        """The day (``YYYY-MM-DD``) whose digest is due now, or None."""
        at = self.scheduled(now)
        if now < at.timestamp():
            return None
        day = at.date().isoformat()
        if self._done == day:
            return None
        rec = self.store.get(COLLECTION, KEY)
        if rec is not None and rec.data.get("date") == day:
            if rec.data.get("state") == "posted":
                self._done = day
                return None
            if now - float(rec.data.get("at") or 0.0) < CLAIM_TTL:
                return None
        return day

    def tick(self) -> bool:
        """Post the day's digest if it is due here; True when this call posted it."""
        now = self.clock()
        if not self.leader.is_leader():
            return False
        day = self.due(now)
        if day is None:
            return False
        rec = self.store.get(COLLECTION, KEY)
        before = dict(rec.data) if rec is not None else {}
        claim = {"date": day, "state": "posting", "at": now}
        won = (self.store.create(COLLECTION, KEY, claim) if rec is None
               else self.store.update(COLLECTION, KEY, claim, rec.version))
        if not won:
            return False  # another replica claimed it first
        claimed = self.store.get(COLLECTION, KEY)
        try:
            posted = dict(self.post())
        except Exception as err:
            log.warning("digest of %s not posted: %s: %s", day, type(err).__name__, err)
            if claimed is not None:  # hand the day back: the next check tries again
                self.store.update(COLLECTION, KEY, before or {"date": "", "state": "none"},
                                  claimed.version)
            return False
        if claimed is not None:
            self.store.update(COLLECTION, KEY, {**posted, "date": day, "state": "posted",
                                                "at": now}, claimed.version)
        self._done = day
        log.info("digest of %s posted", day)
        return True

    def wait(self, now: float) -> float:
        """Seconds to sleep: to the next scheduled time, at most ``check_every``."""
        at = self.scheduled(now)
        if now >= at.timestamp():
            at += timedelta(days=1)
        return max(min(at.timestamp() - now, self.check_every), 0.05)

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                self.tick()
            except Exception:  # the store failed: try again at the next check
                log.exception("digest check failed")
            stop.wait(self.wait(self.clock()))
