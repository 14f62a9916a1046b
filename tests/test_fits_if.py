"""fits_if: the smallest single changes after which the scheduler's filters pass, each
re-checked with the change applied. Per kind, the scenarios assert what comes out
(`fits_if:` in scenario.yaml); here: the shape, the verification and the 'closest' text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bot.snapshot import load_snapshot
from handlers import pending_all, why_pending
from handlers.cards import CHANGES as KINDS
from handlers.model import Diagnosis
from handlers.target import parse_target
from handlers.view import Reader
from tests.test_fix_rules import _copy, _each

ROOT = Path(__file__).parents[1]
CORDONED = ROOT / "tests" / "scenarios" / "cordoned-gpu-nodes"


def _why(path: Path, target: str, ns: str | None = None) -> Diagnosis:
    return why_pending.run(Reader(load_snapshot(path)), parse_target(target, ns))


def _cordoned_target() -> tuple[str, str | None]:
    import yaml
    sc = yaml.safe_load((CORDONED / "scenario.yaml").read_text())
    return sc["target"], sc.get("namespace")


def _snapshot_of(scenario: Path) -> Path:
    import yaml
    sc = yaml.safe_load((scenario / "scenario.yaml").read_text())
    return (scenario / sc.get("snapshot", "cluster.yaml")).resolve()


def test_shape_and_order() -> None:
    target, ns = _cordoned_target()
    d = _why(_snapshot_of(CORDONED), target, ns)
    assert d.fits_if, d.details.get("fits_if_closest")
    out = d.to_json()["fits_if"]
    for c in out:
        assert set(c) == {"change", "summary", "nodes", "objects"}
        assert c["change"] in KINDS and c["summary"]
    assert out[0]["change"] == "uncordon"
    assert out[0]["objects"] == [{"kind": "Node", "name": out[0]["nodes"][0],
                                  "namespace": None}]


def test_a_change_that_the_filters_still_reject_is_not_offered(tmp_path: Path) -> None:
    """Cordoned and tainted: uncordoning alone, or tolerating alone, does not let it fit."""
    def taint(node: dict[str, Any]) -> None:
        if node["spec"].get("unschedulable"):
            node["spec"].setdefault("taints", []).append(
                {"key": "maintenance", "value": "driver-upgrade", "effect": "NoSchedule"})
    target, ns = _cordoned_target()
    src = _snapshot_of(CORDONED)
    d = _why(_copy(src, tmp_path, _each("Node", taint)), target, ns)
    assert d.fits_if == []
    assert "still leaves" in d.details["fits_if_closest"]


def test_fits_if_leaves_the_warm_caches_alone() -> None:
    """What-if copies carry no uid: a second run sees the same remembered NodeInfo."""
    from handlers.scheduler import nodeinfo
    target, ns = _cordoned_target()
    reader = Reader(load_snapshot(_snapshot_of(CORDONED)))
    why_pending.run(reader, parse_target(target, ns))
    kept = nodeinfo._NODES.of(reader.memos)
    assert kept
    before = dict(kept)
    why_pending.run(reader, parse_target(target, ns))
    assert all(kept.get(k) is v for k, v in before.items())


def test_pending_rows_carry_fits_if() -> None:
    snap = ROOT / "examples" / "cordoned-gpu-nodes"
    d = pending_all.run(Reader(load_snapshot(snap)), None)
    rows = d.details["rows"]
    assert rows and all("fits_if" in r for r in rows)
    assert any(r["fits_if"] and r["fits_if"][0]["change"] == "uncordon" for r in rows)
