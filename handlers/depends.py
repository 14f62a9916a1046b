"""Order by declared dependencies: what the chain's stages and why-pending's checks share.

Each item names the items it runs ``after``; ``in_order`` puts every item after those, ties
in name order (the same order on every run); ``predecessors`` is what each item may read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

T = TypeVar("T")


def in_order(items: Mapping[str, T], after: Callable[[T], tuple[str, ...]],
             what: str = "items") -> list[T]:
    unknown = {a for it in items.values() for a in after(it)} - set(items)
    if unknown:
        raise ValueError(f"{what} run after unknown {what}: {sorted(unknown)}")
    done: list[T] = []
    placed: set[str] = set()
    pending = sorted(items.items())
    while pending:
        ready = next(((n, it) for n, it in pending if set(after(it)) <= placed), None)
        if ready is None:
            raise ValueError(f"{what} wait for each other: "
                             + ", ".join(n for n, _ in pending))
        done.append(ready[1])
        placed.add(ready[0])
        pending.remove(ready)
    return done


def predecessors(items: Mapping[str, T], after: Callable[[T], tuple[str, ...]]
                 ) -> dict[str, frozenset[str]]:
    """Every item's predecessors, directly or through others."""
    out: dict[str, frozenset[str]] = {}

    def of(name: str) -> frozenset[str]:
        if name not in out:
            direct = after(items[name])
            out[name] = frozenset(direct).union(*(of(a) for a in direct))
        return out[name]

    for name in items:
        of(name)
    return out
