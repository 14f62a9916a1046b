"""Loading the scenario directories under tests/scenarios (format: docs/design.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from handlers.registry import COMMANDS as REGISTRY
from handlers.runtime.source import Sample
from tests.fake_prometheus import FakeMetrics

SCENARIO_DIR = Path(__file__).parent / "scenarios"
# Every command that runs a diagnosis can have scenarios.
COMMANDS = tuple(name for name, spec in REGISTRY.items() if spec.run is not None)


@dataclass
class Scenario:
    name: str
    path: Path
    command: str
    snapshot: Path
    target: str | None = None
    namespace: str | None = None
    node: str | None = None
    expect: list[str] = field(default_factory=list)
    forbid: list[str] = field(default_factory=list)
    first: str | None = None
    # The root cause's code (None: nothing blocks); required, see has_root.
    root: str | None = None
    has_root: bool = False
    fits_if: list[str] | None = None  # optional: the change kinds of fits_if, in order
    # Codes the diagnosis must decline to say because the evidence shows otherwise
    # (Diagnosis.withheld, handlers/consistency.py).
    withheld: list[str] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)
    # The command's parameters as a user types them (CommandSpec.bind takes them).
    given: dict[str, Any] = field(default_factory=dict)
    # What Prometheus answers, by metric name (tests/fake_prometheus), or why it cannot.
    metrics: dict[str, list[Sample]] | None = None
    metrics_down: str | None = None

    def metrics_source(self) -> FakeMetrics | None:
        if self.metrics is None and self.metrics_down is None:
            return None
        fake = FakeMetrics(self.metrics)
        fake.down = self.metrics_down
        return fake


def _given(command: str, data: dict[str, Any]) -> dict[str, Any]:
    """`target:` is the command's first positional parameter (why-pending's TARGET,
    doctor's NODE); any other key named like one of its parameters (namespace, node,
    selector, limit) is that parameter."""
    spec = REGISTRY[command]
    given = {p.dest: data[p.dest] for p in spec.params if p.dest in data}
    positional = next((p for p in spec.params if not p.flags), None)
    if positional is not None and data.get("target") is not None:
        given.setdefault(positional.dest, data["target"])
    return given


def load_scenarios() -> list[Scenario]:
    out = []
    for f in sorted(SCENARIO_DIR.glob("*/scenario.yaml")):
        data = yaml.safe_load(f.read_text()) or {}
        command = data.get("command", "why-pending")
        if command not in COMMANDS:
            raise ValueError(f"{f}: unknown command {command!r}")
        given = _given(command, data)
        out.append(Scenario(
            name=f.parent.name, path=f.parent, command=command,
            snapshot=(f.parent / data.get("snapshot", "cluster.yaml")).resolve(),
            target=data.get("target"), namespace=data.get("namespace"), node=given.get("node"),
            expect=list(data.get("expect") or []), forbid=list(data.get("forbid") or []),
            first=data.get("first"), root=data.get("root"), has_root="root" in data,
            fits_if=None if data.get("fits_if") is None else list(data["fits_if"]), raw=data,
            withheld=list(data.get("withheld") or []),
            given=given, metrics=_metrics(data.get("metrics")),
            metrics_down=data.get("metrics_down"),
        ))
    return out


def _metrics(data: dict[str, list[dict[str, Any]]] | None) -> dict[str, list[Sample]] | None:
    """`metrics: {METRIC: [{labels: {...}, value: N}, ...]}` as FakeMetrics takes it."""
    if data is None:
        return None
    return {name: [Sample({str(k): str(v) for k, v in (s.get("labels") or {}).items()},
                          float(s["value"])) for s in samples]
            for name, samples in data.items()}
