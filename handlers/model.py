"""Core types: a diagnosis is a list of findings plus the checks that ran.

Handlers build these; ``handlers.finish.finish`` has the last word on a diagnosis; the CLI,
templates and Slack only read them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import yaml

from handlers.cards import card, known_conditions
from handlers.severity import Severity

__all__ = [
    "Diagnosis",
    "Finding",
    "FitChange",
    "Fix",
    "NodeVerdict",
    "ObjectRef",
    "Patch",
    "Rollback",
    "RootCause",
    "Severity",
]


@dataclass(frozen=True, order=True)
class ObjectRef:
    kind: str
    name: str
    namespace: str | None = None

    def __str__(self) -> str:
        ns = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind.lower()}/{ns}{self.name}"


@dataclass(frozen=True)
class Patch:
    """YAML for one object: ``content`` goes at ``path`` of ``kind`` ``name`` (dotted keys,
    ``[i]`` for a list item, "" for the whole object); a mapping merges into the mapping
    there, a list's items are added to the list there. A whole new object (``path`` "")
    carries its apiVersion, kind and metadata in ``content``."""

    kind: str
    name: str
    path: str
    content: Any  # a mapping or a list, plain YAML types
    namespace: str | None = None

    @property
    def ref(self) -> ObjectRef:
        return ObjectRef(self.kind, self.name, self.namespace)

    @property
    def text(self) -> str:
        """``content`` as YAML, in the order it was written."""
        return yaml.safe_dump(self.content, sort_keys=False, default_flow_style=False,
                              width=1000).rstrip("\n")

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "namespace": self.namespace,
                "path": self.path, "content": self.content}


@dataclass(frozen=True)
class Fix:
    """How to fix a finding: prose in ``summary``; ``commands`` are exact shell lines with
    this cluster's names, in the order to run them (a trailing ``# ...`` says what one is
    for); ``patch`` the YAML to put into the object it names; ``docs`` URLs."""

    summary: str = ""
    commands: tuple[str, ...] = ()
    patch: Patch | None = None
    docs: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.summary or self.commands or self.patch)

    def then(self, other: Fix) -> Fix:
        """This fix, then ``other``: summaries in turn, commands and docs joined without
        repeats; a fix names one patch, this one's when both have one."""
        summary = " ".join(s for s in (self.summary, other.summary) if s)
        return Fix(summary, _unique(self.commands + other.commands),
                   self.patch or other.patch, _unique(self.docs + other.docs))

    def to_json(self) -> dict[str, Any]:
        return {"summary": self.summary, "commands": list(self.commands),
                "patch": self.patch.to_json() if self.patch else None,
                "docs": list(self.docs)}


def _unique(items: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


@dataclass(frozen=True)
class Finding:
    """One root cause (or passed check) with its proof and its fix.

    Its severity is not the check's to choose: the code's card decides it from the
    ``conditions`` the evidence shows (``handlers/cards.py``, ``knowledge/severity.yaml``).
    """

    code: str
    summary: str
    objects: tuple[ObjectRef, ...] = ()
    evidence: tuple[str, ...] = ()
    fix: Fix = field(default_factory=Fix)
    # Approval-gated actions a finding proposes, e.g. ("restart-device-plugin", "gpu-node-7");
    # each must be one its card offers.
    actions: tuple[tuple[str, str], ...] = ()
    conditions: frozenset[str] = frozenset()
    # Codes of the other findings of the diagnosis that explain this one (handlers.rootcause).
    caused_by: tuple[str, ...] = ()
    severity: Severity = field(init=False, compare=False)

    def __post_init__(self) -> None:
        try:
            c = card(self.code)
        except KeyError:
            raise ValueError(f"unknown finding code {self.code!r}") from None
        unknown = self.conditions - known_conditions(self.code)
        if unknown:
            raise ValueError(f"{self.code}: conditions {sorted(unknown)} are not in its card "
                             "or knowledge/severity.yaml")
        offered = c.actions or {}
        bad = [a for a, _ in self.actions if a not in offered]
        if bad:
            raise ValueError(f"{self.code}: actions {bad} are not offered by its card")
        object.__setattr__(self, "severity", c.severity(self.conditions))

    def to_json(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "severity": str(self.severity),
            "summary": self.summary,
            "objects": [asdict(o) for o in self.objects],
            "evidence": list(self.evidence),
            "fix": self.fix.to_json(),
            "actions": [{"action": a, "target": t} for a, t in self.actions],
            "caused_by": list(self.caused_by),
            "conditions": sorted(self.conditions),
        }


@dataclass
class NodeVerdict:
    """How the scheduler's filters treat one node for the target pod."""

    node: str
    fits: bool
    reasons: list[str] = field(default_factory=list)  # "filter: why", in filter order
    gpu_free: float = 0.0
    gpu_allocatable: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RootCause:
    code: str
    summary: str
    finding: int  # index into Diagnosis.findings
    fix: Fix = field(default_factory=Fix)
    symptoms: tuple[str, ...] = ()  # codes it explains, in the order they follow it

    def to_json(self) -> dict[str, object]:
        return {"code": self.code, "summary": self.summary, "finding": self.finding}


@dataclass(frozen=True)
class FitChange:
    """One smallest change after which the pending pod passes every filter on some node
    (handlers.pending.fitsif), or a rollback; ``cost`` orders them."""

    change: str  # one of handlers.cards.CHANGES
    summary: str  # prose; the lines to run are ``commands``
    nodes: Sequence[str] = ()
    objects: Sequence[ObjectRef] = ()
    cost: tuple[float, ...] = ()
    commands: Sequence[str] = ()  # exact command lines (handlers.kube.commands), if any

    def to_json(self) -> dict[str, Any]:
        return {"change": self.change, "summary": self.summary, "nodes": list(self.nodes),
                "objects": [asdict(o) for o in self.objects],
                "commands": list(self.commands)}


@dataclass(frozen=True)
class Rollback:
    """A recent rollout whose previous revision would let the pod fit: the finisher puts it
    at the head of the root cause's fix and among the ways to make it fit."""

    evidence: str
    fix: Fix
    option: FitChange


@dataclass
class Diagnosis:
    command: str
    target: str
    findings: list[Finding] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)  # what ran
    unchecked: list[str] = field(default_factory=list)  # what could not run, and why
    nodes: list[NodeVerdict] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)  # handler-specific, for templates
    root_cause: RootCause | None = None  # set by finish()
    # Smallest changes that would let the pod schedule, each verified by the filters
    # (handlers.pending.fitsif); why-pending only.
    fits_if: list[FitChange] = field(default_factory=list)
    # False when finding nothing does not mean all is well: a report (nodes, quota), or a
    # diagnosis that could not look (no GPU node, a pod that is not pending): no ALL_CLEAR.
    can_clear: bool = True
    # why-pending: the pod passes no node's filters now (its causes each block it alone).
    fits_nowhere: bool = False
    rollback: Rollback | None = None
    # Claims not made because the evidence showed the opposite (handlers/consistency.py).
    withheld: list[str] = field(default_factory=list)
    # Node -> its pool, for the finisher to name "3 nodes of pool a100" (handlers.grouping).
    node_pools: dict[str, str | None] = field(default_factory=dict)

    def add(self, finding: Finding) -> None:
        self.findings.append(finding)

    def add_all(self, findings: Iterable[Finding]) -> None:
        self.findings.extend(findings)

    def check(self, name: str) -> None:
        if name not in self.checks:
            self.checks.append(name)

    @property
    def problems(self) -> list[Finding]:
        return [f for f in self.findings if f.severity.is_problem]

    @property
    def codes(self) -> list[str]:
        return [f.code for f in self.findings]

    def to_json(self) -> dict[str, Any]:
        return {
            "command": self.command,
            "target": self.target,
            "root_cause": self.root_cause.to_json() if self.root_cause else None,
            "findings": [f.to_json() for f in self.findings],
            "checks": list(self.checks),
            "unchecked": list(self.unchecked),
            "withheld": list(self.withheld),
            "nodes": [n.to_json() for n in self.nodes],
            "fits_if": [c.to_json() for c in self.fits_if],
            "details": self.details,
        }
