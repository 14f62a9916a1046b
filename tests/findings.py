"""Findings at a chosen severity for unit tests: the conditions (card's or shared) that give
it, since a finding's severity is its card's word (handlers/cards.py)."""

from __future__ import annotations

from itertools import combinations
from typing import Any

from handlers.cards import card, known_conditions
from handlers.model import Finding, Severity

# What the finisher adds from the whole diagnosis: not a check's to state.
_FINISHER = frozenset({"root-of-warning", "root-of-critical", "explained", "blocking"})


def conditions_for(code: str, severity: Severity) -> frozenset[str]:
    names = sorted(known_conditions(code) - _FINISHER)
    for n in range(3):
        for combo in combinations(names, n):
            if card(code).severity(combo) == severity:
                return frozenset(combo)
    raise ValueError(f"no conditions give {code} severity {severity}")


def finding_at(code: str, severity: Severity, summary: str, *args: Any,
               **kwargs: Any) -> Finding:
    return Finding(code, summary, *args, conditions=conditions_for(code, severity), **kwargs)


def commands(f: Finding) -> str:
    """A finding's fix commands, one per line (assertions on what on-call would run)."""
    return "\n".join(f.fix.commands)


def patch_text(f: Finding) -> str:
    """The YAML of its fix's patch, or ""."""
    return f.fix.patch.text if f.fix.patch else ""
