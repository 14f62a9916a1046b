"""The registry of why-pending's checks on a pod the scheduler has not placed yet.

A check is one function registered with ``@pending_check``: it reads the pod's context
(``PendingContext``) and returns findings; it runs after the checks it names and sees only
their findings. Modules of this package register theirs when ``load()`` imports them, so a
new check is a new file. The scheduler's own filters (``placement``) run after every check:
they are not a check but what every diagnosis of an unplaced pod is measured against.

    @pending_check("quota", label="quota: ResourceQuota and LimitRange for GPU resources")
    def check(ctx: PendingContext, before: Sequence[Finding]) -> list[Finding]: ...
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

from handlers.depends import in_order, predecessors
from handlers.model import Finding

if TYPE_CHECKING:
    from handlers.pending.context import PendingContext

CheckFn = Callable[["PendingContext", Sequence[Finding]], list[Finding]]


@dataclass(frozen=True)
class PendingCheck:
    name: str
    run: CheckFn
    label: str  # what the diagnosis lists among the checks that ran
    after: tuple[str, ...] = ()
    applies: Callable[[PendingContext], bool] | None = None  # None: every pod


REGISTRY: dict[str, PendingCheck] = {}


def pending_check(name: str, *, label: str, after: Iterable[str] = (),
                  applies: Callable[[PendingContext], bool] | None = None,
                  registry: dict[str, PendingCheck] | None = None
                  ) -> Callable[[CheckFn], CheckFn]:
    """Register ``fn`` as the why-pending check ``name``; it is returned unchanged."""
    def register(fn: CheckFn) -> CheckFn:
        reg = REGISTRY if registry is None else registry
        if name in reg:
            raise ValueError(f"pending check {name!r} registered twice")
        reg[name] = PendingCheck(name, fn, label, tuple(after), applies)
        return fn
    return register


@cache
def load() -> tuple[str, ...]:
    """Import every module of handlers.pending (once), so that their checks register."""
    from handlers import pending

    names = sorted(m.name for m in pkgutil.iter_modules(pending.__path__))
    for name in names:
        importlib.import_module(f"{pending.__name__}.{name}")
    return tuple(names)


def run(ctx: PendingContext, registry: dict[str, PendingCheck] | None = None
        ) -> tuple[list[Finding], list[str]]:
    """The findings of every check that applies, and the labels of those that ran."""
    if registry is None:
        load()
        registry = REGISTRY
    found: dict[str, list[Finding]] = {}
    ran: list[str] = []
    seen = predecessors(registry, _after)
    for c in in_order(registry, _after, "pending checks"):
        if c.applies is not None and not c.applies(ctx):
            continue
        before = [f for name in seen[c.name] for f in found.get(name, [])]
        found[c.name] = c.run(ctx, before)
        ran.append(c.label)
    return [f for fs in found.values() for f in fs], ran


def _after(c: PendingCheck) -> tuple[str, ...]:
    return c.after
