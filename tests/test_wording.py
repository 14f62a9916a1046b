"""Wording every scenario's answer shares, in the CLI's text and in Slack: counts agree with
their nouns ("1 GPU", "2 pods", never "1 GPUs" or "pod(s)"), and a Slack card points nowhere
"above" or "below" (nothing is above a card, and its proof is in the thread)."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from bot.render import render_text
from bot.slack.blocks import Rendered
from bot.snapshot import load_snapshot
from handlers.view import ViewError
from handlers.words import counted, plural
from tests.scenarios import Scenario, load_scenarios
from tests.test_scenarios import run_on
from tests.test_slack_blocks import all_texts, render_scenario, scenarios

SCENARIOS = {s.name: s for s in load_scenarios()}
NOUNS = ("GPU", "pod", "node", "workload", "member", "target", "check", "problem", "finding",
         "line", "device", "namespace", "pool", "incident", "entry", "holder", "term", "quota",
         "fix", "row", "alert", "claim", "slice", "container", "replica", "job")
# "1 GPUs", "1 more nodes", "1 free GPUs", "1 GPU nodes": a count of one with a plural noun.
ONE_PLURAL = re.compile(r"(?<![\d.,/:x-])1 (?:(?:more|free|pending|open|waiting|physical|GPU) )"
                        r"{0,2}(?:" + "|".join(re.escape(plural(n)) for n in NOUNS) + r")\b")
MAYBE_PLURAL = re.compile(r"[A-Za-z]+\(s\)")

# "above"/"below" as a place; "above 100000" compares numbers.
POINTER = re.compile(r"\b(above|below)\b(?!\s+[\d.]+)", re.IGNORECASE)


@cache
def slack(path: Path) -> Rendered:
    return render_scenario(path)[1]


@pytest.mark.parametrize("path", scenarios(), ids=lambda p: p.name)
def test_a_card_points_at_nothing_above_or_below(path: Path) -> None:
    card = slack(path).messages[0]
    for _, text in all_texts(card.blocks):
        assert not POINTER.search(text), text


@cache
def cli(name: str) -> str:
    s = SCENARIOS[name]
    return render_text(run_on(s, load_snapshot(s.snapshot)), source=f"snapshot {s.name}")


def quoted(s: Scenario, text: str, at: int) -> bool:
    """Whether the words around ``at`` are quoted from the cluster (the scheduler's own
    "2 node(s) didn't match", say): the word before, this one and the next, found in the
    snapshot's files."""
    words = text[:at].split()[-1:] + text[at:].split()[:2]
    phrase = " ".join(words).strip(".,;:)")
    return phrase in _snapshot_text(s.snapshot)


@cache
def _snapshot_text(path: Path) -> str:
    """Every string in the snapshot's objects, one a line."""
    view = load_snapshot(path)
    out: list[str] = []

    def walk(x: Any) -> None:
        if isinstance(x, str):
            out.append(x)
        elif isinstance(x, dict):
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    for kind in sorted(view.kinds):
        try:
            walk(view.list(kind))
        except ViewError:  # a kind snapshots do not serve
            continue
    return "\n".join(out)


def test_counted_words_counts() -> None:
    assert [counted(1, "GPU"), counted(2, "GPU"), counted(8.0, "GPU"), counted(0, "pod"),
            counted(0.5, "GPU"), counted(1, "more node"), counted(3, "GPU quota entry"),
            counted(2, "fix"), counted(2, "policy")] == [
        "1 GPU", "2 GPUs", "8 GPUs", "0 pods", "0.5 GPUs", "1 more node", "3 GPU quota entries",
        "2 fixes", "2 policies"]


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_counts_agree_with_their_nouns(name: str) -> None:
    s = SCENARIOS[name]
    texts = [("cli", cli(name))]
    texts += [("slack", text) for m in slack(s.path).messages for _, text in all_texts(m.blocks)]
    for where, text in texts:
        assert not ONE_PLURAL.search(text), (where, ONE_PLURAL.search(text))
        for m in MAYBE_PLURAL.finditer(text):
            assert quoted(s, text, m.start()), (where, text[max(0, m.start() - 80):m.end() + 40])
