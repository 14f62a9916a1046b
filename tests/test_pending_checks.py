"""why-pending's check registry: every registered check runs, in order, seeing only what
the checks it runs after found."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from bot.snapshot import load_snapshot
from handlers.model import Finding, ObjectRef
from handlers.pending import checks
from handlers.pending.checks import PendingCheck, pending_check
from handlers.pending.context import PendingContext
from handlers.view import Reader

ROOT = Path(__file__).resolve().parents[1]


def _ctx() -> PendingContext:
    reader = Reader(load_snapshot(ROOT / "examples" / "quota-exceeded"))
    pod = {"kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
           "spec": {"containers": []}, "status": {"phase": "Pending"}}
    return PendingContext(reader, pod, True, "default")


def test_checks_run_in_order_and_see_only_their_predecessors() -> None:
    reg: dict[str, PendingCheck] = {}
    seen: dict[str, list[str]] = {}

    def finds(code: str, name: str) -> object:
        def run(ctx: PendingContext, before: Sequence[Finding]) -> list[Finding]:
            seen[name] = [f.code for f in before]
            return [Finding(code, code, (ObjectRef("Pod", "p", "default"),), ("x",), "y")]
        return run

    pending_check("b", label="B", after=("a",),
                  registry=reg)(finds("GPU_LIMIT_MISSING", "b"))  # type: ignore[arg-type]
    pending_check("a", label="A", registry=reg)(finds("QUOTA_EXCEEDED", "a"))  # type: ignore[arg-type]
    pending_check("c", label="C", registry=reg)(finds("SCHEDULER_NOT_FOUND", "c"))  # type: ignore[arg-type]
    pending_check("skipped", label="S", registry=reg,
                  applies=lambda ctx: False)(finds("GANG_INCOMPLETE", "skipped"))  # type: ignore[arg-type]
    found, ran = checks.run(_ctx(), reg)
    assert ran == ["A", "B", "C"]
    assert [f.code for f in found] == ["QUOTA_EXCEEDED", "GPU_LIMIT_MISSING",
                                       "SCHEDULER_NOT_FOUND"]
    assert seen == {"a": [], "b": ["QUOTA_EXCEEDED"], "c": []}


def test_the_real_registry_holds_every_family_and_dra_only_for_claims() -> None:
    checks.load()
    assert {"spec", "dra", "queueing", "quota"} <= set(checks.REGISTRY)
    _, ran = checks.run(_ctx())
    assert not any(label.startswith("DRA") for label in ran)
    assert any(label.startswith("quota") for label in ran)
