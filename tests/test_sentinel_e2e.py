"""The sentinel end to end (issue 24 item 5): ``gpubot serve`` on a cluster served by the
fake API server (the real kubernetes client over HTTP, the watch cache), posting to the fake
Slack, with thresholds in seconds. Nodes change as a kubelet changes them: status patches
through the API.

- a pool's nodes dropping 8 -> 0 allocatable GPUs: one card, once ``lost_after`` has passed,
  with the diagnosis in its thread naming the crash-looping plugin and offering the restart
  of the plugin that marked its GPUs unhealthy; GPUs back: the card says Resolved, for how
  long and the GPU-hours lost;
- 50 nodes losing their GPUs at once: one card per pool;
- the bot restarted mid-incident: the same card is updated;
- two replicas on the Kubernetes store and its Lease: one card; the leader stopped, the
  other carries on the same card;
- Slack down: nothing lost, the card and its diagnosis posted once it is back.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from bot.serve import add_arguments
from bot.slack.server import BotServer
from tests.fake_kube import FakeKube, wait_until
from tests.fake_kube.fixtures import connect
from tests.fake_slack import FakeSlack
from tests.fake_slack.server import Call
from tests.sentinel_cluster import (
    cluster,
    crash_plugin,
    plugin_pod_name,
    seed_logs,
    set_allocatable,
)
from tests.serving import serving

CHANNEL = "C0INCIDENTS"
LOST_AFTER = 2.0


def _args(kubeconfig: Path) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_arguments(p)
    return p.parse_args(["--kubeconfig", str(kubeconfig), "--mode", "http",
                         "--host", "127.0.0.1"])


def _env(slack: FakeSlack, tmp: Path, **more: str) -> dict[str, str]:
    return {"SLACK_BOT_TOKEN": "xoxb-sentinel", "SLACK_SIGNING_SECRET": "sentinel-secret",
            "SLACK_API_URL": slack.api_url, "GPUBOT_PORT": "0", "GPUBOT_KUBE_TIMEOUT": "5",
            "GPUBOT_SENTINEL_CHANNEL": CHANNEL, "GPUBOT_SENTINEL_INTERVAL": "0.5s",
            "GPUBOT_LOST_AFTER": f"{LOST_AFTER}s",
            # Only the capacity lost is under test: the plugin's own incident waits an hour.
            "GPUBOT_PLUGIN_DOWN_AFTER": "1h", "GPUBOT_PENDING_AFTER": "1h",
            "GPUBOT_STORE_PATH": str(tmp / "state.db"), **more}


class Env:
    """A fake cluster, the fake Slack, and a kubernetes client to change the cluster with."""

    def __init__(self, stack: ExitStack, tmp: Path, nodes: dict[str, str]) -> None:
        from kubernetes import client

        self.fake = stack.enter_context(FakeKube(objects=cluster(nodes)))
        seed_logs(self.fake, list(nodes))
        self.slack = stack.enter_context(FakeSlack())
        self.tmp = tmp
        self.kubeconfig = self.fake.write_kubeconfig(tmp / "kubeconfig")
        api = connect(self.fake, tmp, "kubeconfig-test")
        stack.callback(api.close)
        self.core = client.CoreV1Api(api)

    def serve(self, stack: ExitStack | None = None, *, more: dict[str, str] | None = None
              ) -> Any:
        ctx = serving(_args(self.kubeconfig), _env(self.slack, self.tmp, **(more or {})))
        return ctx if stack is None else stack.enter_context(ctx)

    def cards(self) -> list[Call]:
        return [c for c in self.slack.calls("chat.postMessage")
                if "thread_ts" not in c.params and c.response.get("ok")]

    def wait_card(self, where: Callable[[Call], bool] = lambda c: True, timeout: float = 30,
                  n: int = 1) -> list[Call]:
        return self.slack.wait_for("chat.postMessage", n, timeout=timeout, where=lambda c: (
            "thread_ts" not in c.params and bool(c.response.get("ok")) and where(c)))

    def thread(self, ts: str, needle: str, timeout: float = 30) -> str:
        """Everything in the card's thread, once ``needle`` is in it."""
        self.slack.wait_for("chat.postMessage", timeout=timeout, where=lambda c: (
            c.params.get("thread_ts") == ts and needle in text(c)))
        return " ".join(text(c) for c in self.slack.calls("chat.postMessage")
                        if c.params.get("thread_ts") == ts)

    def update(self, ts: str, needle: str, timeout: float = 30) -> Call:
        return self.slack.wait_for("chat.update", timeout=timeout, where=lambda c: (
            c.params.get("ts") == ts and needle in text(c)))[0]


def text(call: Call) -> str:
    return json.dumps(call.blocks, ensure_ascii=False)


def watching(server: BotServer) -> None:
    """Until the sentinel has run on the synced cache (its first tick sees everything)."""
    wait_until(lambda: server.bot.sentinel is not None and server.bot.sentinel.ticks > 0,
               timeout=30)


def buttons(thread_calls: list[Call]) -> list[dict[str, Any]]:
    return [json.loads(e["value"]) for c in thread_calls for b in c.blocks
            if b.get("type") == "actions" for e in b["elements"]
            if str(e.get("action_id", "")).startswith("gpubot_action_")]


@pytest.fixture
def stack() -> Iterator[ExitStack]:
    with ExitStack() as s:
        yield s


def test_lost_gpus_post_one_card_with_the_diagnosis_then_resolve(stack: ExitStack,
                                                                   tmp_path: Path) -> None:
    env = Env(stack, tmp_path, {"gpu-a-1": "a100", "gpu-a-2": "a100", "gpu-h-1": "h100"})
    server = env.serve(stack)
    watching(server)
    # A kubelet upgrade over pool a100: gpu-a-1's plugin crash-loops, gpu-a-2's plugin
    # reports its GPUs unhealthy; both nodes drop from 8 allocatable GPUs to 0.
    lost = time.monotonic()
    crash_plugin(env.core, "gpu-a-1")
    set_allocatable(env.core, "gpu-a-1", 0)
    set_allocatable(env.core, "gpu-a-2", 0)
    [card] = env.wait_card()
    assert LOST_AFTER <= card.at - lost <= LOST_AFTER + 8  # when the threshold passed
    assert card.params["channel"] == CHANNEL
    body = text(card)
    assert "GPU capacity lost · pool a100" in body and "16 GPUs lost on 2 nodes" in body
    assert "gpu-a-1: 0 of 8 GPUs allocatable (8 lost)" in body
    ts = card.response["ts"]
    thread = env.thread(ts, "GPU_UNHEALTHY")
    thread = env.thread(ts, "DEVICE_PLUGIN_CRASHLOOP")
    assert "doctor gpu-a-1" in thread and "doctor gpu-a-2" in thread
    assert plugin_pod_name("gpu-a-1") in thread  # the crash-looping plugin, named
    offered = buttons([c for c in env.slack.calls("chat.postMessage")
                       if c.params.get("thread_ts") == ts])
    assert {(b["a"], b["n"], b["c"]) for b in offered} == {
        ("restart-device-plugin", "gpu-a-2", "GPU_UNHEALTHY")}
    # GPUs back: the same card, resolved in place with how long and what it cost.
    back = time.monotonic()
    set_allocatable(env.core, "gpu-a-1", 8)
    set_allocatable(env.core, "gpu-a-2", 8)
    done = env.update(ts, "Resolved · GPU capacity lost · pool a100")
    said = re.search(r"\*Resolved\* after (\d+)s: [\d.]+ GPU-hours lost", text(done))
    assert said is not None, text(done)
    # From when it began (lost_after before its card) to when it was back (before the edit).
    assert back - card.at + LOST_AFTER - 1 <= int(said.group(1)) <= done.at - lost
    assert "resolved after" in env.thread(ts, "resolved after")
    assert len(env.cards()) == 1


def test_fifty_nodes_losing_their_gpus_give_one_card_per_pool(stack: ExitStack,
                                                             tmp_path: Path) -> None:
    nodes = {f"gpu-a-{i:02d}": "a100" for i in range(30)}
    nodes.update({f"gpu-h-{i:02d}": "h100" for i in range(20)})
    env = Env(stack, tmp_path, nodes)
    server = env.serve(stack)
    watching(server)
    for name in nodes:
        set_allocatable(env.core, name, 0)
    cards = env.wait_card(n=2)
    got = sorted(text(c) for c in cards)
    assert "240 GPUs lost on 30 nodes" in got[0] and "pool a100" in got[0]
    assert "160 GPUs lost on 20 nodes" in got[1] and "pool h100" in got[1]
    for c in cards:  # each with its diagnosis (the first few nodes), then nothing more
        env.thread(c.response["ts"], "GPU_UNHEALTHY")
    time.sleep(2)
    assert len(env.cards()) == 2


def test_a_restart_mid_incident_updates_the_same_card(stack: ExitStack, tmp_path: Path
                                                      ) -> None:
    env = Env(stack, tmp_path, {"gpu-a-1": "a100", "gpu-a-2": "a100"})
    with env.serve() as server:
        watching(server)
        set_allocatable(env.core, "gpu-a-1", 0)
        [card] = env.wait_card()
        ts = card.response["ts"]
        env.thread(ts, "GPU_UNHEALTHY")
    set_allocatable(env.core, "gpu-a-2", 0)  # while the bot is down
    with env.serve() as server:
        watching(server)
        assert "16 GPUs lost on 2 nodes" in text(env.update(ts, "16 GPUs lost"))
        env.thread(ts, "doctor gpu-a-2")
        set_allocatable(env.core, "gpu-a-1", 8)
        set_allocatable(env.core, "gpu-a-2", 8)
        env.update(ts, "Resolved · GPU capacity lost")
    assert len(env.cards()) == 1


def test_two_replicas_on_the_kubernetes_store_post_once(stack: ExitStack, tmp_path: Path
                                                        ) -> None:
    env = Env(stack, tmp_path, {"gpu-a-1": "a100", "gpu-a-2": "a100"})
    shared = {"GPUBOT_STORE": "kubernetes", "GPUBOT_STORE_NAMESPACE": "gpubot"}
    first = env.serve(more=shared)
    a = first.__enter__()
    try:
        watching(a)
        wait_until(lambda: a.bot.sentinel.leader.is_leader(), timeout=20)
        b = env.serve(stack, more=shared)
        watching(b)
        assert not b.bot.sentinel.leader.is_leader()
        set_allocatable(env.core, "gpu-a-1", 0)
        [card] = env.wait_card()
        ts = card.response["ts"]
        env.thread(ts, "GPU_UNHEALTHY")
    finally:
        first.__exit__(None, None, None)  # the leader stops and hands the Lease back
    wait_until(lambda: b.bot.sentinel.leader.is_leader(), timeout=20)
    set_allocatable(env.core, "gpu-a-1", 8)
    env.update(ts, "Resolved · GPU capacity lost")
    assert len(env.cards()) == 1
    lease = env.fake.store.find("Lease", "gpubot-sentinel", "gpubot")
    assert lease is not None and lease["spec"]["leaseTransitions"] == 1
    records = [o for o in env.fake.store.all("ConfigMap", "gpubot")
               if (o["metadata"].get("labels") or {}).get("gpubot.io/store") == "incidents"]
    assert len(records) == 1


def test_a_slack_outage_queues_and_posts_later_without_loss(stack: ExitStack,
                                                          tmp_path: Path) -> None:
    env = Env(stack, tmp_path, {"gpu-a-1": "a100", "gpu-a-2": "a100"})
    server = env.serve(stack)
    watching(server)
    env.slack.fail("chat.postMessage", "service_unavailable", times=1_000_000)
    set_allocatable(env.core, "gpu-a-1", 0)
    env.slack.wait_for("chat.postMessage", 2, timeout=30, where=lambda c: (
        "thread_ts" not in c.params and not c.response.get("ok")))  # tried, and again
    set_allocatable(env.core, "gpu-a-2", 0)  # it changes while Slack is down
    time.sleep(1)
    assert env.cards() == []
    env.slack.heal("chat.postMessage")
    [card] = env.wait_card()
    assert "16 GPUs lost on 2 nodes" in text(card)
    thread = env.thread(card.response["ts"], "doctor gpu-a-2")
    assert "doctor gpu-a-1" in thread
    time.sleep(1)
    assert len(env.cards()) == 1


def test_a_store_that_refuses_keeps_the_bot_up_and_the_sentinel_retrying(
        stack: ExitStack, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    import urllib.request

    env = Env(stack, tmp_path, {"gpu-a-1": "a100"})
    refused = env.fake.faults.forbid("configmaps", namespace="gpubot")
    server = env.serve(stack, more={"GPUBOT_STORE": "kubernetes",
                                    "GPUBOT_STORE_NAMESPACE": "gpubot"})
    watching(server)
    set_allocatable(env.core, "gpu-a-1", 0)
    wait_until(lambda: any("sentinel tick failed" in r.getMessage() for r in caplog.records),
               timeout=30)
    time.sleep(LOST_AFTER + 1)  # past lost_after, the store still refusing
    with urllib.request.urlopen(server.url + "/healthz", timeout=5) as r:
        assert r.status == 200
    assert env.cards() == []
    env.fake.faults.remove(refused)
    env.wait_card()


def test_the_sentinel_runs_only_where_it_can() -> None:
    from tests.fake_slack.harness import ROOT
    from tests.test_slack_serve import run_serve

    base = {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xapp-1"}
    code, err = run_serve(["--snapshot", str(ROOT / "examples/gpu-fragmentation")], {
        **base, "GPUBOT_SENTINEL_ROUTES": "severity=critical=C1"})
    assert code == 2 and "GPUBOT_SENTINEL_ROUTES" in err and "'severity'" in err
    with FakeSlack() as slack:
        env = {**base, "SLACK_SIGNING_SECRET": "s", "SLACK_API_URL": slack.api_url,
               "GPUBOT_PORT": "0", "GPUBOT_SENTINEL_CHANNEL": CHANNEL}
        p = argparse.ArgumentParser()
        add_arguments(p)
        args = p.parse_args(["--snapshot", str(ROOT / "examples/gpu-fragmentation"),
                             "--mode", "http", "--host", "127.0.0.1"])
        with serving(args, env) as server:
            assert server.bot.sentinel is None  # a snapshot does not change


def test_no_channel_no_sentinel(stack: ExitStack, tmp_path: Path) -> None:
    env = Env(stack, tmp_path, {"gpu-a-1": "a100"})
    with serving(_args(env.kubeconfig), {
            k: v for k, v in _env(env.slack, tmp_path).items()
            if k != "GPUBOT_SENTINEL_CHANNEL"}) as server:
        time.sleep(0.5)
        assert server.bot.sentinel is None


def test_serve_posts_the_daily_digest_once_its_time_has_passed(stack: ExitStack,
                                                               tmp_path: Path) -> None:
    env = Env(stack, tmp_path, {"gpu-a-1": "a100"})
    # 00:00 UTC has passed today: a bot started later posts the day's digest now.
    env.serve(stack, more={"GPUBOT_DIGEST_TIME": "00:00", "GPUBOT_DIGEST_CHANNEL": "C0DIGEST"})
    [card] = env.wait_card(lambda c: c.params["channel"] == "C0DIGEST")
    assert "GPU digest" in card.params["text"]
    assert env.cards() == [card]  # nothing lost: no incident card beside it
