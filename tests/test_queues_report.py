"""`pending` and `quota` show the queues' GPU usage beside namespace quotas."""

from __future__ import annotations

import json
from pathlib import Path

from bot.slack.blocks import Renderer, validate
from bot.snapshot import load_snapshot
from handlers import pending_all, quota
from handlers.view import Reader

SCENARIOS = Path(__file__).parent / "scenarios"


def _reader(name: str) -> Reader:
    return Reader(load_snapshot(SCENARIOS / name / "cluster.yaml"))


def test_pending_lists_a_suspended_pytorchjob_and_its_queue() -> None:
    d = pending_all.run(_reader("kueue-pytorchjob-cohort-exhausted"), "research")
    assert [(r["workload"], r["code"]) for r in d.details["rows"]] == [
        ("pytorchjob/bert-ddp", "QUEUE_QUOTA_EXHAUSTED")]
    assert [(q["system"], q["queue"], q["flavor"], q["used"], q["limit"], q["cohort"],
             q["namespaces"]) for q in d.details["queues"]] == [
        ("kueue", "research-cq", "h100-80gb", 4.0, 4.0, "gpu-pool", ["research"])]


def test_pending_lists_a_suspended_jobset() -> None:
    d = pending_all.run(_reader("kueue-jobset-exceeds-max-capacity"))
    assert [(r["workload"], r["code"]) for r in d.details["rows"]] == [
        ("jobset/llama-405b-ft", "QUEUE_QUOTA_EXHAUSTED")]


def test_quota_shows_volcano_queues_and_no_kueue_noise() -> None:
    d = quota.run(_reader("volcano-queue-capability-used"))
    assert [(q["system"], q["queue"], q["used"], q["limit"], q["limit_kind"])
            for q in d.details["queues"]] == [
        ("volcano", "default", None, 16.0, "capability"),
        ("volcano", "ml", 8.0, 8.0, "capability")]
    assert not any("ClusterQueue" in u or "LocalQueue" in u for u in d.unchecked)


def test_no_queue_section_without_queues() -> None:
    d = quota.run(_reader("dra-all-devices-allocated"))
    assert d.details["queues"] == []
    assert not any("Queue" in u for u in d.unchecked)


def test_slack_quota_message_lists_the_queues() -> None:
    d = quota.run(_reader("volcano-queue-capability-used"))
    out = Renderer().render(d, argv=["quota"], source="snapshot", requester="U0USER1")
    texts = []
    for m in out.messages:
        validate(m.blocks)
        texts += [json.dumps(b) for b in m.blocks]
    assert any("*Queues*" in t and "volcano ml nvidia.com/gpu: 8 used of 8 (capability)" in t
               for t in texts)
