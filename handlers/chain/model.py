"""What the discovery chain returns, and the accumulator that builds its findings.

A node's chain runs hardware -> driver -> container toolkit -> device plugin -> kubelet
registration -> health -> labels/sharing. Every root cause becomes one finding per node:
when two signals prove the same code on the same node (the plugin's log and the validator's
log both say the driver is not loaded), they become one finding with both lines as evidence.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from handlers.cards import card
from handlers.logpatterns import classify_log
from handlers.model import Finding, ObjectRef, Severity


@dataclass
class NodeChain:
    node: str
    findings: list[Finding]  # problems (and info notes); passed checks are named in `passed`
    passed: list[str]  # names of checks that passed on this node
    # One doctor table row: node, product, gpus "cap/alloc", labels, driver, toolkit,
    # plugin, runtime, mig, sharing, verdict.
    row: dict[str, str]


@dataclass
class ChainReport:
    nodes: list[NodeChain]
    findings: list[Finding]  # cluster-level problems + every node's problems
    checks: list[str]  # names of checks that ran
    # What could not be checked and why ("RuntimeClass: not checked: ...").
    unchecked: list[str] = field(default_factory=list)


# Check names, in chain order (the doctor's evidence for ALL_CLEAR lists them).
CHECK_HARDWARE = "hardware (NFD pci-10de)"
CHECK_DRIVER = "driver"
CHECK_TOOLKIT = "container toolkit / runtime"
CHECK_PLUGIN = "device plugin"
CHECK_REGISTRATION = "kubelet registration"
CHECK_HEALTH = "GPU health (allocatable = capacity)"
CHECK_ADMISSION = "device admission"
CHECK_WORKLOADS = "GPU workload errors (CUDA/NVML)"
CHECK_OPERATOR = "GPU operator components"
CHECK_LABELS = "GFD labels"
CHECK_MIG = "MIG config"
CHECK_SHARING = "time-slicing config"
CHECK_RUNTIMECLASS = "RuntimeClass"
CHECK_POD_SECURITY = "Pod Security admission"
CHECK_PRIVILEGES = "device-plugin privileges and mounts"

ALL_CHECKS = [
    CHECK_HARDWARE, CHECK_DRIVER, CHECK_TOOLKIT, CHECK_PLUGIN, CHECK_REGISTRATION,
    CHECK_HEALTH, CHECK_ADMISSION, CHECK_WORKLOADS, CHECK_OPERATOR, CHECK_LABELS, CHECK_MIG,
    CHECK_SHARING, CHECK_RUNTIMECLASS, CHECK_POD_SECURITY, CHECK_PRIVILEGES,
]

# Codes a log line can prove that are causes further up the chain than the pod it came from.
UPSTREAM = ("DRIVER_NOT_READY", "CONTAINER_RUNTIME_NOT_CONFIGURED", "NVML_INIT_FAILED",
            "CUDA_DRIVER_MISMATCH")
# Log codes that are only evidence, never a finding by themselves.
EVIDENCE_ONLY = ("GPU_UNHEALTHY", "DEVICE_ADMISSION_FAILED", "GPU_XID_ERRORS")


def sourced(text: str | None, source: str) -> list[tuple[str, str]]:
    """``(code, "<source>: <line>")`` for the known lines of a log, event or message."""
    return [(code, f"{source}: {line}") for code, line in classify_log(text)]


_MAX_EVIDENCE = 14


@dataclass
class Draft:
    code: str
    conditions: frozenset[str]
    summary: str
    fix: str
    objects: list[ObjectRef] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)
    actions: list[tuple[str, str]] = field(default_factory=list)

    @property
    def severity(self) -> Severity:
        return card(self.code).severity(self.conditions)

    def finding(self) -> Finding:
        return Finding(
            self.code, self.summary, objects=tuple(self.objects),
            evidence=tuple(self.evidence[:_MAX_EVIDENCE]), fix=self.fix,
            actions=tuple(self.actions), conditions=self.conditions,
        )


class Findings:
    """Findings keyed by code: a second report of the same code merges into the first."""

    def __init__(self) -> None:
        self._drafts: dict[str, Draft] = {}

    def add(
        self,
        code: str,
        summary: str,
        *,
        conditions: frozenset[str] = frozenset(),
        objects: list[ObjectRef] | tuple[ObjectRef, ...] = (),
        evidence: list[str] | tuple[str, ...] = (),
        fix: str = "",
        actions: list[tuple[str, str]] | tuple[tuple[str, str], ...] = (),
    ) -> Draft:
        d = self._drafts.get(code)
        if d is None:
            d = Draft(code, conditions, summary, fix)
            self._drafts[code] = d
        elif card(code).severity(conditions).rank < d.severity.rank:
            d.conditions = conditions  # the graver report's conditions stand
        if not d.fix:
            d.fix = fix
        for o in objects:
            if o not in d.objects:
                d.objects.append(o)
        for e in evidence:
            if e and e not in d.evidence:
                d.evidence.append(e)
        for a in actions:
            if a not in d.actions:
                d.actions.append(a)
        return d

    def note(self, code: str, *evidence: str) -> bool:
        """Add evidence to an existing finding; False when there is none of that code."""
        d = self._drafts.get(code)
        if d is None:
            return False
        for e in evidence:
            if e and e not in d.evidence:
                d.evidence.append(e)
        return True

    def has(self, *codes: str) -> bool:
        return any(c in self._drafts for c in codes)

    def get(self, code: str) -> Draft | None:
        return self._drafts.get(code)

    @property
    def codes(self) -> list[str]:
        return list(self._drafts)

    def problems(self) -> list[str]:
        return [c for c, d in self._drafts.items() if d.severity.is_problem]

    def findings(self) -> list[Finding]:
        return [d.finding() for d in self._drafts.values()]
