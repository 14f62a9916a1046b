"""The causal chain between findings: which finding explains which, and the deepest cause.

A diagnosis often holds a cause and its symptoms side by side (the image's CUDA needs a
newer driver -> the device plugin crash-loops -> the node advertises no GPUs -> the pod is
pending). ``link`` marks each finding with the codes that cause it (``caused_by``) and picks
the root cause: start from the most important problem and follow its causes down as far
as the evidence goes. Two findings are linked only when the code graph allows it and they
are about the same node (or one of them is about no node at all, e.g. a LimitRange).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from handlers.codes import code_rank

if TYPE_CHECKING:  # model imports this module
    from handlers.model import Finding

_PLUGIN_CAUSES = ("CUDA_DRIVER_MISMATCH", "NVML_INIT_FAILED", "DRIVER_NOT_READY",
                  "CONTAINER_RUNTIME_NOT_CONFIGURED", "DEVICE_PLUGIN_NOT_PRIVILEGED",
                  "TIMESLICING_CONFIG_INVALID", "GPU_HARDWARE_NOT_DETECTED",
                  "POD_SECURITY_BLOCKS_OPERATOR", "KUBELET_REGISTRATION_FAILED")
_NOT_ADVERTISED_CAUSES = (*_PLUGIN_CAUSES, "DEVICE_PLUGIN_CRASHLOOP", "DEVICE_PLUGIN_MISSING",
                          "DEVICE_PLUGIN_IMAGE_PULL", "KUBELET_REGISTRATION_FAILED",
                          "MIG_CONFIG_FAILED", "OPERATOR_IMAGE_PULL", "GPU_XID_ERRORS",
                          "GPU_UNHEALTHY")

# effect -> the codes that can cause it, deeper in the chain. Read as "X because Y".
CAUSES: dict[str, tuple[str, ...]] = {
    "NVML_INIT_FAILED": ("DRIVER_NOT_READY", "CONTAINER_RUNTIME_NOT_CONFIGURED"),
    "DRIVER_NOT_READY": ("OPERATOR_IMAGE_PULL", "POD_SECURITY_BLOCKS_OPERATOR",
                         "GPU_HARDWARE_NOT_DETECTED"),
    "CONTAINER_RUNTIME_NOT_CONFIGURED": ("DRIVER_NOT_READY", "OPERATOR_IMAGE_PULL"),
    "OPERATOR_COMPONENT_FAILING": ("DRIVER_NOT_READY", "CONTAINER_RUNTIME_NOT_CONFIGURED",
                                   "OPERATOR_IMAGE_PULL", "POD_SECURITY_BLOCKS_OPERATOR",
                                   "CUDA_DRIVER_MISMATCH", "NVML_INIT_FAILED"),
    "DEVICE_PLUGIN_CRASHLOOP": _PLUGIN_CAUSES,
    "DEVICE_PLUGIN_MISSING": ("POD_SECURITY_BLOCKS_OPERATOR", "DRIVER_NOT_READY",
                              "CONTAINER_RUNTIME_NOT_CONFIGURED"),
    "KUBELET_REGISTRATION_FAILED": ("DEVICE_PLUGIN_NOT_PRIVILEGED",),
    "NFD_LABELS_MISSING": ("OPERATOR_COMPONENT_FAILING", "DRIVER_NOT_READY"),
    "GPU_UNHEALTHY": ("GPU_XID_ERRORS",),
    "GPU_NOT_ADVERTISED": _NOT_ADVERTISED_CAUSES,
    "DEVICE_ADMISSION_FAILED": ("GPU_UNHEALTHY", "DEVICE_PLUGIN_CRASHLOOP",
                                "KUBELET_REGISTRATION_FAILED", "GPU_XID_ERRORS"),
    "INSUFFICIENT_GPU": ("GPU_NOT_ADVERTISED", "GPU_UNHEALTHY", "DEVICE_PLUGIN_CRASHLOOP",
                         "DEVICE_PLUGIN_MISSING", "KUBELET_REGISTRATION_FAILED",
                         "DRIVER_NOT_READY", "MIG_CONFIG_FAILED", "AUTOSCALER_NO_SCALE_UP"),
    "GPU_LIMIT_MISSING": ("LIMITRANGE_DEFAULT_GPU",),
    "GPU_REQUEST_LIMIT_MISMATCH": ("LIMITRANGE_DEFAULT_GPU",),
    "GANG_INCOMPLETE": ("QUOTA_EXCEEDED", "QUEUE_QUOTA_EXHAUSTED", "GPU_NOT_ADVERTISED",
                        "GPU_UNHEALTHY", "NODE_UNSCHEDULABLE", "NODE_NOT_READY",
                        "TAINT_NOT_TOLERATED"),
    "PREEMPTION_BLOCKED": ("INSUFFICIENT_GPU",),
    "PENDING_NO_EVENTS": ("SCHEDULER_NOT_FOUND",),
    "QUOTA_NOT_READY": ("GPU_LIMIT_MISSING",),
}


@dataclass(frozen=True)
class RootCause:
    code: str
    summary: str
    finding: int  # index into Diagnosis.findings
    fix: str = ""
    symptoms: tuple[str, ...] = ()  # codes it explains, in the order they follow it

    def to_json(self) -> dict[str, object]:
        return {"code": self.code, "summary": self.summary, "finding": self.finding}


def _nodes(f: Finding) -> set[str]:
    return {o.name for o in f.objects if o.kind == "Node"}


class _Index:
    """Problems by (code, node) and by code: candidates are looked up, not scanned."""

    def __init__(self, problems: list[Finding]) -> None:
        self.by_code: dict[str, list[Finding]] = {}
        self.by_node: dict[tuple[str, str], list[Finding]] = {}
        self.nodeless: dict[str, list[Finding]] = {}
        for f in problems:
            self.by_code.setdefault(f.code, []).append(f)
            ns = _nodes(f)
            if not ns:
                self.nodeless.setdefault(f.code, []).append(f)
            for n in ns:
                self.by_node.setdefault((f.code, n), []).append(f)


def _candidates(f: Finding, ix: _Index) -> list[Finding]:
    """Findings the graph allows as ``f``'s cause, about the same node or about none."""
    mine = _nodes(f)
    out: dict[int, Finding] = {}
    for code in CAUSES.get(f.code, ()):
        found = ix.by_code.get(code, []) if not mine else [
            *ix.nodeless.get(code, []), *(c for n in mine for c in ix.by_node.get((code, n), []))]
        for c in found:
            if c is not f:
                out.setdefault(id(c), c)
    return list(out.values())


def _importance(f: Finding) -> tuple[int, tuple[int, int]]:
    return f.severity.rank, code_rank(f.code)


def link(findings: list[Finding]) -> tuple[list[Finding], RootCause | None]:
    """Findings with ``caused_by`` set, the root cause and its symptoms first, then the
    rest in their order; and the root cause (None when nothing is a problem)."""
    problems = [f for f in findings if f.severity.is_problem]
    ix = _Index(problems)
    causes = {id(f): sorted(_candidates(f, ix), key=_importance) for f in problems}
    out = [replace(f, caused_by=tuple(dict.fromkeys(c.code for c in causes[id(f)])))
           if causes.get(id(f)) else f for f in findings]
    new = {id(old): f for old, f in zip(findings, out, strict=True)}
    if not problems:
        return out, None
    top = min(problems, key=_importance)
    root, seen = top, {id(top)}
    while True:
        nxt = [c for c in causes[id(root)] if id(c) not in seen]
        if not nxt:
            break
        root = nxt[0]
        seen.add(id(root))
    # What blocks the workload is as grave as its worst symptom.
    worst = min((f.severity for f in problems if _explains(root, f, causes)),
                key=lambda s: s.rank, default=root.severity)
    root_f = new[id(root)]
    if worst.rank < root_f.severity.rank:
        root_f = replace(root_f, severity=worst)
    symptoms = [new[id(f)] for f in findings if f is not root and _explains(root, f, causes)]
    symptoms.sort(key=_importance)
    placed = {id(new[id(root)]), *map(id, symptoms)}
    rest = [f for f in out if id(f) not in placed]
    ordered = [root_f, *symptoms, *rest]
    return ordered, RootCause(root_f.code, root_f.summary, 0, root_f.fix,
                              tuple(dict.fromkeys(f.code for f in symptoms)))


def _explains(root: Finding, f: Finding, causes: dict[int, list[Finding]]) -> bool:
    """``root`` is among ``f``'s causes, directly or through other findings."""
    stack, seen = [f], {id(f)}
    while stack:
        cur = stack.pop()
        for c in causes.get(id(cur), ()):
            if c is root:
                return True
            if id(c) not in seen:
                seen.add(id(c))
                stack.append(c)
    return False

