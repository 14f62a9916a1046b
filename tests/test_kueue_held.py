"""A job Kueue holds is never "all clear", even when its Workload is not in the data."""

from __future__ import annotations

from pathlib import Path

import yaml

from bot.snapshot import load_snapshot
from handlers import why_pending
from handlers.target import parse_target
from handlers.view import Reader

SNAPSHOT = Path(__file__).parent / "scenarios" / "kueue-workload-not-admitted" / "cluster.yaml"


def test_suspended_kueue_job_without_its_workload(tmp_path: Path) -> None:
    doc = yaml.safe_load(SNAPSHOT.read_text())
    doc["items"] = [o for o in doc["items"] if o.get("kind") != "Workload"
                    and (o.get("involvedObject") or {}).get("kind") != "Workload"]
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(doc))
    d = why_pending.run(Reader(load_snapshot(path)), parse_target("job/llama-lora", "team-a"))
    (f,) = [f for f in d.findings if f.code == "QUEUE_QUOTA_EXHAUSTED"]
    assert str(f.severity) == "warning"
    assert "no Workload found for it in team-a" in f.evidence
    assert "Job llama-lora: spec.suspend: true (Kueue releases it on admission)" in f.evidence
    assert "ALL_CLEAR" not in d.codes and "PENDING_NO_EVENTS" not in d.codes


def _variant(tmp_path: Path, lq_spec: dict[str, str], message: str) -> Reader:
    doc = yaml.safe_load(SNAPSHOT.read_text())
    for o in doc["items"]:
        if o.get("kind") == "LocalQueue":
            o["spec"].update(lq_spec)
        if o.get("kind") == "Workload" and o["metadata"]["name"] == "job-llama-lora-2614a":
            o["status"]["conditions"][0]["message"] = message
            o["status"]["conditions"][0]["reason"] = "Inadmissible"
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(doc))
    return Reader(load_snapshot(path))


def test_local_queue_stopped(tmp_path: Path) -> None:
    reader = _variant(tmp_path, {"stopPolicy": "Hold"}, "LocalQueue team-a-gpu is stopped")
    d = why_pending.run(reader, parse_target("job/llama-lora", "team-a"))
    (f,) = [f for f in d.findings if f.code == "QUEUE_QUOTA_EXHAUSTED"]
    assert "LocalQueue team-a-gpu" in f.summary and "stopped" in f.summary
    assert "kubectl -n team-a patch localqueue team-a-gpu" in "\n".join(f.fix.commands)
    assert "reason: LocalQueue team-a-gpu: spec.stopPolicy: Hold" in f.evidence


def test_cluster_queue_missing(tmp_path: Path) -> None:
    reader = _variant(tmp_path, {"clusterQueue": "gone-cq"}, "ClusterQueue gone-cq doesn't exist")
    d = why_pending.run(reader, parse_target("job/llama-lora", "team-a"))
    (f,) = [f for f in d.findings if f.code == "QUEUE_QUOTA_EXHAUSTED"]
    assert f.summary.startswith("Kueue cannot admit workload job-llama-lora-2614a: "
                                "ClusterQueue gone-cq does not exist")
    assert "localqueue team-a-gpu" in "\n".join(f.fix.commands)


def test_untolerated_flavor_shows_the_flavor_and_the_toleration() -> None:
    path = SNAPSHOT.parents[1] / "kueue-no-flavor-fits-taint" / "cluster.yaml"
    d = why_pending.run(Reader(load_snapshot(path)), parse_target("job/llama-eval", "research"))
    (f,) = [f for f in d.findings if f.code == "QUEUE_QUOTA_EXHAUSTED"]
    assert ("ResourceFlavor h100-80gb: nodeLabels cloud.google.com/gke-accelerator="
            "nvidia-h100-80gb; nodeTaints nvidia.com/gpu=present:NoSchedule") in f.evidence
    assert f.fix.patch is not None and f.fix.patch.content == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
