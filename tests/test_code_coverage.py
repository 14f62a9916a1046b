"""The spec's catalogue of finding codes: the tests' copy is the spec, and every code of it
has a card (that every card has a scenario is tests/test_cards.py's)."""

from __future__ import annotations

import re
from pathlib import Path

from handlers.codes import CODES

# The spec lives beside the repository (../shared); CI's checkout may come without it, so the
# tests keep a copy, and check that it still equals the spec wherever the spec is present.
SHARED_SPEC = Path(__file__).resolve().parents[2] / "shared" / "spec" / "finding-codes.md"
SPEC_COPY = Path(__file__).resolve().parent / "data" / "spec" / "finding-codes.md"


def test_the_spec_copy_is_the_spec() -> None:
    if SHARED_SPEC.exists():  # else the copy stands in for it
        assert SPEC_COPY.read_text() == SHARED_SPEC.read_text(), (
            f"copy {SHARED_SPEC} to {SPEC_COPY}")


def test_catalogue_matches_spec() -> None:
    spec_codes = set(re.findall(r"^\| `([A-Z_]+)` \|", SPEC_COPY.read_text(), re.MULTILINE))
    assert spec_codes <= set(CODES), sorted(spec_codes - set(CODES))
