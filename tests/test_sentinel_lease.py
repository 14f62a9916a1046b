"""The sentinel's Lease (bot/sentinel/lease.py) through the fake API server: one holder;
the other takes it only once it has not been renewed for its duration (by the taker's own
clock), or at once when handed back; an API that fails or refuses stops the holder leading
before anyone else may start."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.sentinel.lease import KubeLease
from tests.fake_kube import FakeKube
from tests.fake_kube.fixtures import connect
from tests.sentinel_cluster import namespace


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    with FakeKube(objects=[namespace("gpubot")]) as fk:
        yield fk


@pytest.fixture
def clients(fake: FakeKube, tmp_path: Path) -> Iterator[list[Any]]:
    out = [connect(fake, tmp_path, f"kubeconfig-{i}") for i in range(2)]
    yield out
    for c in out:
        c.close()


def replicas(clients: list[Any], clock: Clock) -> tuple[KubeLease, KubeLease]:
    a, b = (KubeLease(c, "gpubot", holder=name, duration=15, clock=clock, timeout=5)
            for c, name in zip(clients, ("replica-a", "replica-b"), strict=True))
    return a, b


def test_one_holder_and_a_takeover_after_its_duration(fake: FakeKube, clients: list[Any]
                                                      ) -> None:
    clock = Clock()
    a, b = replicas(clients, clock)
    assert a.round() and a.is_leader()
    assert not b.round() and not b.is_leader()
    lease = fake.store.find("Lease", "gpubot-sentinel", "gpubot")
    assert lease is not None and lease["spec"]["holderIdentity"] == "replica-a"
    assert lease["spec"]["leaseDurationSeconds"] == 15
    clock.t += 5
    assert a.round() and not b.round()  # renewed: b saw a new record, waits again
    clock.t += 14
    assert not b.round()  # 14 s since b last saw it change
    # a stopped renewing (hung, or gone without a word): after its duration b takes it.
    clock.t += 2
    assert b.round() and b.is_leader()
    assert not a.is_leader()  # past its renew deadline (10 s): a stopped before b started
    assert not a.round()  # and it finds b holding it
    lease = fake.store.find("Lease", "gpubot-sentinel", "gpubot")
    assert lease is not None and lease["spec"]["holderIdentity"] == "replica-b"
    assert lease["spec"]["leaseTransitions"] == 1


def test_a_lease_handed_back_is_taken_at_once(fake: FakeKube, clients: list[Any]) -> None:
    clock = Clock()
    a, b = replicas(clients, clock)
    assert a.round() and not b.round()
    a.release()
    assert not a.is_leader()
    assert b.round() and b.is_leader()


def test_a_refused_or_failing_api_stops_the_holder_leading(
        fake: FakeKube, clients: list[Any], caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    a, _ = replicas(clients, clock)
    assert a.round()
    refused = fake.faults.forbid("leases", verb="update")
    caplog.set_level(logging.WARNING, "gpubot.sentinel")
    clock.t += 6
    assert a.round() and a.is_leader()  # not renewed, but within its renew deadline
    clock.t += 3
    assert a.round()
    clock.t += 2
    assert not a.round() and not a.is_leader()  # 11 s since it renewed: past its 10 s
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 1 and "leases" in warned[0] and "gpubot" in warned[0]
    fake.faults.remove(refused)
    assert a.round() and a.is_leader()


def test_two_replicas_racing_for_a_new_lease_get_one_holder(
        fake: FakeKube, clients: list[Any]) -> None:
    import threading

    clock = Clock()
    a, b = replicas(clients, clock)
    results: dict[str, bool] = {}
    go = threading.Barrier(2)

    def run(lease: KubeLease) -> None:
        go.wait()
        results[lease.holder] = lease.round()

    threads = [threading.Thread(target=run, args=(x,)) for x in (a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert sorted(results.values()) == [False, True]
