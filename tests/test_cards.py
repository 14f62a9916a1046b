"""The code cards hold together: every code has a card, a check that can emit it, a runbook
page, a scenario and its public sources; the cause graph names only known codes; every
severity condition a card names is one some check states."""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

import pytest
import yaml

from handlers.cards import Card, CardError, card, load
from handlers.knowledge.logs import active

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "tests" / "data" / "spec" / "finding-codes.md"
RULES = ROOT / "deploy" / "prometheus" / "gpubot-rules.yaml"
# Modules that list codes rather than find them.
_CATALOGUE = ("handlers/cards.py", "handlers/codes.py")


def _strings(handlers: Path) -> set[str]:
    """Every string constant in handlers' modules, but the catalogue's own."""
    out: set[str] = set()
    for p in handlers.rglob("*.py"):
        if str(p.relative_to(handlers.parent)) in _CATALOGUE:
            continue
        out |= {n.value for n in ast.walk(ast.parse(p.read_text()))
                if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    return out


def _scenario_codes(scenarios: Path) -> dict[str, set[str]]:
    """code -> the scenarios that expect it (or name it as their root cause)."""
    out: dict[str, set[str]] = {}
    for f in scenarios.glob("*/scenario.yaml"):
        data = yaml.safe_load(f.read_text()) or {}
        for code in [*(data.get("expect") or []), data.get("root")]:
            if code:
                out.setdefault(code, set()).add(f.parent.name)
    return out


def _alerts() -> set[str]:
    doc = yaml.safe_load(RULES.read_text())
    groups = (doc.get("spec") or doc)["groups"]
    return {r["alert"] for g in groups for r in g["rules"] if "alert" in r}


def problems(root: Path) -> list[str]:
    """What does not hold together in the checkout at ``root``."""
    out: list[str] = []
    try:
        cards = load(root / "handlers" / "knowledge" / "cards").cards
    except CardError as e:
        return [f"cards do not load: {e}"]
    strings = _strings(root / "handlers")
    log_codes = set(active().codes)
    scenarios = _scenario_codes(root / "tests" / "scenarios")
    named = set(re.findall(r"^\| `([A-Z_]+)` \|", SPEC.read_text(), re.MULTILINE))
    named |= set(scenarios) | log_codes
    out += [f"{code}: no card" for code in sorted(named - set(cards))]
    alerts = _alerts()
    for code, c in cards.items():
        if code not in strings and code not in log_codes:
            out.append(f"{code}: no check can emit it (no handler names it, no log pattern "
                       "proves it)")
        if not (root / "docs" / "runbook" / c.runbook).is_file():
            out.append(f"{code}: runbook page docs/runbook/{c.runbook} is missing")
        if code not in scenarios:
            out.append(f"{code}: no scenario expects it")
        if not c.sources:
            out.append(f"{code}: no sources")
        out += [f"{code}: alert {a} is not in {RULES.name}" for a in c.alerts
                if a not in alerts]
        out += [f"{code}: condition {name} is stated by no check" for name, _ in c.when
                if name not in strings]
    return out


def test_the_catalogue_holds_together() -> None:
    assert problems(ROOT) == []


def _copy(tmp: Path) -> Path:
    for part in ("handlers", "docs/runbook"):
        shutil.copytree(ROOT / part, tmp / part,
                        ignore=shutil.ignore_patterns("__pycache__"))
    for f in (ROOT / "tests" / "scenarios").glob("*/scenario.yaml"):
        dest = tmp / "tests" / "scenarios" / f.parent.name
        dest.mkdir(parents=True)
        shutil.copy(f, dest)
    return tmp


@pytest.mark.parametrize(("remove", "says"), [
    ("handlers/knowledge/cards/WRONG_GPU_TYPE.yaml", "WRONG_GPU_TYPE: no card"),
    ("docs/runbook/GPU_UNHEALTHY.md", "GPU_UNHEALTHY: runbook page"),
    ("tests/scenarios/idle-gpus-held-while-pending", "GPU_IDLE_ALLOCATED: no scenario"),
])
def test_a_missing_card_runbook_or_scenario_is_noticed(tmp_path: Path, remove: str,
                                                        says: str) -> None:
    root = _copy(tmp_path)
    target = root / remove
    shutil.rmtree(target) if target.is_dir() else target.unlink()
    assert any(p.startswith(says) for p in problems(root)), problems(root)


def test_a_cause_of_an_unknown_code_is_refused(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    f = root / "handlers" / "knowledge" / "cards" / "GPU_UNHEALTHY.yaml"
    f.write_text(f.read_text().replace("caused_by: [GPU_XID_ERRORS]",
                                       "caused_by: [GPU_XID_ERRORS, GPU_ON_FIRE]"))
    assert problems(root) == ["cards do not load: cards/GPU_UNHEALTHY.yaml: names unknown "
                              "code GPU_ON_FIRE"]


def test_severity_comes_from_the_card_and_the_conditions() -> None:
    c: Card = card("GPU_UNHEALTHY")
    assert str(c.severity()) == "warning"
    assert str(c.severity({"all-unusable"})) == "critical"
    assert str(c.severity({"all-unusable", "explained"})) == "warning"  # shared rule after
    assert str(card("INSUFFICIENT_GPU").severity({"blocking"})) == "critical"
    assert str(card("WRONG_GPU_TYPE").severity({"blocking"})) == "info"  # only from warning
