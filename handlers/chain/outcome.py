"""What a chain stage returns (``Outcome``): drafts of findings and explicit amendments of
earlier ones, and what it hands on to later stages."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from handlers.model import Fix, ObjectRef

if TYPE_CHECKING:
    from handlers.chain.pods import PodState


@dataclass(frozen=True)
class Draft:
    """A finding as a stage reports it; the runner merges drafts of one code on a node."""

    code: str
    summary: str
    fix: Fix = field(default_factory=Fix)
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
    fix: Fix


@dataclass(frozen=True)
class NoRestart:
    """A hardware fault behind the finding of ``code``: a plugin restart would not bring the
    GPU back, so its restart action goes and ``fix`` says what helps."""

    code: str
    fix: Fix
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
