"""A channel restricted to some namespaces is never told about objects outside them:
not-found answers, Re-check and "not read" lines included (one test per command)."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.slack.scope import error_text, visible_problems
from bot.snapshot.model import LoadProblem
from handlers.errors import TargetNotFound
from tests.fake_slack.harness import BotHarness

ROOT = Path(__file__).resolve().parents[1]
CRASHLOOP = ROOT / "examples" / "plugin-crashloop-cuda-mismatch"  # train-0 is in ml-team
OTHER = "ml-team"


@pytest.fixture(scope="module")
def h(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BotHarness]:
    snap = tmp_path_factory.mktemp("snap") / "s"
    shutil.copytree(CRASHLOOP, snap)
    # An unreadable object in the other namespace: its "not read" line must not show.
    (snap / "broken.json").write_text(json.dumps({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "secret-project", "namespace": OTHER},
        "spec": {"containers": "abc"}}))
    with BotHarness(snap, channel_namespaces={"C0CHAN1": frozenset({"default"})}) as harness:
        yield harness


def answers(h: BotHarness, text: str) -> str:
    """Everything the channel and the asker are told for one command."""
    h.slack.clear()
    _, ack, _ = h.command(text)
    return _told(h, ack)


def _told(h: BotHarness, ack: Any) -> str:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        calls = h.slack.calls("response_url") + h.slack.calls("chat.postMessage")
        if calls and all(c.params.get("text") != "" for c in calls):
            time.sleep(0.3)  # the thread follows the card
            break
        time.sleep(0.05)
    calls = h.slack.calls()
    return json.dumps(ack) + json.dumps([c.params for c in calls])


@pytest.mark.parametrize("text", [
    "why-pending train-0",
    "why-pending default/train-0",
    "why-pending deployment/train-0",
    "why-pending statefulset/train -n default",
    "why-pending job/train-0",
])
def test_why_pending_not_found_names_no_other_namespace(h: BotHarness, text: str) -> None:
    told = answers(h, text)
    assert "not found" in told
    assert OTHER not in told


def test_doctor_not_found_names_no_other_namespace(h: BotHarness) -> None:
    told = answers(h, "doctor no-such-node")
    assert "not found" in told
    assert OTHER not in told


@pytest.mark.parametrize("text", ["pending", "pending -n default", "quota", "quota default"])
def test_pending_and_quota_name_no_other_namespace(h: BotHarness, text: str) -> None:
    told = answers(h, text)
    assert OTHER not in told
    assert "secret-project" not in told


def test_nodes_names_no_unreadable_object_of_another_namespace(h: BotHarness) -> None:
    told = answers(h, "nodes")
    assert "secret-project" not in told


def test_recheck_of_a_missing_target_names_no_other_namespace(h: BotHarness) -> None:
    h.slack.clear()
    value = json.dumps({"q": ["why-pending", "train-0", "-n", "default"], "c": []})
    _, ack, _ = h.action("gpubot_recheck", value, message_ts="1700000000.000001")
    told = _told(h, ack)
    assert "not found" in told
    assert OTHER not in told


def test_not_found_is_cut_to_the_namespaces_allowed() -> None:
    err = TargetNotFound("pod 'train-0' not found in namespace 'default'", ["train-1"],
                         ["ml-team/train-0", "research/train-0"])
    assert "ml-team/train-0" in error_text(err, None)
    cut = error_text(err, frozenset({"default", "research"}))
    assert "research/train-0" in cut and "ml-team" not in cut
    assert error_text(err, frozenset({"default"})).endswith("did you mean train-1?")


def test_not_read_lines_of_other_namespaces_are_left_out() -> None:
    problems = [LoadProblem("a.json", None, "Pod ml-team/x: spec: bad", namespace="ml-team"),
                LoadProblem("b.json", None, "empty file")]
    assert visible_problems(problems, frozenset({"default"})) == ["b.json: empty file"]
    assert len(visible_problems(problems, None)) == 2
