"""The registry of the discovery chain's stages, and what a stage returns.

A stage is one function in one file under ``handlers/chain/stages/``, registered with
``@stage``: it reads one node's facts (``NodeFacts``, immutable) and what the stages it
runs ``after`` found (``Before``, read-only), and returns an ``Outcome``: new findings and
explicit amendments to earlier ones. It never edits another stage's findings itself; the
runner (``handlers/chain/runner.py``) merges, amends and orders, in the order the stages'
``after`` declarations give.

    @stage("driver", after=("hardware",), check="driver")
    def driver(node: NodeFacts, before: Before) -> Outcome: ...

The words of a finding (its summary and fix, filled in with the node and pod) live beside
the stage that owns its code, registered with ``@words(CODE)``, so that a stage finding a
code in a log line it reads says it as the code's owner does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from handlers.model import ObjectRef

if TYPE_CHECKING:
    from handlers.chain.facts import NodeFacts
    from handlers.chain.fixtext import Where
    from handlers.chain.pods import PodState


@dataclass(frozen=True)
class Draft:
    """A finding as a stage reports it; the runner merges drafts of one code on a node."""

    code: str
    summary: str
    fix: str = ""
    objects: tuple[ObjectRef, ...] = ()
    evidence: tuple[str, ...] = ()
    actions: tuple[tuple[str, str], ...] = ()
    conditions: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Note:
    """More evidence for the finding of ``code`` an earlier stage reported."""

    code: str
    evidence: tuple[str, ...]


@dataclass(frozen=True)
class Retell:
    """An earlier finding of ``code`` says it better in this stage's words (a sharing key
    that is missing, rather than a log line's generic "invalid config"): its summary and
    fix are replaced, its evidence kept."""

    code: str
    summary: str
    fix: str


@dataclass(frozen=True)
class NoRestart:
    """A hardware fault behind the finding of ``code``: a plugin restart would not bring the
    GPU back, so its restart action goes and ``fix`` says what helps."""

    code: str
    fix: str
    evidence: tuple[str, ...] = ()


Amendment = Note | Retell | NoRestart


@dataclass(frozen=True)
class Waiting:
    """A pod that only waits in a validation init container for ``code``'s stage: evidence
    for that stage's finding (the ``waiting`` stage attaches it)."""

    code: str
    line: str
    pod: PodState


@dataclass(frozen=True)
class Outcome:
    findings: tuple[Draft, ...] = ()
    amendments: tuple[Amendment, ...] = ()
    # True: the stage's check passed on the node; None: it does not apply there. A check
    # whose codes (their cards' ``checks``) are problems on the node is never "passed".
    passed: bool | None = None
    waiting: tuple[Waiting, ...] = ()
    # Why the plugin pod hangs when no known line says so: evidence for GPU_NOT_ADVERTISED.
    stuck: tuple[str, ...] = ()
    # The node has no NVIDIA device: every later stage is moot (hardware).
    halt: bool = False



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


@dataclass(frozen=True)
class Words:
    summary: str
    fix: str = ""


WordsFn = Callable[["Where"], Words]


@dataclass
class Registry:
    """Stages by name and the words of each code; tests may build their own."""

    stages: dict[str, Stage] = field(default_factory=dict)
    words: dict[str, WordsFn] = field(default_factory=dict)

    def add(self, s: Stage) -> None:
        if s.name in self.stages:
            raise ValueError(f"chain stage {s.name!r} registered twice")
        self.stages[s.name] = s

    def ordered(self) -> list[Stage]:
        """Every stage after the ones it names, ties in name order (stable across runs)."""
        unknown = {a for s in self.stages.values() for a in s.after} - set(self.stages)
        if unknown:
            raise ValueError(f"chain stages run after unknown stages: {sorted(unknown)}")
        done: list[Stage] = []
        placed: set[str] = set()
        pending = sorted(self.stages.values(), key=lambda s: s.name)
        while pending:
            ready = [s for s in pending if set(s.after) <= placed]
            if not ready:
                raise ValueError("chain stages wait for each other: "
                                 + ", ".join(s.name for s in pending))
            first = ready[0]
            done.append(first)
            placed.add(first.name)
            pending.remove(first)
        return done


REGISTRY = Registry()


def stage(name: str, *, after: Iterable[str] = (), check: str | None = None,
          always: bool = False, registry: Registry | None = None
          ) -> Callable[[StageFn], StageFn]:
    """Register ``fn`` as the chain stage ``name``; the function is returned unchanged."""
    def register(fn: StageFn) -> StageFn:
        (registry or REGISTRY).add(Stage(name, fn, tuple(after), check, always))
        return fn
    return register


def words(code: str, *, registry: Registry | None = None) -> Callable[[WordsFn], WordsFn]:
    """Register the summary and fix of ``code`` (filled in with a ``Where``)."""
    def register(fn: WordsFn) -> WordsFn:
        reg = registry or REGISTRY
        if code in reg.words:
            raise ValueError(f"words for {code} registered twice")
        reg.words[code] = fn
        return fn
    return register


def say(code: str, where: Where) -> Words:
    """The words of ``code`` about ``where``; a code no stage words is named as it is."""
    from handlers.chain import stages

    stages.load()
    fn = REGISTRY.words.get(code)
    return fn(where) if fn else Words(f"{code} on {where.node}.")
