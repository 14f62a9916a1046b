"""Verdicts that never contradict their evidence (rules as data: knowledge/consistency.yaml).

- ``withhold``: before the chain emits a node's findings, an absence claim (no plugin, no
  driver, not registered, not advertised) is not made where a fact shows the opposite (the
  node advertises GPUs, a GPU pod runs there); the fact is said instead. A claim that rests
  on a kind gpubot could not read is at most a warning (condition ``unverified``).
- ``resolve``: of two findings of one diagnosis that cannot both be true about one node,
  the one the rule names wins (the finisher's first step).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any

from handlers.cards import codes
from handlers.gpu import gpu_resources, name_of, ns_of, requests_gpu
from handlers.knowledge import load_yaml
from handlers.model import Finding
from handlers.timefmt import parse_time

DATA = Path(__file__).parent / "knowledge" / "consistency.yaml"
FACTS = ("advertises", "gpu-pod-running", "gpu-pod-scheduled")
# A GPU pod the scheduler bound to the node this recently proves the node advertised GPUs
# then (the scheduler's NodeResourcesFit let it through).
SCHEDULED_WITHIN = timedelta(hours=1)
UNVERIFIED = "unverified"

Obj = dict[str, Any]


@dataclass(frozen=True)
class Claim:
    id: str
    code: str
    unless: tuple[str, ...]
    rests_on: tuple[str, ...]
    exempt: frozenset[str]  # conditions under which the finding claims no absence
    source: str


@dataclass(frozen=True)
class Conflict:
    id: str
    drop: str
    keep: str
    because: str


@dataclass(frozen=True)
class Rules:
    claims: Mapping[str, Claim]  # by code
    conflicts: tuple[Conflict, ...]


def _strings(raw: Any, key: str, where: str) -> tuple[str, ...]:
    value = raw.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{where}: '{key}' must be a list of strings")
    return tuple(value)


@cache
def rules() -> Rules:
    return parse(load_yaml(DATA) or {})


def parse(doc: Mapping[str, Any]) -> Rules:
    """The rules of a consistency.yaml document; an unknown code or fact is refused."""
    known = codes()
    claims: dict[str, Claim] = {}
    for i, raw in enumerate(doc.get("claims") or []):
        where = f"consistency.yaml claim {i}"
        c = Claim(str(raw["id"]), str(raw["code"]), _strings(raw, "unless", where),
                  _strings(raw, "rests_on", where), frozenset(_strings(raw, "except", where)),
                  str(raw["source"]))
        bad = [f for f in c.unless if f not in FACTS]
        if c.code not in known or bad or not c.unless:
            raise ValueError(f"{where} ({c.id}): unknown code or facts {bad or c.code}")
        claims[c.code] = c
    conflicts: list[Conflict] = []
    for i, raw in enumerate(doc.get("conflicts") or []):
        x = Conflict(str(raw["id"]), str(raw["drop"]), str(raw["keep"]), str(raw["because"]))
        if x.drop not in known or x.keep not in known:
            raise ValueError(f"consistency.yaml conflict {i} ({x.id}): unknown code")
        conflicts.append(x)
    return Rules(claims, tuple(conflicts))


class NodeEvidence:
    """The facts about one node, each worked out on first ask: the sentence that proves
    it, or None."""

    def __init__(self, node: Obj, pods: Callable[[], Sequence[Obj]],
                 dra_devices: int = 0, now: datetime | None = None) -> None:
        self.node = node
        self.name = name_of(node)
        self._pods = pods
        self._dra = dra_devices
        self._now = now
        self._said: dict[str, str | None] = {}

    def holds(self, fact: str) -> str | None:
        if fact not in self._said:
            self._said[fact] = getattr(self, "_" + fact.replace("-", "_"))()
        return self._said[fact]

    def _advertises(self) -> str | None:
        alloc = {r: v for r, v in gpu_resources(self.node, "allocatable").items() if v > 0}
        if alloc:
            shown = ", ".join(f"{r}={v:g}" for r, v in sorted(alloc.items()))
            return f"{self.name} advertises {shown} (status.allocatable)"
        if self._dra:
            return f"{self.name} publishes {self._dra} DRA GPU devices (ResourceSlices)"
        return None

    def _gpu_pod_running(self) -> str | None:
        for p in self._pods():
            if requests_gpu(p) and _running_ready(p):
                return f"pod {ns_of(p)}/{name_of(p)} asks for GPUs and runs Ready on {self.name}"
        return None


    def _gpu_pod_scheduled(self) -> str | None:
        if self._now is None:
            return None
        for p in self._pods():
            cond = next((c for c in (p.get("status") or {}).get("conditions") or []
                         if c.get("type") == "PodScheduled" and c.get("status") == "True"), None)
            stamp = (cond or {}).get("lastTransitionTime")
            at = parse_time(stamp)
            if (requests_gpu(p) and at is not None and self._now - at <= SCHEDULED_WITHIN
                    and (p.get("status") or {}).get("phase") != "Succeeded"):
                return (f"the scheduler bound GPU pod {ns_of(p)}/{name_of(p)} to {self.name} "
                        f"at {stamp}: it advertised GPUs then")
        return None


def _running_ready(pod: Obj) -> bool:
    st = pod.get("status") or {}
    cs = st.get("containerStatuses") or []
    return st.get("phase") == "Running" and bool(cs) and all(c.get("ready") for c in cs)


@dataclass(frozen=True)
class Verdict:
    """What ``withhold`` decided about one claim."""

    withheld: str | None = None  # the sentence said instead, when the claim is not made
    unverified: tuple[str, ...] = ()  # kinds the claim rests on that were not read


def withhold(code: str, conditions: Iterable[str], evidence: NodeEvidence,
             readable: Callable[[str], bool]) -> Verdict:
    claim = rules().claims.get(code)
    if claim is None or claim.exempt & set(conditions):
        return Verdict()
    for fact in claim.unless:
        said = evidence.holds(fact)
        if said is not None:
            return Verdict(f"{code} not said about {evidence.name}: {said} ({claim.source})")
    return Verdict(unverified=tuple(k for k in claim.rests_on if not readable(k)))


def _nodes(f: Finding) -> frozenset[str]:
    return frozenset(o.name for o in f.objects if o.kind == "Node")


def resolve(findings: list[Finding]) -> tuple[list[Finding], list[str]]:
    """``findings`` without the losers of every conflict, and what was dropped and why."""
    dropped: list[str] = []
    out = list(findings)
    for c in rules().conflicts:
        winners = [_nodes(f) for f in out if f.code == c.keep]
        if not winners:
            continue
        kept = []
        for f in out:
            if f.code == c.drop and any(_nodes(f) == w for w in winners):
                where = ", ".join(sorted(_nodes(f))) or "the workload"
                dropped.append(f"{c.drop} not said about {where}: {c.keep} is, because "
                               f"{c.because}")
                continue
            kept.append(f)
        out = kept
    return out, dropped
