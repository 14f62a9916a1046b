"""A MetricsSource answering from a table, for handler tests (no HTTP).

    fake = FakeMetrics({"DCGM_FI_DEV_XID_ERRORS": [Sample({...}, 79)]})
    fake.down = "connection refused"       # every query raises MetricsError

A query is answered by the first key it contains (so ``max_over_time(X[1h])`` matches
``X``); filters are not applied (the checks filter again). An unknown query answers no
series, as Prometheus does for a missing metric, or absent()'s labelless sample.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from handlers.runtime.source import MetricsError, Sample, Series


class FakeMetrics:
    def __init__(self, table: Mapping[str, Sequence[Sample]] | None = None, *,
                 idle_window: str = "1h", idle_threshold: float = 5.0) -> None:
        self.table = dict(table or {})
        self.down: str | None = None
        self.queries: list[str] = []
        self._window, self._threshold = idle_window, idle_threshold

    @property
    def source(self) -> str:
        return "prometheus http://fake"

    @property
    def idle_window(self) -> str:
        return self._window

    @property
    def idle_threshold(self) -> float:
        return self._threshold

    def instant(self, query: str) -> list[Sample]:
        self.queries.append(query)
        if self.down:
            raise MetricsError(f"prometheus http://fake cannot be reached: {self.down}")
        for key, samples in self.table.items():
            if key in query:
                return list(samples)
        # "... or on () absent(X)": Prometheus answers one labelless sample when X is missing
        return [Sample({}, 1.0)] if "absent(" in query else []

    def range(self, query: str, seconds: float, step: float) -> list[Series]:
        self.queries.append(query)
        if self.down:
            raise MetricsError("down")
        return []
