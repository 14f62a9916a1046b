"""The kubelet's refusal of a pod it was given: which part of the kubelet refused, in its words.

After the scheduler binds a pod, the kubelet runs its admit handlers and may refuse it; the
pod then ends ``Failed`` with the refusal's reason and message (``kl.rejectPod``: message
``"Pod " + msg`` up to 1.2x, ``"Pod was rejected: " + msg`` since) and a Warning event of the
same reason. Which part refused, by reason:

- ``TopologyAffinityError`` (1.19+; ``Topology Affinity Error`` in 1.16-1.18): the Topology
  Manager could not align the pod's devices, CPUs and memory on the NUMA nodes its policy
  asks (only ``restricted`` and ``single-numa-node`` refuse);
- ``SMTAlignmentError``: the CPU manager's ``full-pcpus-only`` option (whole cores);
- ``UnexpectedAdmissionError``: an allocation failed; ``Allocate failed due to <error>, which
  is unexpected``. The error names the part: the device manager (devices, device plugin
  RPCs), the CPU manager (``not enough cpus``), the memory manager (``[memorymanager]``);
- ``OutOf<resource>``: the node's capacity for the resource (predicate.go), e.g.
  ``OutOfnvidia.com/gpu`` while the device plugin has not registered the GPUs yet.

Sources: pkg/kubelet/cm/topologymanager (topology_manager.go, policy_single_numa_node.go),
pkg/kubelet/cm/admission/errors.go, pkg/kubelet/cm/cpumanager/policy_static.go,
pkg/kubelet/cm/memorymanager/policy_static.go, pkg/kubelet/lifecycle/predicate.go,
pkg/kubelet/kubelet.go (rejectPod).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

Obj = Mapping[str, Any]

TOPOLOGY = "topology"
CPU = "cpu"
MEMORY = "memory"
DEVICE = "device"
RESOURCE = "resource"

_TOPOLOGY_REASONS = frozenset({"TopologyAffinityError", "Topology Affinity Error"})
_REASON = re.compile(
    r"^(?:TopologyAffinityError|Topology Affinity Error|SMTAlignmentError"
    r"|UnexpectedAdmissionError|OutOf[\w./-]+)$")
# rejectPod's prefixes of the status message, newest first.
_PREFIX = re.compile(r"^Pod (?:was rejected: )?")
_CPU_ERROR = re.compile(r"not enough cpus available|SMT Alignment Error|cpuset", re.I)
_MEMORY_ERROR = re.compile(r"\[memorymanager\]")


@dataclass(frozen=True)
class Refusal:
    """One refusal: the kubelet's reason and message (rejectPod's prefix removed), the part
    of the kubelet that refused (``TOPOLOGY``, ``CPU``, ``MEMORY``, ``DEVICE``,
    ``RESOURCE``), where it was read (``status`` or ``event``) and the message as written
    there (``said``: the proof, word for word)."""

    reason: str
    message: str
    part: str
    source: str
    said: str

    @property
    def topology(self) -> bool:
        return self.part == TOPOLOGY

    def evidence(self) -> str:
        where = "status.reason/message" if self.source == "status" else "kubelet event"
        return f"{where}: {self.reason}: {self.said}"


def is_refusal_reason(reason: object) -> bool:
    """A pod-level reason the kubelet writes when it refuses a pod at admission."""
    return bool(_REASON.match(str(reason or "")))


def _part(reason: str, message: str) -> str:
    if reason in _TOPOLOGY_REASONS:
        return TOPOLOGY
    if reason == "SMTAlignmentError":
        return CPU
    if reason.startswith("OutOf"):
        return RESOURCE
    if _MEMORY_ERROR.search(message):
        return MEMORY
    if _CPU_ERROR.search(message):
        return CPU
    return DEVICE


def refusal(pod: Obj, events: Iterable[Obj] = ()) -> Refusal | None:
    """The kubelet's refusal of ``pod``: from its status (a Failed pod with a refusal's
    reason, or an ``Allocate failed due to`` message), else from the newest Warning event of
    such a reason (the status may lag, or have been rewritten). None when there is none."""
    st = pod.get("status") or {}
    reason, message = str(st.get("reason") or ""), str(st.get("message") or "")
    if is_refusal_reason(reason) or "Allocate failed due to" in message:
        text = _PREFIX.sub("", message, count=1)
        return Refusal(reason or "UnexpectedAdmissionError", text, _part(reason, text), "status",
                       message)
    found: Refusal | None = None
    for e in events:  # oldest first: the last one wins
        if e.get("type") == "Warning" and is_refusal_reason(e.get("reason")):
            text = str(e.get("message") or "")
            r = str(e.get("reason"))
            found = Refusal(r, text, _part(r, text), "event", text)
    return found
