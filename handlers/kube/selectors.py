"""Label and field selectors, parsed and matched the way the API server does."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any


class SelectorError(ValueError):
    pass


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!"
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.op == "exists":
            return self.key in labels
        if self.op == "!":
            return self.key not in labels
        if self.op in ("=", "in"):
            return self.key in labels and labels[self.key] in self.values
        # "!=" and "notin" match objects without the key, as the API server does.
        return labels.get(self.key) not in self.values


_SET_RE = re.compile(r"^\s*([^\s!=(),]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")


def _split_top(expr: str) -> list[str]:
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in expr:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


@lru_cache(maxsize=1024)
def parse_label_selector(expr: str) -> tuple[Requirement, ...]:
    reqs = []
    for part in _split_top(expr):
        m = _SET_RE.match(part)
        if m:
            vals = frozenset(v.strip() for v in m.group(3).split(",") if v.strip())
            reqs.append(Requirement(m.group(1), m.group(2), vals))
        elif part.startswith("!"):
            reqs.append(Requirement(part[1:].strip(), "!"))
        elif "!=" in part:
            k, v = part.split("!=", 1)
            reqs.append(Requirement(k.strip(), "!=", frozenset([v.strip()])))
        elif "==" in part:
            k, v = part.split("==", 1)
            reqs.append(Requirement(k.strip(), "=", frozenset([v.strip()])))
        elif "=" in part:
            k, v = part.split("=", 1)
            reqs.append(Requirement(k.strip(), "=", frozenset([v.strip()])))
        elif re.fullmatch(r"[A-Za-z0-9_./-]+", part):
            reqs.append(Requirement(part, "exists"))
        else:
            raise SelectorError(f"cannot parse label selector {expr!r} at {part!r}")
    return tuple(reqs)


def match_labels(expr: str | None, labels: Mapping[str, str] | None) -> bool:
    if not expr:
        return True
    lab = labels or {}
    return all(r.matches(lab) for r in parse_label_selector(expr))


def selector_from_object(sel: Mapping[str, Any] | None) -> str:
    """A metav1.LabelSelector (matchLabels + matchExpressions) as selector text."""
    if not sel:
        return ""
    parts = [f"{k}={v}" for k, v in (sel.get("matchLabels") or {}).items()]
    for e in sel.get("matchExpressions") or []:
        op, key, vals = e.get("operator"), e.get("key"), e.get("values") or []
        if op == "In":
            parts.append(f"{key} in ({','.join(vals)})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({','.join(vals)})")
        elif op == "Exists":
            parts.append(key)
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts)


def match_label_selector_object(sel: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelector semantics: an empty selector matches everything."""
    return match_labels(selector_from_object(sel), labels)


# Field selectors: only the fields the API server supports for the kinds we read.
_FIELD_GETTERS: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "metadata.name": lambda o: o.get("metadata", {}).get("name", ""),
    "metadata.namespace": lambda o: o.get("metadata", {}).get("namespace", "") or "",
    "spec.nodeName": lambda o: o.get("spec", {}).get("nodeName", "") or "",
    "spec.schedulerName": lambda o: o.get("spec", {}).get("schedulerName", "") or "",
    "spec.unschedulable": lambda o: str(bool(o.get("spec", {}).get("unschedulable"))).lower(),
    "status.phase": lambda o: o.get("status", {}).get("phase", "") or "",
    "involvedObject.kind": lambda o: o.get("involvedObject", {}).get("kind", ""),
    "involvedObject.name": lambda o: o.get("involvedObject", {}).get("name", ""),
    "involvedObject.namespace": lambda o: o.get("involvedObject", {}).get("namespace", "") or "",
    "involvedObject.uid": lambda o: o.get("involvedObject", {}).get("uid", ""),
    "reason": lambda o: o.get("reason", "") or "",
    "type": lambda o: o.get("type", "") or "",
}


@lru_cache(maxsize=256)
def parse_field_selector(expr: str) -> tuple[tuple[str, str, str], ...]:
    out = []
    for part in (p.strip() for p in expr.split(",")):
        if not part:
            continue
        if "!=" in part:
            k, v = part.split("!=", 1)
            op = "!="
        elif "==" in part:
            k, v = part.split("==", 1)
            op = "="
        elif "=" in part:
            k, v = part.split("=", 1)
            op = "="
        else:
            raise SelectorError(f"cannot parse field selector {expr!r} at {part!r}")
        k = k.strip()
        if k not in _FIELD_GETTERS:
            raise SelectorError(f'field label not supported: "{k}"')
        out.append((k, op, v.strip()))
    return tuple(out)


def match_fields(expr: str | None, obj: Mapping[str, Any]) -> bool:
    if not expr:
        return True
    for key, op, val in parse_field_selector(expr):
        actual = _FIELD_GETTERS[key](obj)
        if (actual == val) != (op == "="):
            return False
    return True
