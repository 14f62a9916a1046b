"""Core types: a diagnosis is a list of findings plus the checks that ran.

Handlers build these; the CLI, templates and Slack only read them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from handlers.codes import CODES, code_rank
from handlers.rootcause import RootCause, link


class Severity(StrEnum):
    CRITICAL = "critical"
    WARNING = "warning"
    INFO = "info"
    OK = "ok"

    @property
    def rank(self) -> int:
        """Lower is worse: sorts critical first."""
        return _SEVERITY_RANK[self]

    @property
    def is_problem(self) -> bool:
        return self in (Severity.CRITICAL, Severity.WARNING)


_SEVERITY_RANK = {Severity.CRITICAL: 0, Severity.WARNING: 1, Severity.INFO: 2, Severity.OK: 3}


@dataclass(frozen=True, order=True)
class ObjectRef:
    kind: str
    name: str
    namespace: str | None = None

    def __str__(self) -> str:
        ns = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind.lower()}/{ns}{self.name}"


@dataclass(frozen=True)
class Finding:
    """One root cause (or passed check) with its proof and its fix."""

    code: str
    severity: Severity
    summary: str
    objects: tuple[ObjectRef, ...] = ()
    evidence: tuple[str, ...] = ()
    fix: str = ""
    # Approval-gated actions a finding proposes, e.g. ("restart-device-plugin", "gpu-node-7").
    actions: tuple[tuple[str, str], ...] = ()
    # Codes of the other findings of the diagnosis that explain this one (handlers.rootcause).
    caused_by: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.code not in CODES:
            raise ValueError(f"unknown finding code {self.code!r}")

    def to_json(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "severity": str(self.severity),
            "summary": self.summary,
            "objects": [asdict(o) for o in self.objects],
            "evidence": list(self.evidence),
            "fix": self.fix,
            "actions": [{"action": a, "target": t} for a, t in self.actions],
            "caused_by": list(self.caused_by),
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
    fits_if: list[dict[str, Any]] = field(default_factory=list)

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

    def finish(self) -> Diagnosis:
        """Order findings by importance and add ALL_CLEAR when nothing is wrong."""
        seen: set[tuple[str, str, tuple[ObjectRef, ...]]] = set()
        unique = []
        for f in self.findings:
            key = (f.code, f.summary, f.objects)
            if key not in seen:
                seen.add(key)
                unique.append(f)
        if not any(f.severity.is_problem for f in unique) and not any(
            f.code == "ALL_CLEAR" for f in unique
        ) and self.details.get("all_clear", True):
            unique.append(Finding(
                "ALL_CLEAR", Severity.OK, "Every check in the chain passed.",
                evidence=tuple(self.checks),
            ))
        unique.sort(key=lambda f: (f.severity.rank, code_rank(f.code)))
        # The root cause leads, its symptoms under it (handlers.rootcause).
        self.findings, self.root_cause = link(unique)
        return self

    def to_json(self) -> dict[str, Any]:
        return {
            "command": self.command,
            "target": self.target,
            "root_cause": self.root_cause.to_json() if self.root_cause else None,
            "findings": [f.to_json() for f in self.findings],
            "checks": list(self.checks),
            "unchecked": list(self.unchecked),
            "nodes": [n.to_json() for n in self.nodes],
            "fits_if": list(self.fits_if),
            "details": self.details,
        }
