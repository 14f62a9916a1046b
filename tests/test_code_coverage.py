"""Every code of the spec's four diagnosis sections is proven by at least one scenario."""

from __future__ import annotations

import re
from pathlib import Path

from handlers.codes import CODES, Section
from tests.scenarios import load_scenarios

# The spec lives beside the repository (../shared); CI's checkout may come without it, so the
# tests keep a copy, and check that it still equals the spec wherever the spec is present.
SHARED_SPEC = Path(__file__).resolve().parents[2] / "shared" / "spec" / "finding-codes.md"
SPEC_COPY = Path(__file__).resolve().parent / "data" / "spec" / "finding-codes.md"
COVERED_SECTIONS = (Section.CHAIN, Section.POD_SPEC, Section.SCHEDULING, Section.QUOTA)


def test_every_code_has_a_scenario() -> None:
    expected = {c for s in load_scenarios() for c in s.expect}
    needed = {code for code, c in CODES.items() if c.section in COVERED_SECTIONS}
    assert sorted(needed - expected) == []


def test_the_spec_copy_is_the_spec() -> None:
    if SHARED_SPEC.exists():  # else the copy stands in for it
        assert SPEC_COPY.read_text() == SHARED_SPEC.read_text(), (
            f"copy {SHARED_SPEC} to {SPEC_COPY}")


def test_catalogue_matches_spec() -> None:
    spec_codes = set(re.findall(r"^\| `([A-Z_]+)` \|", SPEC_COPY.read_text(), re.MULTILINE))
    assert spec_codes <= set(CODES), sorted(spec_codes - set(CODES))
