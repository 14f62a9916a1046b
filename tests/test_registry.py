"""The command registry (handlers/registry.py) is the one place a command is described: the
CLI, /gpu, the templates, the scenarios and the alerts all follow it."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest
import yaml

from bot.alerts.mapping import command_for
from bot.cli import build_parser
from bot.live.kinds import KINDS
from bot.render import template_name
from bot.slack.blocks import template_for
from bot.slack.commands import ALIASES, Command, parse, parse_args, tokenize
from handlers.registry import COMMANDS, CommandSpec, Params
from tests.scenarios import load_scenarios

ROOT = Path(__file__).resolve().parents[1]
TEMPLATES = ROOT / "templates"
RULES = ROOT / "deploy" / "prometheus"
SPECS = list(COMMANDS.values())
DIAGNOSES = [s for s in SPECS if s.run is not None]


def _ids(specs: list[CommandSpec]) -> list[str]:
    return [s.name for s in specs]


def test_the_cli_has_a_subcommand_per_diagnosis_with_its_parameters() -> None:
    subcommands = build_parser().commands
    assert set(subcommands) - {"completion", "serve", "snapshot", "watch", "digest"} == {
        s.name for s in DIAGNOSES}
    for spec in DIAGNOSES:
        options = {o for a in subcommands[spec.name]._actions for o in a.option_strings}
        dests = {a.dest for a in subcommands[spec.name]._actions}
        for p in spec.params:
            if p.cli:
                assert set(p.flags) <= options and p.dest in dests, (spec.name, p.dest)


@pytest.mark.parametrize("spec", SPECS, ids=_ids(SPECS))
def test_slack_parses_each_command_its_examples_and_its_aliases(spec: CommandSpec) -> None:
    for example in spec.example.split("·"):
        cmd = parse(example)
        assert cmd.name == spec.name, example
        assert parse_args(cmd.argv()) == cmd  # the Re-check button's round trip
    assert spec.usage.split()[0] == spec.name
    first = tokenize(spec.example.split("·")[0])
    for alias in spec.aliases:
        assert ALIASES[alias] == spec.name
        assert parse_args([alias, *first[1:]]) == parse_args(first)
    if spec.run is not None:
        assert parse(f"{spec.name} --help") == Command("help", target=spec.name)


@pytest.mark.parametrize("spec", SPECS, ids=_ids(SPECS))
def test_each_command_has_its_templates(spec: CommandSpec) -> None:
    assert (TEMPLATES / template_for(spec.name)).is_file()
    if spec.run is not None:  # help is answered in Slack only
        assert (TEMPLATES / template_name(spec.name)).is_file()


def test_each_diagnosis_has_a_scenario() -> None:
    have = {s.command for s in load_scenarios()}
    assert [s.name for s in DIAGNOSES if s.name not in have] == []


@pytest.mark.parametrize("spec", SPECS, ids=_ids(SPECS))
def test_parameters_fit_params_and_the_slack_command(spec: CommandSpec) -> None:
    params = {f.name for f in fields(Params)}
    command = {f.name for f in fields(Command)} - {"name"}
    dests = {p.dest for p in spec.params}
    for p in spec.params:
        for other in (p.same_as, p.excludes):
            assert other is None or other in dests, (spec.name, p.dest, other)
        if p.same_as is None:
            assert p.dest in params, (spec.name, p.dest)
            assert not p.slack or p.dest in command, (spec.name, p.dest)
        assert p.flags or not p.switch, (spec.name, p.dest)
    assert (spec.run is None) == (spec.module is None)


def test_what_commands_read_is_granted_by_the_rbac_rules() -> None:
    # test_deploy.py checks that deploy/base/rbac.yaml grants every kind in KINDS;
    # test_scenarios.py that every scenario reads only what its command declares.
    for spec in DIAGNOSES:
        assert spec.reads and spec.reads <= set(KINDS) | {"pods/log"}, spec.name


def _rule_alerts() -> list[dict[str, str]]:
    """Every alert the rules' promtool tests expect, with its labels and alertname."""
    tests = yaml.safe_load((RULES / "tests" / "gpubot-rules.test.yaml").read_text())["tests"]
    return [{**alert.get("exp_labels", {}), "alertname": case["alertname"]}
            for t in tests for case in t["alert_rule_test"]
            for alert in case.get("exp_alerts") or []]


def test_every_alert_of_the_rules_maps_to_a_command() -> None:
    doc = yaml.safe_load((RULES / "gpubot-rules.yaml").read_text())
    names = {r["alert"] for g in doc["spec"]["groups"] for r in g["rules"] if "alert" in r}
    for name in sorted(names):
        assert command_for({"alertname": name}) is not None, name
    fired = _rule_alerts()
    assert {a["alertname"] for a in fired} == names
    for labels in fired:
        cmd = command_for(labels)
        assert cmd is not None, labels
        assert parse(cmd.line()) == cmd, labels  # what the alert's thread runs and shows


def test_starting_the_cli_imports_no_handler() -> None:
    """--version and completion build the parser from the registry, not the handlers."""
    code = ("import json, sys; from bot import cli; cli.build_parser(); "
            "print(json.dumps(sorted(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, cwd=ROOT, timeout=60)
    loaded = set(json.loads(done.stdout))
    handlers = {f"handlers.{s.module}" for s in DIAGNOSES} | {"handlers.target", "jinja2"}
    assert sorted(handlers & loaded) == []
