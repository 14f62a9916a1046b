"""Every code of the spec's four diagnosis sections is proven by at least one scenario."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from handlers.codes import CODES, Section
from tests.scenarios import load_scenarios

SPEC = Path(__file__).resolve().parents[2] / "shared" / "spec" / "finding-codes.md"
COVERED_SECTIONS = (Section.CHAIN, Section.POD_SPEC, Section.SCHEDULING, Section.QUOTA)


def test_every_code_has_a_scenario() -> None:
    expected = {c for s in load_scenarios() for c in s.expect}
    needed = {code for code, (sec, _) in CODES.items() if sec in COVERED_SECTIONS}
    assert sorted(needed - expected) == []


def test_catalogue_matches_spec() -> None:
    if not SPEC.exists():
        pytest.skip(f"{SPEC} not present")
    spec_codes = set(re.findall(r"^\| `([A-Z_]+)` \|", SPEC.read_text(), re.MULTILINE))
    assert spec_codes <= set(CODES), sorted(spec_codes - set(CODES))
