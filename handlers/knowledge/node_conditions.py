"""GPU health that the clouds' node agents write as Node conditions, kept as data
(``node_conditions.yaml``, format in its header): which condition, in which status, with
which reason or message, proves which finding code.

    for hit in matches(node_conditions): hit.entry.code, hit.condition, hit.gpus
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from handlers.knowledge import load_yaml

DATA = Path(__file__).with_name("node_conditions.yaml")
_KEYS = {"id", "code", "agent", "types", "problem", "reason", "message", "gpus", "fabric",
         "source", "examples", "healthy"}


@dataclass(frozen=True)
class Entry:
    id: str
    code: str
    agent: str
    types: frozenset[str]
    problem: str
    source: str
    reason: re.Pattern[str] | None = None
    message: re.Pattern[str] | None = None
    gpus: re.Pattern[str] | None = None
    fabric: bool = False

    def matches(self, cond: Mapping[str, Any]) -> bool:
        if str(cond.get("type")) not in self.types or str(cond.get("status")) != self.problem:
            return False
        if self.reason is None and self.message is None:
            return True
        return bool((self.reason and self.reason.search(str(cond.get("reason") or "")))
                    or (self.message and self.message.search(str(cond.get("message") or ""))))

    def gpu_counts(self, cond: Mapping[str, Any]) -> tuple[int, int] | None:
        """(expected, found) GPUs, when the message says."""
        m = self.gpus.search(str(cond.get("message") or "")) if self.gpus else None
        return (int(m[1]), int(m[2])) if m else None


@dataclass(frozen=True)
class Hit:
    entry: Entry
    condition: Mapping[str, Any]


def _entry(raw: Any, where: str, codes: Iterable[str]) -> Entry:
    if not isinstance(raw, dict) or set(raw) - _KEYS:
        raise ValueError(f"{where}: unknown keys {sorted(set(raw) - _KEYS)}"
                         if isinstance(raw, dict) else f"{where}: not a mapping")
    for key in ("id", "code", "agent", "problem", "source"):
        if not isinstance(raw.get(key), str) or not raw[key]:
            raise ValueError(f"{where}: '{key}' must be a non-empty string")
    if raw["code"] not in set(codes):
        raise ValueError(f"{where}: unknown finding code {raw['code']}")
    if raw["problem"] not in ("True", "False"):
        raise ValueError(f"{where}: problem must be \"True\" or \"False\"")
    types = raw.get("types")
    if not isinstance(types, list) or not types:
        raise ValueError(f"{where}: 'types' must list condition types")

    def rx(key: str) -> re.Pattern[str] | None:
        return re.compile(raw[key]) if raw.get(key) else None

    e = Entry(raw["id"], raw["code"], raw["agent"], frozenset(map(str, types)),
              raw["problem"], raw["source"], rx("reason"), rx("message"), rx("gpus"),
              bool(raw.get("fabric", False)))
    for ex in raw.get("examples") or []:
        if not e.matches(ex):
            raise ValueError(f"{where} ({e.id}): does not match its example {ex}")
    for ok in raw.get("healthy") or []:
        if e.matches(ok):
            raise ValueError(f"{where} ({e.id}): matches the healthy condition {ok}")
    if not raw.get("examples"):
        raise ValueError(f"{where} ({e.id}): give at least one example")
    return e


@cache
def entries() -> tuple[Entry, ...]:
    """The entries of node_conditions.yaml, each checked against its examples."""
    from handlers.codes import CODES

    doc = load_yaml(DATA) or {}
    out = tuple(_entry(raw, f"node_conditions.yaml entry {i}", CODES)
                for i, raw in enumerate(doc.get("entries") or []))
    ids = [e.id for e in out]
    if len(set(ids)) != len(ids):
        raise ValueError("node_conditions.yaml: an id is listed twice")
    return out


def known_types() -> frozenset[str]:
    return frozenset(t for e in entries() for t in e.types)


def matches(conditions: Iterable[Mapping[str, Any]]) -> list[Hit]:
    """Every (entry, condition) pair where the condition proves the entry's code."""
    return [Hit(e, c) for c in conditions for e in entries() if e.matches(c)]
