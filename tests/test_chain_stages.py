"""The chain's stage registry: order from ``after``, what a stage sees, how outcomes merge."""

from __future__ import annotations

import ast
from datetime import UTC, datetime
from pathlib import Path

import pytest

from handlers.cards import codes
from handlers.chain.facts import ChainContext, NodeFacts
from handlers.chain.inventory import Inventory
from handlers.chain.outcome import Draft, NoRestart, Note, Outcome, Retell
from handlers.chain.runner import plan, run_node
from handlers.chain.stage import REGISTRY, Before, Registry, stage
from handlers.chain.stages import load
from handlers.view import Reader

STAGES = Path(__file__).resolve().parents[1] / "handlers" / "chain" / "stages"
NOW = datetime(2026, 1, 1, tzinfo=UTC)


class _Empty:
    """A view with no objects: the chain's reads find nothing."""

    source = "test"

    def list(self, kind: str, namespace: str | None = None, **kw: object) -> list[object]:
        return []

    def get(self, kind: str, name: str, namespace: str | None = None) -> None:
        return None

    def events(self, kind: str, name: str, namespace: str | None = None) -> list[object]:
        return []

    def logs(self, namespace: str, pod: str, container: str | None = None) -> str:
        return ""

    def now(self) -> datetime:
        return NOW


def _node(name: str = "gpu-1", gpus: int = 8) -> dict[str, object]:
    return {"kind": "Node", "metadata": {"name": name, "uid": "u",
                                         "labels": {"nvidia.com/gpu.present": "true"}},
            "status": {"capacity": {"nvidia.com/gpu": str(gpus)},
                       "allocatable": {"nvidia.com/gpu": str(gpus)},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def _ctx() -> ChainContext:
    return ChainContext(Reader(_Empty()), Inventory(NOW), NOW)  # type: ignore[arg-type]


def _registry() -> Registry:
    return Registry()


def test_stages_run_after_the_stages_they_name_whatever_the_file_order() -> None:
    reg = _registry()
    for name, after in (("c", ("b",)), ("a", ()), ("b", ("a",)), ("d", ("a",))):
        stage(name, after=after, registry=reg)(lambda n, b: Outcome())
    assert [s.name for s in reg.ordered()] == ["a", "b", "c", "d"]


def test_a_wait_circle_or_an_unknown_stage_is_refused() -> None:
    reg = _registry()
    stage("a", after=("b",), registry=reg)(lambda n, b: Outcome())
    stage("b", after=("a",), registry=reg)(lambda n, b: Outcome())
    with pytest.raises(ValueError, match="wait for each other"):
        reg.ordered()
    reg = _registry()
    stage("a", after=("nope",), registry=reg)(lambda n, b: Outcome())
    with pytest.raises(ValueError, match="unknown chain stages"):
        reg.ordered()
    with pytest.raises(ValueError, match="twice"):
        stage("a", registry=reg)(lambda n, b: Outcome())


def test_a_stage_sees_only_what_the_stages_it_runs_after_found() -> None:
    reg = _registry()
    seen: dict[str, bool] = {}

    def found(code: str) -> object:
        return lambda n, b: Outcome((Draft(code, f"{code} here", objects=(n.ref,)),))

    def looks(n: NodeFacts, b: Before) -> Outcome:
        seen["driver"] = b.has("DRIVER_NOT_READY")
        seen["mig"] = b.has("MIG_CONFIG_FAILED")
        return Outcome()

    stage("driver", registry=reg)(found("DRIVER_NOT_READY"))  # type: ignore[arg-type]
    stage("mig", registry=reg)(found("MIG_CONFIG_FAILED"))  # type: ignore[arg-type]
    stage("zlook", after=("driver",), registry=reg)(looks)
    run_node(_ctx(), _node(), plan(reg))
    assert seen == {"driver": True, "mig": False}


def test_amendments_change_only_the_finding_they_name_after_it_merged() -> None:
    reg = _registry()
    restart = (("restart-device-plugin", "gpu-1"),)
    stage("health", registry=reg)(lambda n, b: Outcome((
        Draft("GPU_UNHEALTHY", "unhealthy", "restart it", (n.ref,), ("allocatable 6",),
              restart),
        Draft("TIMESLICING_CONFIG_INVALID", "generic", "look", (n.ref,), ("log line",)))))
    stage("later", after=("health",), registry=reg)(lambda n, b: Outcome(
        (Draft("TIMESLICING_CONFIG_INVALID", "key missing", "add the key", (n.ref,),
               ("configmap keys: a",)),),
        (NoRestart("GPU_UNHEALTHY", "drain and repair", ("Xid 79",)),
         Retell("TIMESLICING_CONFIG_INVALID", "key missing", "add the key"),
         Note("GPU_XID_ERRORS", ("nobody reported it",)))))
    chain = run_node(_ctx(), _node(), plan(reg))
    by = {f.code: f for f in chain.findings}
    assert set(by) == {"GPU_UNHEALTHY", "TIMESLICING_CONFIG_INVALID"}
    assert by["GPU_UNHEALTHY"].actions == () and by["GPU_UNHEALTHY"].fix == "drain and repair"
    assert by["GPU_UNHEALTHY"].evidence == ("allocatable 6", "Xid 79")
    t = by["TIMESLICING_CONFIG_INVALID"]
    assert (t.summary, t.fix) == ("key missing", "add the key")
    assert t.evidence == ("log line", "configmap keys: a")


def test_a_check_whose_codes_are_problems_on_the_node_has_not_passed() -> None:
    reg = _registry()
    stage("driver", check="driver", registry=reg)(lambda n, b: Outcome(passed=True))
    stage("plugin", check="device plugin", registry=reg)(lambda n, b: Outcome(passed=True))
    stage("toolkit", after=("driver",), registry=reg)(lambda n, b: Outcome(
        (Draft("DRIVER_NOT_READY", "no driver", objects=(n.ref,)),)))
    chain = run_node(_ctx(), _node(), plan(reg))
    assert chain.passed == ["device plugin"]
    assert chain.row["verdict"] == "DRIVER_NOT_READY"


def test_every_stage_module_registers_a_stage_and_imports_no_other_stage() -> None:
    load()
    files = sorted(p for p in STAGES.glob("*.py") if not p.name.startswith("_"))
    registered = {s.run.__module__.rsplit(".", 1)[-1] for s in REGISTRY.stages.values()}
    assert {p.stem for p in files} <= registered
    for p in files:
        imported = {n.module for n in ast.walk(ast.parse(p.read_text()))
                    if isinstance(n, ast.ImportFrom) and n.module}
        assert not {m for m in imported if m.startswith("handlers.chain.stages")}, p.name


def test_the_real_chain_orders_every_stage_and_names_only_known_checks() -> None:
    load()
    p = plan(REGISTRY)
    names = [s.name for s in p.stages]
    assert names.index("hardware") < names.index("driver") < names.index("plugin") \
        < names.index("registration") < names.index("health")
    named = {check for c in codes().values() for check in c.checks}
    assert named <= set(REGISTRY.stages), "cards name chain checks no stage runs"
