"""`gpubot nodes` leads with the GPUs lost (the GPU ledger, handlers/ledger.py) in text, JSON
and the Slack card, names the nodes, and its header is never green while any GPU is lost."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from bot.cli import main
from bot.slack.blocks import SEVERITY_ICON, Renderer
from bot.slack.commands import parse, run
from bot.snapshot import load_snapshot
from handlers.model import Diagnosis, Severity
from handlers.view import Reader
from tests.scenarios import load_scenarios

ROOT = Path(__file__).resolve().parents[1]
CRASHLOOP = ROOT / "examples" / "plugin-crashloop-cuda-mismatch"
LOST_NODE = "ip-10-18-1-2.ec2.internal"
NODES_SCENARIOS = [s for s in load_scenarios() if s.command == "nodes"]


def cli(*argv: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    assert main(["nodes", "--snapshot", str(CRASHLOOP), *argv], out=out, err=err,
                environ={}) == 0, err.getvalue()
    return out.getvalue()


def diagnose(snapshot: Path) -> Diagnosis:
    return run(Reader(load_snapshot(str(snapshot))), parse("nodes"))


def test_text_leads_with_the_lost_gpus_and_names_the_node() -> None:
    lines = [ln for ln in cli().splitlines() if ln.strip()]
    assert lines[1].startswith(f"8 GPUs lost on 1 node: {LOST_NODE}")
    assert lines[2].split()[:3] == ["ROOT", "CAUSE", "CUDA_DRIVER_MISMATCH:"]
    row = next(ln.split() for ln in lines if ln.startswith(LOST_NODE))
    # NODE MODEL HAS CAP ALLOC USED FREE LOST
    assert row[2:8] == ["8", "0", "0", "0", "0", "8"]


def test_json_carries_physical_lost_and_source_per_node_and_in_totals() -> None:
    doc: dict[str, Any] = json.loads(cli("-o", "json"))
    totals = doc["details"]["totals"]
    assert (totals["physical"], totals["lost"], totals["lost_nodes"]) == (16, 8, 1)
    rows = {r["node"]: r for r in doc["details"]["rows"]}
    lost = rows[LOST_NODE]
    assert (lost["physical"], lost["lost"], lost["source"], lost["unhealthy"]) == (8, 8, "gfd", 0)
    assert "nvidia.com/gpu.count=8" in lost["evidence"]
    assert rows["ip-10-18-1-1.ec2.internal"]["lost"] == 0
    (finding,) = [f for f in doc["findings"] if f["code"] == "GPU_CAPACITY_LOST"]
    assert [(o["kind"], o["name"]) for o in finding["objects"]] == [("Node", LOST_NODE)]
    assert set(finding["caused_by"]) >= {"DEVICE_PLUGIN_CRASHLOOP", "GPU_NOT_ADVERTISED"}
    assert doc["root_cause"]["code"] == "CUDA_DRIVER_MISMATCH"
    a100 = next(m for m in doc["details"]["models"] if "A100" in m["product"])
    assert (a100["physical"], a100["lost"]) == (16, 8)


def test_the_slack_card_leads_with_the_lost_gpus() -> None:
    diag = diagnose(CRASHLOOP)
    card = Renderer().render(diag, argv=["nodes"], source="snap").messages[0]
    assert card.part == "card" and card.text.startswith("nodes: 8 GPUs lost on 1 node")
    header, lead = card.blocks[0], card.blocks[1]
    assert header["text"]["text"].startswith(SEVERITY_ICON["critical"])
    assert LOST_NODE in lead["text"]["text"] and "8 GPUs lost" in lead["text"]["text"]


@pytest.mark.parametrize("s", NODES_SCENARIOS, ids=[s.name for s in NODES_SCENARIOS])
def test_never_green_while_gpus_are_lost(s: Any) -> None:
    diag = diagnose(s.snapshot)
    lost = diag.details["totals"]["lost"]
    findings = [f for f in diag.findings if f.code == "GPU_CAPACITY_LOST"]
    if not lost:
        assert not findings
        return
    (finding,) = findings
    assert finding.severity.rank <= Severity.WARNING.rank
    assert diag.findings[0].severity.rank <= Severity.WARNING.rank  # the header's colour
    lost_rows = [r for r in diag.details["rows"] if r["lost"]]
    assert {o.name for o in finding.objects} == {r["node"] for r in lost_rows}
    assert sum(r["lost"] for r in lost_rows) == lost
    header = Renderer().render(diag, argv=["nodes"]).messages[0].blocks[0]["text"]["text"]
    assert not header.startswith(SEVERITY_ICON["ok"])


def test_a_cluster_without_lost_gpus_reports_none() -> None:
    diag = diagnose(ROOT / "examples" / "gpu-fragmentation")
    assert diag.details["totals"]["lost"] == 0
    assert "GPU_CAPACITY_LOST" not in diag.codes
