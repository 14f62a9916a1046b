"""The daily digest posted once a day at its time, on the leader only: the day recorded in
the store so that a restart or a second replica does not post it twice, a failed post tried
again, a dead claim taken over; through the fake Slack, once."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from bot.digest.schedule import COLLECTION, KEY, DailyDigest
from bot.digest.slack import start_digest
from bot.sentinel.incidents import IncidentBook
from bot.sentinel.service import Sentinel
from bot.sentinel.watcher import Watcher
from bot.slack.app import SlackBot
from bot.snapshot import load_snapshot
from bot.store import open_store
from bot.store.base import Store
from tests.fake_slack import FakeSlack
from tests.fake_slack.harness import make_settings
from tests.test_sentinel import Clock, Recorder

ROOT = Path(__file__).resolve().parents[1]
CRASH = ROOT / "examples" / "plugin-crashloop-cuda-mismatch"
HOUR = 3600.0


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return open_store("sqlite", path=str(tmp_path / "state.db"))


class Leading:
    def __init__(self, leader: bool = True) -> None:
        self.leader = leader

    def is_leader(self) -> bool:
        return self.leader


DAY = 1_796_428_800.0  # 2026-12-05T00:00:00Z


def test_posted_once_a_day_at_its_time_on_the_leader_only(store: Store) -> None:
    posts: list[float] = []
    clock = Clock(DAY + 8 * HOUR)

    def post() -> dict[str, Any]:
        posts.append(clock.t)
        return {"channel": "C1", "ts": str(len(posts))}

    daily = DailyDigest("09:30", store, post, leader=Leading(), clock=clock)
    assert not daily.tick() and daily.wait(clock.t) == 60.0
    clock.t = DAY + 9.5 * HOUR
    assert daily.tick() and posts == [clock.t]
    clock.t += 60
    assert not daily.tick()
    # A restart (a new process on the same store) and a second replica: not again.
    assert not DailyDigest("09:30", store, post, leader=Leading(), clock=clock).tick()
    rec = store.get(COLLECTION, KEY)
    assert rec is not None and rec.data["date"] == "2026-12-05" and rec.data["ts"] == "1"
    # Tomorrow: not before the time, then once; a follower never posts.
    clock.t = DAY + 24 * HOUR + 9 * HOUR
    assert not daily.tick()
    clock.t += HOUR
    assert not DailyDigest("09:30", store, post, leader=Leading(False), clock=clock).tick()
    assert daily.tick() and len(posts) == 2
    # A bot that was down at the time posts when it comes back, the same day.
    clock.t = DAY + 2 * 24 * HOUR + 23 * HOUR
    assert DailyDigest("09:30", store, post, leader=Leading(), clock=clock).tick()
    assert len(posts) == 3


def test_a_failed_post_is_tried_again_and_a_dead_claim_is_taken_over(store: Store) -> None:
    clock = Clock(DAY + 10 * HOUR)
    down = [True]
    posts: list[str] = []

    def post() -> dict[str, Any]:
        if down[0]:
            raise ConnectionError("slack is down")
        posts.append("x")
        return {"channel": "C1", "ts": "1.0"}

    daily = DailyDigest("09:00", store, post, clock=clock)
    assert not daily.tick() and posts == []
    down[0] = False
    clock.t += 60
    assert daily.tick() and posts == ["x"]
    # A process that died after claiming the day: others wait, then take it over.
    clock.t = DAY + 24 * HOUR + 10 * HOUR
    rec = store.get(COLLECTION, KEY)
    assert rec is not None
    store.update(COLLECTION, KEY, {"date": "2026-12-06", "state": "posting", "at": clock.t},
                 rec.version)
    other = DailyDigest("09:00", store, post, clock=clock)
    assert not other.tick()
    clock.t += 601
    assert other.tick() and len(posts) == 2


def test_the_digest_is_posted_once_through_slack_and_not_again_after_a_restart(
        store: Store) -> None:
    view = load_snapshot(str(CRASH))
    with FakeSlack() as slack:
        settings = make_settings(slack, digest_time="00:00", digest_channel="C0DIGEST")
        bot = SlackBot(settings, view)
        sentinel = Sentinel(Watcher(view), IncidentBook(store), Recorder(), {})
        try:
            running = start_digest(bot, settings, sentinel)
            assert running is not None
            slack.wait_for("files.completeUploadExternal", timeout=30)
            running.stop()
            cards = [c for c in slack.calls("chat.postMessage")
                     if "thread_ts" not in c.params]
            [card] = cards
            assert card.params["channel"] == "C0DIGEST"
            assert "GPU digest" in card.params["text"]
            thread = [c for c in slack.calls("chat.postMessage") if "thread_ts" in c.params]
            assert thread and all(c.params["channel"] == "C0DIGEST" for c in thread)
            # Restarted: the store says the day's digest is out.
            again = start_digest(bot, settings, sentinel)
            assert again is not None
            assert not again.daily.tick()
            time.sleep(0.3)
            again.stop()
            assert len([c for c in slack.calls("chat.postMessage")
                        if "thread_ts" not in c.params]) == 1
        finally:
            bot.close(0)


def test_no_digest_without_a_time_a_channel_or_the_sentinel(store: Store) -> None:
    view = load_snapshot(str(CRASH))
    with FakeSlack() as slack:
        sentinel = Sentinel(Watcher(view), IncidentBook(store), Recorder(), {})
        for overrides, with_sentinel in (({}, True), ({"digest_time": "09:00"}, True),
                                         ({"digest_time": "09:00",
                                           "alert_channel": "C1"}, False)):
            settings = make_settings(slack, **overrides)
            bot = SlackBot(settings, view)
            try:
                assert start_digest(bot, settings,
                                    sentinel if with_sentinel else None) is None
            finally:
                bot.close(0)
