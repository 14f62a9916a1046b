"""The registry of the discovery chain's stages, and what a stage returns.

A stage is one function in one file under ``handlers/chain/stages/``, registered with
``@stage``: it reads one node's facts (``NodeFacts``, immutable) and what the stages it
runs ``after`` found (``Before``, read-only), and returns an ``Outcome``: new findings and
explicit amendments to earlier ones. It never edits another stage's findings itself; the
runner (``handlers/chain/runner.py``) merges, amends and orders, in the order the stages'
``after`` declarations give.

    @stage("driver", after=("hardware",), check="driver")
    def driver(node: NodeFacts, before: Before) -> Outcome: ...

What a stage returns is in ``handlers/chain/outcome.py``; the words of the codes it owns
(``@words``) in ``handlers/chain/words.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from handlers.chain.outcome import Outcome, Waiting
from handlers.depends import in_order, predecessors
from handlers.model import ObjectRef

if TYPE_CHECKING:
    from handlers.chain.facts import NodeFacts


class Before(Protocol):
    """What the earlier stages found on the node, read-only."""

    def has(self, *codes: str) -> bool: ...

    def problems(self) -> list[str]: ...

    def evidence(self, code: str) -> tuple[str, ...]: ...

    def actions(self, code: str) -> tuple[tuple[str, str], ...]: ...

    def objects(self, code: str) -> tuple[ObjectRef, ...]: ...

    @property
    def waiting(self) -> tuple[Waiting, ...]: ...

    @property
    def stuck(self) -> tuple[str, ...]: ...


StageFn = Callable[["NodeFacts", Before], Outcome]


@dataclass(frozen=True)
class Stage:
    name: str
    run: StageFn
    after: tuple[str, ...] = ()
    check: str | None = None  # the check's name as doctor lists it ("passed")
    # Runs on a node whose hardware stage halted the chain (kubelet admission does).
    always: bool = False


@dataclass
class Registry:
    """Stages by name; tests may build their own."""

    stages: dict[str, Stage] = field(default_factory=dict)

    def add(self, s: Stage) -> None:
        if s.name in self.stages:
            raise ValueError(f"chain stage {s.name!r} registered twice")
        self.stages[s.name] = s

    def ordered(self) -> list[Stage]:
        """Every stage after the ones it names, ties in name order (stable across runs)."""
        return in_order(self.stages, _after, "chain stages")

    def predecessors(self) -> dict[str, frozenset[str]]:
        return predecessors(self.stages, _after)


def _after(s: Stage) -> tuple[str, ...]:
    return s.after

REGISTRY = Registry()


def stage(name: str, *, after: Iterable[str] = (), check: str | None = None,
          always: bool = False, registry: Registry | None = None
          ) -> Callable[[StageFn], StageFn]:
    """Register ``fn`` as the chain stage ``name``; the function is returned unchanged."""
    def register(fn: StageFn) -> StageFn:
        (registry or REGISTRY).add(Stage(name, fn, tuple(after), check, always))
        return fn
    return register
