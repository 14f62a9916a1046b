"""Cluster views for the bot: a deadline guard per diagnosis, shared reads across them.

``GuardedView(view, deadline)`` records what each read is for (so a timeout can say
"listing Pods in ml-team") and refuses to start a read once the deadline has passed.

``SharedReads(view, ttl)`` makes concurrent diagnoses share identical reads: the first
caller asks the cluster, the others wait for its answer (single flight), and the answer is
reused for ``ttl`` seconds. Fifty people asking about the same namespace cost one list.
Objects are shared between diagnoses: handlers read them and must not change them (as for
``bot.live``'s watch cache).
"""

from __future__ import annotations

import builtins
import contextlib
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from bot.slack.pool import Deadline, DeadlineExceeded
from handlers.memo import Memos
from handlers.view import ClusterView, Obj

T = TypeVar("T")


def _where(namespace: str | None) -> str:
    return f" in {namespace}" if namespace else ""


class GuardedView:
    """A ClusterView that checks a Deadline before every read and says what it reads."""

    def __init__(self, view: ClusterView, deadline: Deadline) -> None:
        self.view = view
        self.deadline = deadline
        self.problems: builtins.list[str] = list(getattr(view, "problems", []) or [])

    @property
    def source(self) -> str:
        return self.view.source

    @property
    def memos(self) -> Memos | None:
        return self.view.memos  # the wrapped view's: the diagnosis starts warm

    def _guard(self, doing: str, fn: Callable[[], T]) -> T:
        self.deadline.check()
        self.deadline.doing = doing
        try:
            if isinstance(self.view, SharedReads):
                with self.view.waiting_until(self.deadline):
                    return fn()
            return fn()
        finally:
            self.deadline.doing = "analysing what it read"

    def list(self, kind: str, namespace: str | None = None, *, label_selector: str | None = None,
             field_selector: str | None = None) -> builtins.list[Obj]:
        what = f"listing {kind}s{_where(namespace) or ' in all namespaces'}"
        if kind in ("Node", "Namespace", "PriorityClass", "RuntimeClass", "PersistentVolume",
                    "ClusterPolicy"):
            what = f"listing {kind}s"
        return self._guard(what, lambda: self.view.list(
            kind, namespace, label_selector=label_selector, field_selector=field_selector))

    def get(self, kind: str, name: str, namespace: str | None = None) -> Obj | None:
        return self._guard(f"reading {kind} {name}{_where(namespace)}",
                           lambda: self.view.get(kind, name, namespace))

    def events(self, kind: str, name: str, namespace: str | None = None) -> builtins.list[Obj]:
        return self._guard(f"reading events of {kind} {name}{_where(namespace)}",
                           lambda: self.view.events(kind, name, namespace))

    def logs(self, namespace: str, pod: str, container: str | None = None) -> str | None:
        return self._guard(f"reading logs of pod {pod} in {namespace}",
                           lambda: self.view.logs(namespace, pod, container))

    def pods_on(self, nodes: Iterable[str]) -> dict[str, Sequence[Obj]] | None:
        """Passed on to a view that answers many nodes' pods at once (a warm ``LiveView``);
        None tells ``Reader`` to list them node by node."""
        bulk = getattr(self.view, "pods_on", None)
        if not callable(bulk):
            return None
        names = list(nodes)
        found: dict[str, Sequence[Obj]] | None = self._guard(
            f"reading the pods of {len(names)} nodes", lambda: bulk(names))
        return found

    def prefetch(self, requests: Iterable[tuple[str, str | None, str | None, str | None]]
                 ) -> None:
        """Passed on to a view that fetches lists ahead concurrently (``LiveView``)."""
        start = getattr(self.view, "prefetch", None)
        if callable(start):
            self.deadline.check()
            start(list(requests))

    def kubelet_configz(self, node: str) -> tuple[Obj, str] | None:
        """Passed on to a snapshot that carries the node's /configz (handlers/kubeletconfig)."""
        get = getattr(self.view, "kubelet_configz", None)
        found: tuple[Obj, str] | None = get(node) if callable(get) else None
        return found

    def now(self) -> datetime:
        return self.view.now()


class _Flight:
    __slots__ = ("at", "done", "error", "result")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.result: Any = None
        self.error: BaseException | None = None
        self.at = 0.0


def reading(view: ClusterView) -> contextlib.AbstractContextManager[None]:
    """Around a diagnosis: a view over a watch cache holds its watch events meanwhile, so
    the diagnosis reads one state of it (``LiveView.reading``); other views need nothing."""
    hold = getattr(view, "reading", None)
    return hold() if callable(hold) else contextlib.nullcontext()


class SharedReads:
    """Single-flight + short TTL over a thread-safe ClusterView."""

    def __init__(self, view: ClusterView, ttl: float = 2.0, max_entries: int = 4096,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.view = view
        self.ttl = ttl
        self.max_entries = max_entries
        self._clock = clock
        self._lock = threading.Lock()
        self._flights: dict[tuple[Any, ...], _Flight] = {}
        self._local = threading.local()
        self.requests = 0  # reads that reached the view
        self.shared = 0  # reads answered by another caller's request

    @property
    def source(self) -> str:
        return self.view.source

    @property
    def memos(self) -> Memos | None:
        return self.view.memos  # the wrapped view's: its objects are the ones shared

    @property
    def problems(self) -> builtins.list[str]:
        return list(getattr(self.view, "problems", []) or [])

    def waiting_until(self, deadline: Deadline) -> _Waiting:
        return _Waiting(self._local, deadline)

    def _shared(self, key: tuple[Any, ...], fn: Callable[[], T]) -> T:
        now = self._clock()
        with self._lock:
            flight = self._flights.get(key)
            if flight is not None and flight.done.is_set() and (
                    flight.error is not None or now - flight.at > self.ttl):
                flight = None
            leader = flight is None
            if flight is None:
                if len(self._flights) >= self.max_entries:
                    self._flights = {k: f for k, f in self._flights.items()
                                     if not f.done.is_set() or now - f.at <= self.ttl}
                flight = self._flights[key] = _Flight()
                self.requests += 1
            else:
                self.shared += 1
        if leader:
            try:
                flight.result = fn()
            except BaseException as err:
                flight.error = err
                raise
            finally:
                flight.at = self._clock()
                flight.done.set()
            return flight.result  # type: ignore[no-any-return]
        deadline: Deadline | None = getattr(self._local, "deadline", None)
        if not flight.done.wait(deadline.remaining() if deadline is not None else None):
            raise DeadlineExceeded(deadline.doing if deadline is not None else "")
        if flight.error is not None:
            raise flight.error
        return flight.result  # type: ignore[no-any-return]

    def list(self, kind: str, namespace: str | None = None, *, label_selector: str | None = None,
             field_selector: str | None = None) -> builtins.list[Obj]:
        return self._shared(("list", kind, namespace, label_selector, field_selector),
                            lambda: self.view.list(kind, namespace, label_selector=label_selector,
                                                   field_selector=field_selector))

    def get(self, kind: str, name: str, namespace: str | None = None) -> Obj | None:
        return self._shared(("get", kind, name, namespace),
                            lambda: self.view.get(kind, name, namespace))

    def events(self, kind: str, name: str, namespace: str | None = None) -> builtins.list[Obj]:
        return self._shared(("events", kind, name, namespace),
                            lambda: self.view.events(kind, name, namespace))

    def logs(self, namespace: str, pod: str, container: str | None = None) -> str | None:
        return self._shared(("logs", namespace, pod, container),
                            lambda: self.view.logs(namespace, pod, container))

    def pods_on(self, nodes: Iterable[str]) -> dict[str, Sequence[Obj]] | None:
        """Passed on: a view that answers this reads its own memory (a watch cache), with
        nothing to share; None tells ``Reader`` to list node by node (shared here)."""
        bulk = getattr(self.view, "pods_on", None)
        found: dict[str, Sequence[Obj]] | None = bulk(nodes) if callable(bulk) else None
        return found

    def reading(self) -> contextlib.AbstractContextManager[None]:
        """Passed on (see ``reading``)."""
        return reading(self.view)

    def prefetch(self, requests: Iterable[tuple[str, str | None, str | None, str | None]]
                 ) -> None:
        """Lists another caller has in flight, or answered within the TTL, are skipped."""
        start = getattr(self.view, "prefetch", None)
        if not callable(start):
            return
        now = self._clock()
        with self._lock:
            todo = []
            for kind, namespace, label_selector, field_selector in requests:
                f = self._flights.get(("list", kind, namespace, label_selector, field_selector))
                if f is None or (f.done.is_set() and (f.error is not None
                                                      or now - f.at > self.ttl)):
                    todo.append((kind, namespace, label_selector, field_selector))
        if todo:
            start(todo)

    def now(self) -> datetime:
        return self.view.now()


class _Waiting:
    def __init__(self, local: threading.local, deadline: Deadline) -> None:
        self.local = local
        self.deadline = deadline

    def __enter__(self) -> None:
        self.local.deadline = self.deadline

    def __exit__(self, *exc: object) -> None:
        self.local.deadline = None
