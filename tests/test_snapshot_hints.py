"""A kind a snapshot lacks reads as "not checked" with a hint that fits what made the snapshot:
a `kubectl get` file is not told what `cluster-info dump` leaves out, a dump is, and a
`gpubot snapshot` (which collects every kind it reads, or names it as refused) is told to be
taken again."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from bot.cli import main
from bot.snapshot import SnapshotView, load_snapshot
from handlers.view import ViewError

ROOT = Path(__file__).resolve().parents[1]
KUBECTL_GET = ROOT / "tests" / "scenarios" / "taint-not-tolerated" / "cluster.yaml"
DUMP = ROOT / "examples" / "quota-exceeded"  # a cluster-info dump and an extra.yaml


def missing(view: SnapshotView, kind: str) -> str:
    with pytest.raises(ViewError) as err:
        view.list(kind)
    return str(err.value)


def test_a_kubectl_get_snapshot_is_told_the_command_not_the_dump() -> None:
    said = missing(load_snapshot(KUBECTL_GET), "ResourceQuota")
    assert "cluster-info dump" not in said
    assert "kubectl get resourcequotas -A -o yaml" in said


def test_a_cluster_info_dump_is_told_what_the_dump_leaves_out() -> None:
    view = load_snapshot(DUMP)
    assert view.from_dump
    said = missing(view, "LimitRange")
    assert "cluster-info dump leaves limitranges out" in said
    assert "kubectl get limitranges -A -o yaml" in said


def test_a_gpubot_snapshot_is_told_to_be_taken_again(tmp_path: Path) -> None:
    err = io.StringIO()
    code = main(["snapshot", "--snapshot", str(DUMP), "-o", str(tmp_path / "snap")],
                out=io.StringIO(), err=err)
    assert code == 0, err.getvalue()
    (tmp_path / "snap" / "resourcequotas.json").unlink()
    view = load_snapshot(tmp_path / "snap")
    assert view.manifest is not None and view.from_dump  # typed lists, but gpubot's own
    said = missing(view, "ResourceQuota")
    assert "cluster-info dump" not in said and "kubectl get" not in said
    assert "gpubot snapshot collects resourcequotas" in said


def test_not_checked_in_the_cli_carries_the_hint() -> None:
    out = io.StringIO()
    code = main(["why-pending", "--snapshot", str(KUBECTL_GET), "-n", "cv-team",
                 "deployment/segformer"], out=out, err=io.StringIO(), environ={})
    assert code == 0
    unchecked = out.getvalue().split("Not checked:", 1)[1]
    assert "ResourceQuota: not in the snapshot; add them: kubectl get resourcequotas" in unchecked
    assert "cluster-info dump" not in unchecked
