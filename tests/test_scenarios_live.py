"""Every scenario again, live: the fake API server serves the scenario's snapshot over real
HTTP, the real kubernetes client reads it, and the findings must equal the snapshot's."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.live import open_live_view
from bot.snapshot import load_snapshot
from bot.snapshot.view import MUST_BE_CAPTURED
from handlers.model import Diagnosis
from handlers.view import ClusterView
from tests.fake_kube import FakeKube
from tests.scenarios import Scenario, load_scenarios
from tests.test_scenarios import assert_root_and_fits, run_on

SCENARIOS = load_scenarios()


def _key(d: Diagnosis) -> list[tuple[str, str, tuple[str, ...], tuple[str, ...]]]:
    return [(f.code, str(f.severity), tuple(map(str, f.objects)), f.evidence)
            for f in d.findings]


@pytest.mark.parametrize("s", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_live_mode_gives_the_snapshot_findings(s: Scenario, tmp_path: Path) -> None:
    snap = load_snapshot(s.snapshot)
    expected = run_on(s, snap)
    # Kinds the snapshot did not capture are unknown, not empty: the fake itself hides them
    # as a cluster would from a service account without the right to read them.
    with FakeKube(s.snapshot) as fk:
        assert sorted(fk.uncaptured) == sorted(
            plural for kind, plural in MUST_BE_CAPTURED.items() if kind not in snap.kinds)
        live: ClusterView = open_live_view(str(fk.write_kubeconfig(tmp_path / "kubeconfig")),
                                           timeout=5)
        got = run_on(s, live)
    assert [f.code for f in got.findings] == [f.code for f in expected.findings]
    assert _key(got) == _key(expected)
    assert [n.to_json() for n in got.nodes] == [n.to_json() for n in expected.nodes]
    assert_root_and_fits(s, got)
    assert got.fits_if == expected.fits_if
