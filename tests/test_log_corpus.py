"""Every line of the public corpus (tests/data/log_corpus.yaml) is classified as it proves."""

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from handlers.codes import CODES
from handlers.knowledge import logs

CORPUS: list[dict[str, Any]] = yaml.safe_load(
    (Path(__file__).parent / "data" / "log_corpus.yaml").read_text(encoding="utf-8"))["lines"]
MIN_LINES = 200


def _expected(entry: dict[str, Any]) -> tuple[str, ...]:
    proves = entry["proves"]
    return () if proves == "none" else tuple(proves)


def test_corpus_is_large_sourced_and_well_formed() -> None:
    assert len(CORPUS) >= MIN_LINES
    assert len({e["line"] for e in CORPUS}) == len(CORPUS)
    for e in CORPUS:
        assert e["source"].startswith("https://"), e
        assert set(_expected(e)) <= set(CODES), e
    # Both sides are represented: lines that prove a failure and lines that must not.
    assert sum(1 for e in CORPUS if not _expected(e)) >= 40
    assert len(Counter(c for e in CORPUS for c in _expected(e))) >= 8


@pytest.mark.parametrize("entry", CORPUS, ids=lambda e: e["line"][:60])
def test_corpus_line(entry: dict[str, Any]) -> None:
    assert logs.builtin().codes_of(entry["line"]) == _expected(entry)
