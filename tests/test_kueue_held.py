"""A job Kueue holds is never "all clear", even when its Workload is not in the data."""

from __future__ import annotations

from pathlib import Path

import yaml

from bot.snapshot import load_snapshot
from handlers import why_pending
from handlers.view import Reader

SNAPSHOT = Path(__file__).parent / "scenarios" / "kueue-workload-not-admitted" / "cluster.yaml"


def test_suspended_kueue_job_without_its_workload(tmp_path: Path) -> None:
    doc = yaml.safe_load(SNAPSHOT.read_text())
    doc["items"] = [o for o in doc["items"] if o.get("kind") != "Workload"
                    and (o.get("involvedObject") or {}).get("kind") != "Workload"]
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(doc))
    d = why_pending.run(Reader(load_snapshot(path)), "job/llama-lora", "team-a")
    (f,) = [f for f in d.findings if f.code == "QUEUE_QUOTA_EXHAUSTED"]
    assert str(f.severity) == "warning"
    assert "no Workload found for it in team-a" in f.evidence
    assert "Job llama-lora: spec.suspend: true (Kueue releases it on admission)" in f.evidence
    assert "ALL_CLEAR" not in d.codes and "PENDING_NO_EVENTS" not in d.codes
