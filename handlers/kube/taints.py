"""Taints and tolerations, matched as ``k8s.io/api/core/v1`` ``Toleration.ToleratesTaint``.

Rules (upstream ``toleration.go``):

1. an empty toleration ``effect`` matches every effect, else effects must be equal;
2. an empty toleration ``key`` matches every key (valid only with ``Exists``);
3. operator ``Exists`` matches any value; ``Equal`` (also the empty operator) needs equal
   values; ``Gt``/``Lt`` (newer clusters) compare the values as int64 (taint value > or <
   toleration value), a non-integer on either side does not match; any other operator
   never matches.

The scheduler's TaintToleration filter only looks at ``NoSchedule`` and ``NoExecute``
taints; ``PreferNoSchedule`` only affects scoring.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

Obj = Mapping[str, Any]

NO_SCHEDULE = "NoSchedule"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
NO_EXECUTE = "NoExecute"
SCHEDULING_EFFECTS = (NO_SCHEDULE, NO_EXECUTE)

# Taints the node lifecycle controller (TaintNodesByCondition) and cordon manage.
TAINT_NOT_READY = "node.kubernetes.io/not-ready"
TAINT_UNREACHABLE = "node.kubernetes.io/unreachable"
TAINT_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
TAINT_MEMORY_PRESSURE = "node.kubernetes.io/memory-pressure"
TAINT_DISK_PRESSURE = "node.kubernetes.io/disk-pressure"
TAINT_PID_PRESSURE = "node.kubernetes.io/pid-pressure"
TAINT_NETWORK_UNAVAILABLE = "node.kubernetes.io/network-unavailable"

READINESS_TAINTS = frozenset({TAINT_NOT_READY, TAINT_UNREACHABLE, TAINT_NETWORK_UNAVAILABLE})
PRESSURE_TAINTS = frozenset({TAINT_MEMORY_PRESSURE, TAINT_DISK_PRESSURE, TAINT_PID_PRESSURE})
LIFECYCLE_TAINT_KEYS = READINESS_TAINTS | PRESSURE_TAINTS | {TAINT_UNSCHEDULABLE}
LIFECYCLE_TAINTS = LIFECYCLE_TAINT_KEYS  # alias

# Node condition -> the taint the node lifecycle controller sets for it (all NoSchedule).
CONDITION_TAINTS: dict[tuple[str, str], str] = {
    ("Ready", "False"): TAINT_NOT_READY,
    ("Ready", "Unknown"): TAINT_UNREACHABLE,
    ("MemoryPressure", "True"): TAINT_MEMORY_PRESSURE,
    ("DiskPressure", "True"): TAINT_DISK_PRESSURE,
    ("PIDPressure", "True"): TAINT_PID_PRESSURE,
    ("NetworkUnavailable", "True"): TAINT_NETWORK_UNAVAILABLE,
}

_INT64_RE = re.compile(r"^[+-]?[0-9]+$")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def parse_int64(text: object) -> int | None:
    """Go's ``strconv.ParseInt(s, 10, 64)``: optional sign and digits only."""
    if not isinstance(text, str) or not _INT64_RE.match(text):
        return None
    v = int(text)
    return v if _INT64_MIN <= v <= _INT64_MAX else None


def tolerates(toleration: Obj, taint: Obj) -> bool:
    """Whether one toleration tolerates one taint."""
    t_effect = toleration.get("effect") or ""
    if t_effect and t_effect != (taint.get("effect") or ""):
        return False
    t_key = toleration.get("key") or ""
    if t_key and t_key != (taint.get("key") or ""):
        return False
    op = toleration.get("operator") or "Equal"
    if op == "Equal":
        return bool((toleration.get("value") or "") == (taint.get("value") or ""))
    if op == "Exists":
        return True
    if op in ("Gt", "Lt"):
        tol_v = parse_int64(toleration.get("value") or "")
        taint_v = parse_int64(taint.get("value") or "")
        if tol_v is None or taint_v is None:
            return False
        return taint_v > tol_v if op == "Gt" else taint_v < tol_v
    return False


def tolerated_by_any(tolerations: Iterable[Obj] | None, taint: Obj) -> bool:
    return any(tolerates(t, taint) for t in tolerations or ())


def untolerated(taints: Iterable[Obj] | None, tolerations: Iterable[Obj] | None,
                effects: Sequence[str] = SCHEDULING_EFFECTS) -> list[Obj]:
    """The taints with one of ``effects`` that no toleration tolerates, in node order."""
    tols = list(tolerations or ())
    return [t for t in taints or () if (t.get("effect") or "") in effects
            and not any(tolerates(tol, t) for tol in tols)]


def taint_str(taint: Obj) -> str:
    """``key=value:Effect`` (``key:Effect`` without a value), as kubectl prints it."""
    key, value, effect = taint.get("key") or "", taint.get("value") or "", taint.get("effect")
    return f"{key}={value}:{effect}" if value else f"{key}:{effect}"
