"""``/gpu sentinel`` through the Slack app: the open incidents the channel may see (with a
link to each card's thread), the detectors' settings, and why the sentinel is off."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from bot.sentinel.incidents import Incident, IncidentBook
from bot.sentinel.service import Sentinel
from bot.sentinel.watcher import Watcher
from bot.slack.blocks import validate
from bot.store import open_store
from tests.fake_prometheus import FakeMetrics
from tests.fake_slack.harness import BotHarness
from tests.test_sentinel import T0, Clock, Objects, gpu_node, pending_pod

TS = "1700000000.000100"


class Cards:
    """A publisher that says each card is in C0CARDS at TS."""

    def publish(self, inc: Incident, now: float) -> Mapping[str, Any] | None:
        return {"channel": "C0CARDS", "ts": TS}


def texts(body: dict[str, Any]) -> str:
    validate(body["blocks"])
    return json.dumps(body["blocks"], ensure_ascii=False)


def running_sentinel(tmp_path: Path, metrics: Any = None) -> Sentinel:
    """Open incidents: 8 GPUs lost in pool a100; pods pending in ml and in research."""
    view, clock = Objects(), Clock(T0)
    view.put(gpu_node("a-0", alloc=0))
    view.put(pending_pod("train-0"))
    research = pending_pod("big-0", job="big", gpus=4)
    research["metadata"]["namespace"] = "research"
    view.put(research)
    s = Sentinel(Watcher(view, clock=clock, metrics=metrics),  # type: ignore[arg-type]
                 IncidentBook(open_store("sqlite", path=str(tmp_path / "s.db"))), Cards(),
                 {"lost_after": 60.0, "pending_after": 60.0}, clock=clock, poll_every=120.0)
    s.tick()
    clock.t += 61
    s.tick()
    assert len(s.open_now) == 3
    return s


@pytest.fixture
def h(tmp_path: Path) -> Iterator[BotHarness]:
    with BotHarness(channel_namespaces={"C0CHAN1": frozenset({"ml"}),
                                        "C0OPS": frozenset({"*"})},
                    sentinel_channel="C0CARDS") as harness:
        yield harness


def test_help_lists_it(h: BotHarness) -> None:
    _, body, _ = h.command("help")
    assert "/gpu sentinel" in texts(body)


def test_off_says_why_and_how_to_turn_it_on(tmp_path: Path) -> None:
    with BotHarness(sentinel=False) as h:
        _, body, _ = h.command("sentinel")
        assert body["response_type"] == "ephemeral"
        text = texts(body)
        assert "Sentinel off" in text and "GPUBOT_SENTINEL=false" in text
    with BotHarness() as h:  # on, but nowhere to post cards
        text = texts(h.command("sentinel")[1])
        assert "GPUBOT_SENTINEL_CHANNEL" in text


def test_everything_where_every_namespace_may_be_queried(h: BotHarness,
                                                         tmp_path: Path) -> None:
    assert h.bot is not None
    h.bot.sentinel = running_sentinel(tmp_path)
    h.bot.poster.workspace = None  # not known yet: the answer names the channel, asks Slack
    _, body, _ = h.command("incidents", channel="C0OPS", channel_name="gpu-ops")
    text = texts(body)
    assert "3 open incidents" in text
    assert text.index("pool a100") < text.index("research/Job big")  # most GPUs first
    assert "ml/Job train" in text and "8 GPUs now" in text
    assert "card in <#C0CARDS>" in text  # the workspace's address is not known yet
    # Settings: every detector with its threshold; the metric ones off without Prometheus.
    assert "`lost_after` 1m" in text and "`pending_after` 1m" in text
    assert "`gpu-xid`" in text and "no Prometheus (GPUBOT_PROMETHEUS_URL)" in text
    assert "this replica posts the cards" in text and "Cards* in <#C0CARDS>" in text
    # Once auth.test said where the workspace is: links to the threads.
    deadline = time.monotonic() + 10
    while h.bot.poster.workspace is None and time.monotonic() < deadline:
        time.sleep(0.05)
    text = texts(h.command("sentinel", channel="C0OPS", channel_name="gpu-ops")[1])
    assert "<https://fake.slack.test/archives/C0CARDS/p1700000000000100|its thread>" in text


def test_a_channel_sees_only_what_it_may_query(h: BotHarness, tmp_path: Path) -> None:
    assert h.bot is not None
    h.bot.sentinel = running_sentinel(tmp_path)
    text = texts(h.command("sentinel")[1])  # C0CHAN1: namespace ml, and cluster commands
    assert "2 open incidents" in text and "ml/Job train" in text and "pool a100" in text
    assert "research" not in text
    assert "1 more about namespaces or nodes this channel may not query" in text
    assert "routes" not in text
    h.bot.policy.restrict_cluster_commands = True  # nodes are not this channel's to see
    text = texts(h.command("sentinel")[1])
    assert "1 open incident" in text and "pool a100" not in text
    text = texts(h.command("sentinel", channel="C0ELSE", channel_name="random")[1])
    assert "no open incident" in text and "3 more about" in text


def test_prometheus_detectors_show_their_state(tmp_path: Path) -> None:
    metrics = FakeMetrics()
    metrics.down = "connection refused"
    with BotHarness(sentinel_channel="C0CARDS", prometheus_url="http://prometheus:9090") as h:
        assert h.bot is not None
        h.bot.sentinel = running_sentinel(tmp_path, metrics)
        text = texts(h.command("sentinel")[1])
        assert "`gpu-idle` GPUs allocated but idle: after `idle_after` 1h0m; on, every 2m" \
            in text
        assert "Prometheus did not answer" in text and "connection refused" in text


def test_metrics_has_the_gpus_lost_the_open_incidents_and_detector_times(
        h: BotHarness, tmp_path: Path) -> None:
    assert h.bot is not None
    status, before = h.get("/metrics")
    assert status == 200 and "# TYPE gpubot_gpus_lost gauge" in before
    assert "gpubot_gpus_lost{" not in before and "gpubot_incidents_open{" not in before
    h.bot.sentinel = running_sentinel(tmp_path, FakeMetrics())
    metrics = h.get("/metrics")[1]
    assert 'gpubot_gpus_lost{node="a-0",pool="a100"} 8.0' in metrics
    for detector, n in (("gpu-capacity-lost", 1), ("gpu-pending", 2), ("gpu-stack-down", 0),
                        ("gpu-idle", 0), ("gpu-xid", 0)):
        assert f'gpubot_incidents_open{{detector="{detector}"}} {n:.1f}' in metrics
    # Two ticks: the first evaluated every object, the second nothing changed; one poll.
    assert 'gpubot_sentinel_detector_seconds_count{detector="gpu-capacity-lost"} 1.0' \
        in metrics
    assert 'gpubot_sentinel_detector_seconds_count{detector="gpu-xid"} 1.0' in metrics
    assert 'gpubot_sentinel_detector_seconds_sum{detector="gpu-pending"}' in metrics
