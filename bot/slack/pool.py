"""A bounded pool for diagnoses: a fixed number of workers, a bounded queue, a deadline each.

    pool = DiagnosisPool(workers=8, queue_size=64)
    job = pool.submit("why-pending ml-team/train-0", work, deliver=post_card,
                      on_error=tell_user, on_timeout=say_what_timed_out, seconds=60)
    if job is None: ...  # the queue is full: tell the user to try again

``work(deadline)`` runs in a worker; its result goes to ``deliver`` (outside the deadline:
posting to Slack is not cut short). The deadline runs from when a worker starts the job; a
job that waited more than twice its deadline for a worker is timed out without running. When
the deadline passes first, ``on_timeout(deadline)``
runs at once (``deadline.doing`` says what the diagnosis was waiting for) and a late result
is dropped. The deadline is also a cancellation token: ``deadline.check()`` (called before
every cluster read, see ``reads.GuardedView``) raises ``DeadlineExceeded`` so an abandoned
diagnosis stops at its next read. A worker stuck in one read past its deadline is replaced
by a fresh one (at most ``max_stuck`` at a time), so a hung cluster never takes the pool.

Callbacks run on a separate small notifier pool, never in the watchdog.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from handlers.errors import GpubotError
from handlers.view import ViewError

log = logging.getLogger("gpubot.slack.pool")


class DeadlineExceeded(Exception):
    """Raised inside an abandoned diagnosis; never reaches the user."""


class Deadline:
    """Seconds a diagnosis may run, from when a worker picks it up; what it is doing now."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = seconds
        self._clock = clock
        self.started: float | None = None
        self.expires_at: float | None = None
        self.doing = "waiting for a worker"
        self._cancelled = threading.Event()

    def start(self) -> None:
        self.started = self._clock()
        self.expires_at = self.started + self.seconds
        self.doing = "starting"

    def remaining(self) -> float:
        if self.expires_at is None:
            return self.seconds
        return max(0.0, self.expires_at - self._clock())

    def elapsed(self) -> float:
        return 0.0 if self.started is None else self._clock() - self.started

    @property
    def expired(self) -> bool:
        return self._cancelled.is_set() or (
            self.expires_at is not None and self._clock() >= self.expires_at)

    def cancel(self) -> None:
        self._cancelled.set()

    def check(self) -> None:
        if self.expired:
            raise DeadlineExceeded(self.doing)


class State(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    DELIVERING = "delivering"
    DONE = "done"
    TIMED_OUT = "timed out"
    FAILED = "failed"


@dataclass(eq=False)
class Job:
    name: str
    work: Callable[[Deadline], Any]
    deliver: Callable[[Any], None]
    on_error: Callable[[BaseException], None]
    on_timeout: Callable[[Deadline], None]
    deadline: Deadline
    submitted: float = field(default_factory=time.monotonic)
    state: State = State.QUEUED
    finished: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def wait(self, timeout: float | None = None) -> bool:
        """Until the user has been answered (delivered, failed or timed out)."""
        return self.finished.wait(timeout)


class _Worker(threading.Thread):
    def __init__(self, pool: DiagnosisPool, n: int) -> None:
        super().__init__(name=f"gpubot-diagnosis-{n}", daemon=True)
        self.pool = pool
        self.retire = False  # replaced while stuck: exit after the current job
        self.job: Job | None = None

    def run(self) -> None:
        while not self.retire:
            job = self.pool._queue.get()
            if job is None:
                return
            self.job = job
            try:
                self.pool._run(job)
            finally:
                self.job = None
        self.pool._retired(self)


class DiagnosisPool:
    def __init__(self, workers: int = 8, queue_size: int = 64, *, max_stuck: int = 8,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.workers = workers
        self.queue_size = queue_size
        self.max_stuck = max_stuck
        self._clock = clock
        self._queue: queue.Queue[Job | None] = queue.Queue(maxsize=queue_size)
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._heap: list[tuple[float, int, Job, _Worker]] = []
        self._seq = itertools.count()
        self._names = itertools.count(1)
        self._threads: set[_Worker] = set()
        self._stuck: set[_Worker] = set()
        self._running = 0
        self._closed = False
        self._notifier = ThreadPoolExecutor(2, thread_name_prefix="gpubot-notify")
        for _ in range(workers):
            self._spawn()
        self._watchdog = threading.Thread(target=self._watch, name="gpubot-watchdog",
                                          daemon=True)
        self._watchdog.start()

    # -- public -----------------------------------------------------------------------------

    def submit(self, name: str, work: Callable[[Deadline], Any], *,
               deliver: Callable[[Any], None], on_error: Callable[[BaseException], None],
               on_timeout: Callable[[Deadline], None], seconds: float) -> Job | None:
        """Queue a diagnosis; None when the queue is full (or the pool is shut down)."""
        job = Job(name, work, deliver, on_error, on_timeout, Deadline(seconds, self._clock),
                  submitted=self._clock())
        if self._closed:
            return None
        try:
            self._queue.put_nowait(job)
        except queue.Full:
            return None
        return job

    @property
    def queued(self) -> int:
        return self._queue.qsize()

    @property
    def running(self) -> int:
        return self._running

    @property
    def stuck(self) -> int:
        return len(self._stuck)

    def shutdown(self, timeout: float = 10.0) -> bool:
        """Take no new jobs, let queued and running ones finish for up to ``timeout`` s.
        True when everything finished."""
        self._closed = True
        deadline = time.monotonic() + timeout
        while (self._queue.qsize() or self._running) and time.monotonic() < deadline:
            time.sleep(0.05)
        done = not self._queue.qsize() and not self._running
        with self._lock:
            threads = list(self._threads)
        for _ in threads:
            try:
                self._queue.put_nowait(None)
            except queue.Full:
                break
        with self._wake:
            self._wake.notify_all()
        self._notifier.shutdown(wait=True, cancel_futures=False)
        return done

    # -- workers ----------------------------------------------------------------------------

    def _spawn(self) -> None:
        w = _Worker(self, next(self._names))
        with self._lock:
            self._threads.add(w)
        w.start()

    def _retired(self, worker: _Worker) -> None:
        with self._lock:
            self._threads.discard(worker)
            self._stuck.discard(worker)

    def _run(self, job: Job) -> None:
        worker = threading.current_thread()
        assert isinstance(worker, _Worker)
        waited = self._clock() - job.submitted
        if waited > 2 * job.deadline.seconds:
            # Every worker was busy for two deadlines (stuck ones are replaced after one):
            # answer now rather than much later.
            with job.lock:
                job.state = State.TIMED_OUT
            job.deadline.doing = "waiting for a free worker (all were busy)"
            self._notify(job, job.on_timeout, job.deadline)
            return
        with job.lock:
            job.state = State.RUNNING
            job.deadline.start()
        assert job.deadline.expires_at is not None
        with self._wake:
            self._running += 1
            heapq.heappush(self._heap, (job.deadline.expires_at, next(self._seq), job, worker))
            self._wake.notify()
        try:
            result = job.work(job.deadline)
        except DeadlineExceeded:
            self._finish(job, None, None, timed_out_inside=True)
        except Exception as err:  # a bug in a handler must not kill the worker
            self._finish(job, None, err)
        else:
            self._finish(job, result, None)
        finally:
            with self._lock:
                self._running -= 1

    def _finish(self, job: Job, result: Any, error: BaseException | None, *,
                timed_out_inside: bool = False) -> None:
        with job.lock:
            if job.state is not State.RUNNING:
                log.info("%s finished after its deadline (%.1fs); result dropped", job.name,
                         job.deadline.elapsed())
                return
            if timed_out_inside:
                job.state = State.TIMED_OUT
            else:
                job.state = State.DELIVERING if error is None else State.FAILED
        if timed_out_inside:
            self._notify(job, job.on_timeout, job.deadline)
        elif error is not None:
            if isinstance(error, GpubotError):  # not found, usage: the user's, not ours
                log.info("%s: %s", job.name, error)
            elif isinstance(error, ViewError):
                log.warning("%s: %s", job.name, error)
            else:
                log.error("%s failed", job.name, exc_info=error)
            self._notify(job, job.on_error, error)
        else:
            self._call(job, job.deliver, result)  # in the worker: deliveries keep order

    def _notify(self, job: Job, fn: Callable[[Any], None], arg: Any) -> None:
        try:
            self._notifier.submit(self._call, job, fn, arg)
        except RuntimeError:  # shut down: answer in this thread
            self._call(job, fn, arg)

    def _call(self, job: Job, fn: Callable[[Any], None], arg: Any) -> None:
        try:
            fn(arg)
        except Exception:
            log.exception("answering %s failed", job.name)
        finally:
            with job.lock:
                if job.state is State.DELIVERING:
                    job.state = State.DONE
            job.finished.set()

    # -- deadlines --------------------------------------------------------------------------

    def _watch(self) -> None:
        while True:
            with self._wake:
                while not self._closed:
                    now = self._clock()
                    while self._heap and self._heap[0][2].state is not State.RUNNING:
                        heapq.heappop(self._heap)
                    if self._heap and self._heap[0][0] <= now:
                        break
                    wait = self._heap[0][0] - now if self._heap else None
                    self._wake.wait(min(wait, 0.5) if wait is not None else 0.5)
                if self._closed:
                    return
                _, _, job, worker = heapq.heappop(self._heap)
            self._expire(job, worker)

    def _expire(self, job: Job, worker: _Worker) -> None:
        with job.lock:
            if job.state is not State.RUNNING:
                return
            job.state = State.TIMED_OUT
            job.deadline.cancel()
        log.warning("%s timed out after %.0fs while %s", job.name, job.deadline.seconds,
                    job.deadline.doing)
        self._notify(job, job.on_timeout, job.deadline)
        with self._lock:
            replace = (worker.job is job and not worker.retire
                       and len(self._stuck) < self.max_stuck and not self._closed)
            if replace:
                worker.retire = True
                self._stuck.add(worker)
        if replace:
            self._spawn()
