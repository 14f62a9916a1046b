"""Block Kit rendering: every message parses with slack_sdk's block models and keeps to
Block Kit's limits; cluster text is shown literally (never a mention, link or formatting);
golden files for every bundled example."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.runbook import Runbooks
from bot.slack.blocks import (
    HEADER_TEXT,
    MAX_BLOCKS,
    SECTION_TEXT,
    Changes,
    Renderer,
    cut_mrkdwn,
    fit,
    validate,
)
from bot.slack.commands import parse, run
from bot.snapshot import load_snapshot
from handlers.finish import finish
from handlers.model import Diagnosis, Finding, Fix, NodeVerdict, ObjectRef, Patch, Severity
from handlers.view import Reader
from tests.findings import finding_at

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden" / "slack"
UPDATE = os.environ.get("GPUBOT_UPDATE_GOLDEN") == "1"
R = Renderer()

NASTY = "<!channel> <@U123> <#C1|x> *bold* _it_ ~st~ `tick` ```fence``` & \"q\" \\ :fire: <http://e.vil|click>"


def all_texts(blocks: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(type, text) of every text object anywhere in the blocks."""
    out: list[tuple[str, str]] = []

    def walk(x: Any) -> None:
        if isinstance(x, dict):
            if x.get("type") in ("mrkdwn", "plain_text") and isinstance(x.get("text"), str):
                out.append((x["type"], x["text"]))
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(blocks)
    return out


def strip_code(mrkdwn: str) -> str:
    """mrkdwn without its code blocks and code spans (where formatting is inert)."""
    s = re.sub(r"```.*?```", "", mrkdwn, flags=re.S)
    return re.sub(r"`[^`\n]*`", "", s)


LINKED = Renderer(runbooks=Runbooks("https://wiki.example.com/gpu/"))
OUR_LINKS = re.compile("<" + re.escape("https://wiki.example.com/gpu/") + r"[A-Z_]+\.md"
                       + r"\|Runbook>")


def nasty_diagnosis() -> Diagnosis:
    d = Diagnosis("why-pending", f"pod/ml-team/{NASTY}")
    d.add(finding_at(
        "GPU_UNHEALTHY", Severity.CRITICAL, f"plugin pod {NASTY} crashes",
        (ObjectRef("Pod", NASTY, "ml-team"), ObjectRef("Node", "gpu-node-7")),
        (f"log: {NASTY}", "line with ``` in it", "ends with a backtick`"),
        Fix(f"restart it {NASTY}", (f"kubectl delete pod '{NASTY}'", f"second line {NASTY}"),
            Patch("Pod", NASTY, "spec", {"nodeSelector": {"k": NASTY}}, "ml-team"),
            ("https://example.com/docs",)),
        (("restart-device-plugin", "gpu-node-7"), ("restart-device-plugin", NASTY)),
    ))
    d.add(finding_at("INSUFFICIENT_GPU", Severity.WARNING, NASTY, evidence=(NASTY,),
                     fix=Fix(NASTY, (NASTY,))))
    d.nodes = [NodeVerdict(NASTY, False, [f"taint: {NASTY}"], 0, 8),
               NodeVerdict("gpu-node-7", True, [], 8, 8)]
    d.details["events"] = [f"Warning FailedScheduling: {NASTY}"]
    d.details["pod"] = NASTY
    d.unchecked.append(f"not read: {NASTY}")
    d.withheld.append(f"DEVICE_PLUGIN_MISSING not said about {NASTY}: {NASTY}")
    return finish(d)


def test_cluster_text_is_shown_literally_never_as_mention_link_or_formatting() -> None:
    r = LINKED.render(nasty_diagnosis(), argv=["why-pending", NASTY],
                      source=f"snapshot {NASTY}", requester="U0USER1")
    for m in r.messages:
        validate(m.blocks)
        raw = json.dumps(m.blocks)
        assert json.loads(raw) == m.blocks
        for kind, text in all_texts(m.blocks):
            # the only links are the runbook pages we put there
            text = OUR_LINKS.sub("", text)
            # the only unescaped angle brackets are the requester mention we put there
            assert "<!channel>" not in text and "<@U123>" not in text
            assert "<http" not in text and "<#C1" not in text
            if kind == "mrkdwn":
                bare = strip_code(text)
                assert "*bold*" not in bare and "_it_" not in bare and "~st~" not in bare
                assert bare.count("```") == 0
                assert text.count("```") % 2 == 0  # every fence closed: nothing leaks out
        assert "&lt;!channel&gt;" in raw
    assert "&lt;!channel&gt;" in r.card.text and "<!channel>" not in r.card.text
    # Button values carry the exact text (they are data, never shown).
    buttons = [e for b in r.card.blocks if b["type"] == "actions" for e in b["elements"]]
    values = [json.loads(b["value"]) for b in buttons]
    assert values[0]["q"] == ["why-pending", NASTY]
    assert {"restart-device-plugin"} == {v["a"] for v in values[1:]}
    assert all(len(b["text"]["text"]) <= 75 for b in buttons)


def test_a_user_id_that_is_not_one_is_not_written_as_a_mention() -> None:
    r = R.render(nasty_diagnosis(), argv=["x"], requester="<!channel>")
    assert "asked by" not in json.dumps(r.card.blocks)


def huge_diagnosis(n: int = 120) -> Diagnosis:
    d = Diagnosis("why-pending", "pod/ml-team/train-0")
    for i in range(n):
        d.add(Finding("INSUFFICIENT_GPU", f"finding {i} " + "x" * 400,
                      (ObjectRef("Node", f"node-{i}"),),
                      tuple(f"evidence line {j} " + "y" * 300 for j in range(40)),
                      Fix(f"fix {i} " + "s" * 400,
                          tuple(f"kubectl fix {i} {j} " + "z" * 200 for j in range(30)))))
    d.nodes = [NodeVerdict(f"node-{i}", False, ["NodeResourcesFit: " + "w" * 200], 0, 8)
               for i in range(500)]
    d.details["events"] = [f"event {i} " + "e" * 250 for i in range(200)]
    d.unchecked = [f"unchecked {i}" for i in range(100)]
    d.details.update(pod="train-0", requests="nvidia.com/gpu=8")
    return finish(d)


def test_output_beyond_block_kit_limits_is_cut_with_and_n_more_and_flagged() -> None:
    r = R.render(huge_diagnosis(), argv=["why-pending", "ml-team/train-0"], source="s")
    assert r.truncated
    joined = json.dumps([m.blocks for m in r.messages])
    assert "... and 102 more findings" in joined
    assert "... and 460 more nodes" in joined
    assert "more lines" in joined
    for m in r.messages:
        validate(m.blocks)
        assert len(m.blocks) <= MAX_BLOCKS
        for b in m.blocks:
            if b["type"] == "section":
                assert len(b["text"]["text"]) <= SECTION_TEXT


def test_fit_cuts_sections_blocks_headers_and_buttons() -> None:
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": "h" * 400}},
        {"type": "section", "text": {"type": "mrkdwn",
                                     "text": "*x*\n```\n" + "a &amp; b\n" * 600 + "```"}},
        {"type": "actions", "elements": [
            {"type": "button", "action_id": f"a{i}", "value": "v",
             "text": {"type": "plain_text", "text": "b" * 200}} for i in range(30)]},
    ] + [{"type": "divider"} for _ in range(60)]
    out, cut = fit(blocks)
    assert cut and len(out) == MAX_BLOCKS
    assert len(out[0]["text"]["text"]) == HEADER_TEXT
    section = out[1]["text"]["text"]
    assert len(section) <= SECTION_TEXT and section.count("```") % 2 == 0
    assert "the full report is attached" in section
    assert len(out[2]["elements"]) == 25
    assert all(len(e["text"]["text"]) <= 75 for e in out[2]["elements"])
    assert "more blocks" in json.dumps(out[-1])
    validate(out)


def test_cut_mrkdwn_never_splits_an_entity() -> None:
    text = "x" * 95 + "&amp;" * 20
    for limit in range(60, 100):
        cut = cut_mrkdwn(text, limit, note="…")
        assert not re.search(r"&[a-z]*$", cut.split("\n")[0])


@pytest.mark.parametrize("changes, expected", [
    (Changes(["NEW_CODE"], ["OLD_CODE"], "U0USER1"),
     "Re-checked by <@U0USER1>: resolved `OLD_CODE`; new `NEW_CODE`"),
    (Changes([], [], "U0USER1"), "Re-checked by <@U0USER1>: no change."),
    (Changes([], [], None, known=False), "the previous card did not record its findings"),
])
def test_recheck_card_says_what_changed(changes: Changes, expected: str) -> None:
    r = R.render(huge_diagnosis(2), argv=["why-pending", "x"], changes=changes)
    assert expected in json.dumps(r.card.blocks)
    validate(r.card.blocks)


# -- every scenario renders, every example has a golden -----------------------------------------


def scenarios() -> list[Path]:
    return sorted(p.parent for p in (ROOT / "tests" / "scenarios").glob("*/scenario.yaml"))


def command_line(spec: dict[str, Any]) -> str:
    cmd = spec.get("command", "why-pending")
    parts = [cmd]
    if cmd == "why-pending" or (cmd == "doctor" and spec.get("target")):
        parts.append(str(spec["target"]))
    elif cmd in ("pending", "quota") and spec.get("namespace"):
        parts += ["-n", str(spec["namespace"])]
    if cmd == "why-pending" and spec.get("namespace"):
        parts += ["-n", str(spec["namespace"])]
    return " ".join(parts)


def render_scenario(path: Path) -> tuple[str, Any]:
    spec = yaml.safe_load((path / "scenario.yaml").read_text())
    cmd = parse(command_line(spec))
    view = load_snapshot(str((path / spec.get("snapshot", "cluster.yaml")).resolve()))
    diag = run(Reader(view), cmd)
    source = f"snapshot {path.name}"
    return command_line(spec), R.render(diag, argv=cmd.argv(), source=source,
                                        requester="U0USER1")


@pytest.mark.parametrize("path", scenarios(), ids=lambda p: p.name)
def test_every_scenario_renders_valid_block_kit(path: Path) -> None:
    _, r = render_scenario(path)
    for m in r.messages:
        validate(m.blocks)
        assert m.text


def example_scenarios() -> list[Path]:
    return [p for p in scenarios() if p.name.startswith("example_")]


def test_every_bundled_example_has_a_golden_scenario() -> None:
    examples = {p.name for p in (ROOT / "examples").iterdir() if p.is_dir()}
    covered = set()
    for p in example_scenarios():
        spec = yaml.safe_load((p / "scenario.yaml").read_text())
        covered.add(Path(spec["snapshot"]).name)
    assert examples <= covered


@pytest.mark.parametrize("path", example_scenarios(), ids=lambda p: p.name)
def test_golden_messages_for_the_bundled_examples(path: Path) -> None:
    line, r = render_scenario(path)
    got = {"command": f"/gpu {line}", "truncated": r.truncated,
           "messages": [{"part": m.part, "text": m.text, "blocks": m.blocks}
                        for m in r.messages]}
    golden = GOLDEN / f"{path.name.removeprefix('example_')}.json"
    text = json.dumps(got, indent=2, ensure_ascii=False) + "\n"
    if UPDATE or not golden.exists():
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text)
        if not UPDATE:
            pytest.fail(f"wrote missing golden {golden.name}: check it and commit it")
    assert text == golden.read_text(), (
        f"{golden.name} changed: GPUBOT_UPDATE_GOLDEN=1 pytest {__file__} to accept")
