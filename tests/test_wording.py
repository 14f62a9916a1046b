"""Wording every scenario's answer shares: a Slack card points nowhere "above" or "below"
(nothing is above a card, and its proof is in the thread)."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

from bot.slack.blocks import Rendered
from tests.test_slack_blocks import all_texts, render_scenario, scenarios

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
