"""-o json is a contract: every scenario's output validates against
docs/schema/diagnosis.schema.json (jsonschema, Draft 2020-12), counts are integers."""

from __future__ import annotations

import copy
import io
import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from bot.cli import main
from bot.render import SCHEMA_VERSION
from tests.scenarios import Scenario, load_scenarios

SCHEMA_PATH = Path(__file__).resolve().parents[1] / "docs" / "schema" / "diagnosis.schema.json"
SCENARIOS = load_scenarios()
EXAMPLES = sorted(p for p in (SCHEMA_PATH.parents[2] / "examples").iterdir() if p.is_dir())


@cache
def validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(SCHEMA_PATH.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())


def cli_json(s: Scenario) -> dict[str, Any]:
    argv = [s.command]
    if s.command == "why-pending":
        argv.append(s.target or "")
    elif s.command == "doctor" and s.node:
        argv.append(s.node)
    if s.namespace:
        argv += ["-n", s.namespace]
    return run_json(*argv, "--snapshot", str(s.snapshot))


def run_json(*argv: str) -> dict[str, Any]:
    out, err = io.StringIO(), io.StringIO()
    code = main([*argv, "-o", "json"], out=out, err=err, environ={})
    assert code == 0, err.getvalue()
    return dict(json.loads(out.getvalue()))


def _errors(doc: Any) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in validator().iter_errors(doc)]


@pytest.mark.parametrize("s", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_every_scenarios_json_validates(s: Scenario) -> None:
    doc = cli_json(s)
    assert doc["schema_version"] == SCHEMA_VERSION
    assert not _errors(doc)


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_every_examples_ledger_validates(example: Path) -> None:
    """No scenario runs `nodes`: the ledger of every bundled example stands in."""
    assert not _errors(run_json("nodes", "--snapshot", str(example)))


def _floats(value: Any, path: str = "") -> list[str]:
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _floats(v, f"{path}/{k}")]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _floats(v, f"{path}/{i}")]
    return [path] if isinstance(value, float) and value.is_integer() else []


def test_whole_numbers_are_integers() -> None:
    by_command = {s.command: s for s in SCENARIOS}
    docs = [cli_json(s) for s in by_command.values()]
    docs += [run_json("nodes", "--snapshot", str(EXAMPLES[0]))]
    for doc in docs:
        assert not _floats(doc), doc["command"]


def test_the_schema_rejects_what_breaks_the_contract() -> None:
    good = run_json("nodes", "--snapshot", str(EXAMPLES[0]))
    good["findings"] = run_json("quota", "--snapshot", str(SCHEMA_PATH.parents[2] / "examples"
                                                         / "quota-exceeded"))["findings"]
    assert good["findings"] and good["details"]["rows"]
    assert not _errors(good)
    broken = []
    for mutate in (
        lambda d: d.pop("schema_version"),
        lambda d: d["findings"][0].update(severity="fatal"),
        lambda d: d["findings"][0].update(code="lower_case"),
        lambda d: d["details"]["totals"].update(nodes=2.5),
        lambda d: d["details"]["rows"][0].update(ready="yes"),
        lambda d: d.update(root_cause={"code": "X"}),
        lambda d: d["findings"][0].update(caused_by="NOT_A_LIST"),
    ):
        doc = copy.deepcopy(good)
        mutate(doc)
        broken.append(bool(_errors(doc)))
    assert all(broken), broken


def test_the_schema_takes_issue_8s_additions() -> None:
    doc = cli_json(next(s for s in SCENARIOS if s.command == "why-pending"))
    doc["root_cause"] = {"code": doc["findings"][0]["code"], "summary": "why", "finding": 0}
    doc["findings"][0]["caused_by"] = ["DRIVER_NOT_READY"]
    doc["findings"][0]["fits_if"] = [{"change": "tolerate", "summary": "add a toleration",
                                      "nodes": ["gpu-1"], "objects": [{"kind": "Pod",
                                                                       "name": "p"}]}]
    doc["findings"][0]["new_field"] = {"anything": 1}
    assert not _errors(doc)
    doc["root_cause"] = None
    assert not _errors(doc)
