"""The bounded diagnosis pool: deadlines, what timed out, stuck workers replaced; the
deadline guard and shared reads over a cluster view."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from bot.slack.pool import Deadline, DeadlineExceeded, DiagnosisPool
from bot.slack.reads import GuardedView, SharedReads


class Recorder:
    def __init__(self) -> None:
        self.delivered: list[Any] = []
        self.errors: list[BaseException] = []
        self.timeouts: list[str] = []

    def kw(self) -> dict[str, Any]:
        return {"deliver": self.delivered.append, "on_error": self.errors.append,
                "on_timeout": lambda d: self.timeouts.append(d.doing)}


@pytest.fixture
def pool() -> Any:
    p = DiagnosisPool(workers=2, queue_size=3, max_stuck=2)
    yield p
    p.shutdown(timeout=1)


def test_results_are_delivered(pool: DiagnosisPool) -> None:
    r = Recorder()
    job = pool.submit("ok", lambda d: 42, seconds=5, **r.kw())
    assert job is not None and job.wait(5)
    assert r.delivered == [42] and not r.errors and not r.timeouts


def test_errors_are_reported_and_the_worker_survives(pool: DiagnosisPool) -> None:
    r = Recorder()
    job = pool.submit("bad", lambda d: 1 / 0, seconds=5, **r.kw())
    assert job is not None and job.wait(5)
    assert isinstance(r.errors[0], ZeroDivisionError)
    job = pool.submit("ok", lambda d: "fine", seconds=5, **r.kw())
    assert job is not None and job.wait(5) and r.delivered == ["fine"]


def test_a_deadline_says_what_the_diagnosis_was_doing_and_drops_the_late_result(
        pool: DiagnosisPool) -> None:
    r = Recorder()
    release = threading.Event()

    def hang(d: Deadline) -> str:
        d.doing = "listing Pods in ml-team"
        release.wait(10)
        return "late"

    job = pool.submit("hang", hang, seconds=0.3, **r.kw())
    assert job is not None and job.wait(5)
    assert r.timeouts == ["listing Pods in ml-team"]
    release.set()
    time.sleep(0.2)
    assert r.delivered == []


def test_stuck_workers_are_replaced_so_others_still_run(pool: DiagnosisPool) -> None:
    release = threading.Event()
    r = Recorder()
    for _ in range(2):  # both workers hang
        pool.submit("hang", lambda d: release.wait(10), seconds=0.2, **r.kw())
    time.sleep(0.6)
    assert pool.stuck == 2
    quick = pool.submit("quick", lambda d: "answered", seconds=5, **r.kw())
    assert quick is not None and quick.wait(3)
    assert r.delivered == ["answered"]
    release.set()
    time.sleep(0.3)
    assert pool.stuck == 0


def test_a_full_queue_refuses_instead_of_waiting_forever() -> None:
    p = DiagnosisPool(workers=1, queue_size=1)
    release = threading.Event()
    r = Recorder()
    try:
        assert p.submit("a", lambda d: release.wait(5), seconds=5, **r.kw()) is not None
        time.sleep(0.1)
        assert p.submit("b", lambda d: 1, seconds=5, **r.kw()) is not None
        assert p.submit("c", lambda d: 1, seconds=5, **r.kw()) is None
    finally:
        release.set()
        p.shutdown(2)


class SlowView:
    source = "slow"

    def __init__(self, delay: float = 0.2) -> None:
        self.delay = delay
        self.calls = 0
        self.lock = threading.Lock()

    def list(self, kind: str, namespace: str | None = None, **kw: Any) -> list[Any]:
        with self.lock:
            self.calls += 1
        time.sleep(self.delay)
        return [{"kind": kind}]

    def get(self, kind: str, name: str, namespace: str | None = None) -> Any:
        time.sleep(self.delay)
        return None

    def events(self, kind: str, name: str, namespace: str | None = None) -> list[Any]:
        return []

    def logs(self, namespace: str, pod: str, container: str | None = None) -> str | None:
        return None

    def now(self) -> Any:
        return None


def test_guarded_view_stops_reading_after_the_deadline() -> None:
    d = Deadline(0.25)
    d.start()
    v = GuardedView(SlowView(0.2), d)  # type: ignore[arg-type]
    v.list("Pod", "ml-team")
    assert d.doing == "analysing what it read"
    time.sleep(0.1)
    with pytest.raises(DeadlineExceeded):
        v.list("Node")


def test_shared_reads_make_concurrent_identical_reads_one_request() -> None:
    slow = SlowView(0.3)
    shared = SharedReads(slow, ttl=1.0)  # type: ignore[arg-type]
    out: list[Any] = []
    threads = [threading.Thread(target=lambda: out.append(shared.list("Pod", "ml-team")))
               for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert slow.calls == 1 and len(out) == 20
    assert shared.requests == 1 and shared.shared == 19
    shared.list("Pod", "other")
    assert slow.calls == 2


def test_shared_reads_expire_and_do_not_cache_errors() -> None:
    now = [0.0]

    class Failing(SlowView):
        fail = True

        def list(self, kind: str, namespace: str | None = None, **kw: Any) -> list[Any]:
            self.calls += 1
            if self.fail:
                raise RuntimeError("boom")
            return []

    view = Failing(0)
    shared = SharedReads(view, ttl=2.0, clock=lambda: now[0])  # type: ignore[arg-type]
    with pytest.raises(RuntimeError):
        shared.list("Pod")
    view.fail = False
    shared.list("Pod")
    shared.list("Pod")
    assert view.calls == 2
    now[0] = 5
    shared.list("Pod")
    assert view.calls == 3


def test_waiting_for_a_shared_read_respects_the_waiters_deadline() -> None:
    slow = SlowView(1.0)
    shared = SharedReads(slow)  # type: ignore[arg-type]
    leader = threading.Thread(target=lambda: shared.list("Pod"))
    leader.start()
    time.sleep(0.05)
    d = Deadline(0.2)
    d.start()
    with pytest.raises(DeadlineExceeded):
        GuardedView(shared, d).list("Pod")  # type: ignore[arg-type]
    assert leader.is_alive()  # gave up at its own deadline, not when the read finished
    leader.join()


def test_a_job_that_waited_two_deadlines_for_a_worker_times_out_without_running() -> None:
    p = DiagnosisPool(workers=1, queue_size=4, max_stuck=0)
    release = threading.Event()
    r = Recorder()
    ran: list[str] = []
    try:
        p.submit("hog", lambda d: release.wait(5), seconds=10, **r.kw())
        time.sleep(0.05)
        job = p.submit("late", lambda d: ran.append("ran"), seconds=0.2, **r.kw())
        assert job is not None
        time.sleep(0.6)
        release.set()
        assert job.wait(5)
        assert ran == [] and "for a free worker" in r.timeouts[-1]
    finally:
        release.set()
        p.shutdown(2)


def test_prefetch_hints_reach_a_view_that_takes_them() -> None:
    class Prefetching(SlowView):
        def __init__(self) -> None:
            super().__init__(0)
            self.asked: list[Any] = []

        def prefetch(self, requests: Any) -> int:
            self.asked.append(list(requests))
            return len(self.asked[-1])

    view = Prefetching()
    shared = SharedReads(view)  # type: ignore[arg-type]
    shared.list("Pod", "a")
    d = Deadline(5)
    d.start()
    from handlers.view import Reader

    Reader(GuardedView(shared, d)).prefetch(  # type: ignore[arg-type]
        [("Pod", "a", None, None), ("Node", None, None, None)])
    assert view.asked == [[("Node", None, None, None)]]  # "Pod in a" was just read


def test_pods_of_many_nodes_pass_through_to_a_view_that_answers_them_at_once() -> None:
    from handlers.view import Reader

    class Bulk(SlowView):
        def pods_on(self, nodes: Any) -> dict[str, list[Any]]:
            return {n: [{"kind": "Pod", "metadata": {"name": f"p-{n}"}}] for n in nodes}

    d = Deadline(5)
    d.start()
    got = Reader(GuardedView(SharedReads(Bulk(0)), d)).pods_on(  # type: ignore[arg-type]
        ["a", "b"])
    assert {n: [p["metadata"]["name"] for p in ps] for n, ps in got.items()} == {
        "a": ["p-a"], "b": ["p-b"]}
    plain = SlowView(0)  # no bulk answer: one list per node, through the shared reads
    Reader(GuardedView(SharedReads(plain), d)).pods_on(["a", "b"])  # type: ignore[arg-type]
    assert plain.calls == 2
