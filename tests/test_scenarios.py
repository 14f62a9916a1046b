"""Every scenario: the codes it expects come out, the codes it forbids do not, and it reads
only the kinds its command declares (``CommandSpec.reads``)."""

from __future__ import annotations

import builtins
from typing import Any

import pytest

from bot.snapshot import load_snapshot
from handlers.codes import CODES
from handlers.consistency import rules
from handlers.model import Diagnosis
from handlers.registry import COMMANDS
from handlers.view import ClusterView, Obj, Reader
from tests.scenarios import Scenario, load_scenarios

SCENARIOS = load_scenarios()


def run_scenario(s: Scenario) -> Diagnosis:
    return run_on(s, load_snapshot(s.snapshot))


def run_on(s: Scenario, view: ClusterView) -> Diagnosis:
    """The scenario's command on any view: a snapshot, or the live fake API server."""
    spec = COMMANDS[s.command]
    assert spec.run is not None, f"{s.name}: {s.command} runs no diagnosis"
    return spec.run(Reader(view, metrics=s.metrics_source()), spec.bind(s.given))


class ReadKinds:
    """A view that notes the kinds read through it (pod logs as "pods/log")."""

    def __init__(self, view: ClusterView) -> None:
        self.view, self.kinds = view, set[str]()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.view, name)

    def list(self, kind: str, *args: Any, **kwargs: Any) -> builtins.list[Obj]:
        self.kinds.add(kind)
        return self.view.list(kind, *args, **kwargs)

    def get(self, kind: str, *args: Any, **kwargs: Any) -> Obj | None:
        self.kinds.add(kind)
        return self.view.get(kind, *args, **kwargs)

    def events(self, kind: str, *args: Any, **kwargs: Any) -> builtins.list[Obj]:
        self.kinds.add("Event")
        return self.view.events(kind, *args, **kwargs)

    def logs(self, *args: Any, **kwargs: Any) -> str | None:
        self.kinds.add("pods/log")
        return self.view.logs(*args, **kwargs)


def assert_root_and_fits(s: Scenario, diag: Diagnosis) -> None:
    """The scenario's `root:` (required) and `fits_if:` kinds (optional) come out."""
    assert s.has_root, f"{s.name}: scenario.yaml has no `root:` (the root cause's code or null)"
    got = diag.root_cause.code if diag.root_cause else None
    assert got == s.root, f"{s.name}: root cause {got}, want {s.root}; got {diag.codes}"
    if diag.root_cause:
        assert diag.findings[diag.root_cause.finding].code == s.root
    if s.fits_if is not None:
        kinds = [c.change for c in diag.fits_if]
        assert kinds == s.fits_if, f"{s.name}: fits_if {kinds}, want {s.fits_if}"


def _advertising(node: Obj) -> bool:
    alloc = (node.get("status") or {}).get("allocatable") or {}
    return any(k.startswith("nvidia.com/") and str(v).isdigit() and int(v) > 0
               for k, v in alloc.items())


def _gpu_pod_running(view: ClusterView, node: str) -> bool:
    for p in view.list("Pod"):
        st = p.get("status") or {}
        limits = [k for c in (p.get("spec") or {}).get("containers") or []
                  for k in ((c.get("resources") or {}).get("limits") or {})]
        if ((p.get("spec") or {}).get("nodeName") == node and st.get("phase") == "Running"
                and any(k.startswith("nvidia.com/") for k in limits)
                and all(c.get("ready") for c in st.get("containerStatuses") or [{}])):
            return True
    return False


def assert_no_contradiction(s: Scenario, view: ClusterView, diag: Diagnosis) -> None:
    """No absence claim about a node whose own objects show the opposite: worked out here
    from the raw objects, not through handlers/consistency.py."""
    for f in diag.findings:
        claim = rules().claims.get(f.code)
        if claim is None or claim.exempt & f.conditions:
            continue
        for name in (o.name for o in f.objects if o.kind == "Node"):
            node = view.get("Node", name)
            if node is None:
                continue
            assert not ("advertises" in claim.unless and _advertising(node)), (
                f"{s.name}: {f.code} about {name}, which advertises "
                f"{node['status']['allocatable']}")
            assert not ("gpu-pod-running" in claim.unless and _gpu_pod_running(view, name)), (
                f"{s.name}: {f.code} about {name}, where a GPU pod runs Ready")


@pytest.mark.parametrize("s", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_scenario(s: Scenario) -> None:
    for code in s.expect + s.forbid + s.withheld + ([s.first] if s.first else []):
        assert code in CODES, f"{s.name}: {code} is not a finding code"
    view = ReadKinds(load_snapshot(s.snapshot))
    diag = run_on(s, view)  # type: ignore[arg-type]  # a ClusterView by delegation
    undeclared = view.kinds - COMMANDS[s.command].reads
    assert not undeclared, f"{s.name}: {s.command} reads {sorted(undeclared)}, not in its reads"
    codes = diag.codes
    missing = [c for c in s.expect if c not in codes]
    unwanted = [c for c in s.forbid if c in codes]
    assert not missing and not unwanted, (
        f"{s.name}: missing {missing}, unwanted {unwanted}; got {codes}")
    if s.first:
        assert codes[0] == s.first, f"{s.name}: first finding {codes[0]}, want {s.first}"
    assert_root_and_fits(s, diag)
    not_said = [c for c in s.withheld if not any(w.startswith(f"{c} not said")
                                                  for w in diag.withheld)]
    assert not not_said, f"{s.name}: {not_said} not withheld; withheld {diag.withheld}"
    assert_no_contradiction(s, view, diag)
    for f in diag.findings:
        assert f.summary, f"{s.name}: {f.code} has no summary"
        if f.severity.is_problem:
            assert f.evidence, f"{s.name}: {f.code} has no evidence"
            assert f.fix, f"{s.name}: {f.code} has no fix"
