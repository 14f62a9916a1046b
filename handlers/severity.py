"""How grave a finding is. Which severity a finding gets is its code card's word
(``handlers/cards.py``), from the conditions its evidence shows."""

from __future__ import annotations

from enum import StrEnum


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
