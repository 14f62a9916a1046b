"""Fits elsewhere, in a fleet: a pending GPU pod's why-pending answer says on which other
clusters it would schedule now (``handlers/pending/elsewhere.py`` does the checking).

Only the clusters the asker may read in the pod's namespace are asked, each from its own
view (a watch cache: lists answer from memory), within a time budget shared by them all;
a cluster not reached in time, or not answering, is said as such and the answer stands.
"""

from __future__ import annotations

import builtins
import contextlib
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from bot.fleet import ClusterHandle, Fleet
from handlers.model import Diagnosis
from handlers.pending import elsewhere
from handlers.target import Target
from handlers.view import ClusterView, Obj, Reader, ViewError

if TYPE_CHECKING:
    from handlers.memo import Memos

BUDGET_SECONDS = 8.0  # at most, for every other cluster together
Wrap = Callable[[ClusterView], ClusterView]


def _same(view: ClusterView) -> ClusterView:
    return view


@dataclass(frozen=True)
class Budget:
    """How the other clusters are read: ``wrap`` every view (the asker's deadline), for at
    most ``seconds()`` together (asked when fits elsewhere starts)."""

    wrap: Wrap = _same
    seconds: Callable[[], float] = lambda: BUDGET_SECONDS
    clock: Callable[[], float] = time.monotonic


class OutOfTime(Exception):
    """The budget ran out before a read of another cluster."""


class _Budgeted:
    """A view that refuses to start a read after ``until`` (another cluster's answer must
    not take the time the asker waits for the home cluster's)."""

    def __init__(self, view: ClusterView, until: float, clock: Callable[[], float]) -> None:
        self.view, self.until, self.clock = view, until, clock

    def _check(self) -> None:
        if self.clock() >= self.until:
            raise OutOfTime

    @property
    def source(self) -> str:
        return self.view.source

    @property
    def memos(self) -> Memos | None:
        return getattr(self.view, "memos", None)

    def list(self, kind: str, namespace: str | None = None, *, label_selector: str | None = None,
             field_selector: str | None = None) -> builtins.list[Obj]:
        self._check()
        return self.view.list(kind, namespace, label_selector=label_selector,
                              field_selector=field_selector)

    def get(self, kind: str, name: str, namespace: str | None = None) -> Obj | None:
        self._check()
        return self.view.get(kind, name, namespace)

    def events(self, kind: str, name: str, namespace: str | None = None) -> builtins.list[Obj]:
        self._check()
        return self.view.events(kind, name, namespace)

    def logs(self, namespace: str, pod: str, container: str | None = None) -> str | None:
        self._check()
        return self.view.logs(namespace, pod, container)

    def pods_on(self, nodes: Iterable[str]) -> dict[str, Sequence[Obj]] | None:
        bulk = getattr(self.view, "pods_on", None)
        if not callable(bulk):
            return None
        self._check()
        found: dict[str, Sequence[Obj]] | None = bulk(list(nodes))
        return found

    def prefetch(self, requests: Iterable[tuple[str, str | None, str | None, str | None]]
                 ) -> None:
        start = getattr(self.view, "prefetch", None)
        if callable(start):
            self._check()
            start(list(requests))

    def now(self) -> datetime:
        return self.view.now()


def _holding(view: ClusterView) -> contextlib.AbstractContextManager[None]:
    """One state of a watch cache while it is read (``LiveView.reading``)."""
    hold = getattr(view, "reading", None)
    return hold() if callable(hold) else contextlib.nullcontext()


def add_fits_elsewhere(fleet: Fleet, home: ClusterHandle, target: Target, diag: Diagnosis,
                       names: Sequence[str], budget: Budget) -> None:
    """Into ``diag`` (why-pending, read on ``home``): the clusters of ``names`` but home
    where its pending GPU pod would schedule now, and where not and why."""
    others = [n for n in names if n != home.name and n in fleet.handles]
    if not fleet.multi or not others or home.view is None or diag.command != "why-pending":
        return
    seconds = max(budget.seconds(), 0.0)
    until = budget.clock() + seconds
    with _holding(home.view):
        s = elsewhere.subject(Reader(budget.wrap(home.view)), target, diag, home=home.name,
                              home_context=home.context)
    if s is None:
        return
    late = f"out of time ({seconds:.3g}s for the other clusters)"
    found: list[elsewhere.ClusterFit] = []
    for name in others:
        handle = fleet.get(name)
        if budget.clock() >= until:
            found.append(elsewhere.not_checked(name, late))
            continue
        why = handle.unreachable()
        if why is not None or handle.view is None:
            found.append(elsewhere.not_checked(name, f"unreachable: {why}"))
            continue
        try:
            with _holding(handle.view):
                reader = Reader(_Budgeted(budget.wrap(handle.view), until, budget.clock))
                found.append(elsewhere.check_cluster(s, name, reader, handle.context))
        except OutOfTime:
            found.append(elsewhere.not_checked(name, late))
        except ViewError as err:  # fatal: unreachable, credentials refused
            found.append(elsewhere.not_checked(name, f"unreachable: {err}"))
    elsewhere.attach(diag, s, found)
