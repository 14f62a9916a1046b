"""What a handler may ask of a metrics backend: PromQL in, samples out, no I/O types.

    samples = metrics.instant('DCGM_FI_DEV_XID_ERRORS > 0')
    for s in samples: s.labels["Hostname"], s.value

An implementation raises ``MetricsError`` (its ``str()`` fit for the user) when the backend
cannot answer; the checks turn it into one ``METRICS_UNAVAILABLE`` line naming what they
could not check, and the rest of the diagnosis runs as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol


class MetricsError(Exception):
    """The backend could not answer (unreachable, refused, timed out, bad query)."""


@dataclass(frozen=True)
class Sample:
    """One series at one instant."""

    labels: Mapping[str, str]
    value: float


@dataclass(frozen=True)
class Series:
    """One series over a range: (unix seconds, value) points, oldest first."""

    labels: Mapping[str, str]
    points: tuple[tuple[float, float], ...] = field(default=())


class MetricsSource(Protocol):
    @property
    def source(self) -> str:
        """Where the metrics come from, for the user: ``prometheus http://...``."""
        ...

    @property
    def idle_window(self) -> str:
        """PromQL duration over which a GPU must stay below ``idle_threshold`` (``1h``)."""
        ...

    @property
    def idle_threshold(self) -> float:
        """Utilisation (percent) under which an allocated GPU counts as idle."""
        ...

    def instant(self, query: str) -> list[Sample]:
        """The query's value now. Raises MetricsError."""
        ...

    def range(self, query: str, seconds: float, step: float) -> list[Series]:
        """The query over the last ``seconds``, one point per ``step``. Raises MetricsError."""
        ...
