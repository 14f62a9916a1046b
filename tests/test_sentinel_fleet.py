"""The sentinel per cluster (issue 26 item 5): ``gpubot serve`` with a ``clusters`` config over
two fake API servers, one sentinel each, posting to the fake Slack.

- GPUs lost in cluster b: one card naming b (routed by ``cluster=b``), diagnosed in b; a's
  nodes, of the same names, stay quiet; /metrics labels each cluster's series;
- the same node losing its GPUs in both clusters: two incidents, two cards, two records;
  b's GPUs back resolve b's only;
- cluster a down mid-run: b's sentinel carries on, ``/gpu sentinel`` says a does not
  answer, the digest says a was not read;
- the daily digest: each cluster's card, then a table per cluster with the total;
- the store: a cluster's book sees its own incidents only; the fleet's first cluster takes
  over the records of a bot that served one cluster.
"""

from __future__ import annotations

import argparse
import json
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.digest.slack import post_fleet
from bot.sentinel.incidents import IncidentBook, incident_key
from bot.sentinel.service import Sentinel
from bot.sentinel.watcher import Watcher
from bot.serve import add_arguments
from bot.slack.server import BotServer
from bot.store import open_store
from tests.fake_kube import FakeKube, wait_until, write_kubeconfig_many
from tests.fake_kube.fixtures import connect
from tests.fake_slack import FakeSlack, signed_headers
from tests.fake_slack.server import Call
from tests.sentinel_cluster import cluster, seed_logs, set_allocatable
from tests.serving import serving
from tests.test_sentinel import T0, Clock, Objects, Recorder, gpu_node

SECRET = "sentinel-fleet-secret"
CHANNEL = "C0INCIDENTS"
B_CHANNEL = "C0BCARDS"
LOST_AFTER = 2.0
NODES = {"gpu-1": "a100", "gpu-2": "a100"}  # the same names in both clusters


class Fleet:
    """Two fake clusters (a, b), the fake Slack, the bot serving both."""

    def __init__(self, stack: ExitStack, tmp: Path, *, unopened: bool = False) -> None:
        """``unopened``: also a cluster c whose kubeconfig context does not exist."""
        from kubernetes import client

        self.fakes: dict[str, FakeKube] = {}
        self.core: dict[str, Any] = {}
        for name in ("a", "b"):
            fake = stack.enter_context(FakeKube(objects=cluster(NODES)))
            seed_logs(fake, list(NODES))
            api = connect(fake, tmp, f"kubeconfig-{name}")
            stack.callback(api.close)
            self.fakes[name], self.core[name] = fake, client.CoreV1Api(api)
        self.slack = stack.enter_context(FakeSlack())
        kubeconfig = write_kubeconfig_many(tmp / "kubeconfig",
                                           {f"{n}-ctx": f for n, f in self.fakes.items()})
        config = tmp / "gpubot.yaml"
        config.write_text(yaml.safe_dump({"clusters": [
            {"name": n, "context": f"{n}-ctx", "kubeconfig": str(kubeconfig)}
            for n in [*self.fakes, *(["c"] if unopened else [])]], "channel_namespaces": {
                CHANNEL: ["*"], B_CHANNEL: ["*"], "C0OPS": ["*"], "C0AONLY": ["a:*"],
                "C0DIGEST": ["*"]}}))
        self.store_path = tmp / "state.db"
        env = {"SLACK_BOT_TOKEN": "xoxb-sentinel-fleet", "SLACK_SIGNING_SECRET": SECRET,
               "SLACK_API_URL": self.slack.api_url, "GPUBOT_PORT": "0",
               "GPUBOT_KUBE_TIMEOUT": "3", "GPUBOT_SENTINEL_CHANNEL": CHANNEL,
               "GPUBOT_SENTINEL_ROUTES": f"cluster=b={B_CHANNEL}",
               "GPUBOT_SENTINEL_INTERVAL": "0.5s", "GPUBOT_LOST_AFTER": f"{LOST_AFTER}s",
               "GPUBOT_PLUGIN_DOWN_AFTER": "1h", "GPUBOT_PENDING_AFTER": "1h",
               "GPUBOT_STORE_PATH": str(self.store_path)}
        p = argparse.ArgumentParser()
        add_arguments(p)
        args = p.parse_args(["--config", str(config), "--mode", "http", "--host", "127.0.0.1"])
        self.server: BotServer = stack.enter_context(serving(args, env))
        self._n = 0

    def watching(self) -> None:
        """Until both clusters' sentinels have run on their synced caches."""
        wait_until(lambda: set(self.server.bot.sentinels) == {"a", "b"} and all(
            s.ticks > 0 for s in self.server.bot.sentinels.values()), timeout=30)

    def cards(self) -> list[Call]:
        return [c for c in self.slack.calls("chat.postMessage")
                if "thread_ts" not in c.params and c.response.get("ok")]

    def wait_cards(self, n: int) -> list[Call]:
        return self.slack.wait_for("chat.postMessage", n, timeout=30, where=lambda c: (
            "thread_ts" not in c.params and bool(c.response.get("ok"))))

    def thread(self, ts: str, needle: str) -> str:
        self.slack.wait_for("chat.postMessage", timeout=30, where=lambda c: (
            c.params.get("thread_ts") == ts and needle in text(c)))
        return " ".join(text(c) for c in self.slack.calls("chat.postMessage")
                        if c.params.get("thread_ts") == ts)

    def digest(self, not_read: str | None = None) -> list[dict[str, Any]]:
        """Post the daily digest now, as its schedule does: the fleet table's rows; each
        cluster that answers has its card first (``not_read``: the one that does not)."""
        bot = self.server.bot
        before = len(self.slack.calls("chat.postMessage"))
        post_fleet(bot, bot.sentinel.book.store, "C0DIGEST", "/gpu")
        posted = [c for c in self.slack.calls("chat.postMessage")[before:]
                  if c.params["channel"] == "C0DIGEST" and "thread_ts" not in c.params]
        *cards, summary = posted
        readable = [n for n in ("a", "b") if n != not_read]
        assert [n for n in readable if any(f"cluster {n} ·" in text(c) for c in cards)] \
            == readable and len(cards) == len(readable)
        if not_read is not None:
            assert f"not read: {not_read}: cluster {not_read} is unreachable" in text(summary)
        return table(summary)

    def sentinel_status(self, channel: str = "C0OPS") -> str:
        """``/gpu sentinel``'s answer (the ack) in ``channel``, as text."""
        self._n += 1
        body = urllib.parse.urlencode({
            "command": "/gpu", "text": "sentinel", "user_id": "U0ASKER",
            "channel_id": channel, "channel_name": "", "trigger_id": f"t{self._n}",
            "response_url": self.slack.response_url(f"r{self._n}")})
        req = urllib.request.Request(self.server.url + "/slack/events", data=body.encode(),
                                     headers=signed_headers(SECRET, body))
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.dumps(json.loads(r.read()), ensure_ascii=False)


def text(call: Call) -> str:
    return json.dumps(call.blocks, ensure_ascii=False)


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    with ExitStack() as stack:
        yield Fleet(stack, tmp_path)


def test_lost_gpus_in_one_cluster_open_an_incident_naming_it_and_the_other_stays_quiet(
        fleet: Fleet) -> None:
    fleet.watching()
    set_allocatable(fleet.core["b"], "gpu-1", 0)
    [card] = fleet.wait_cards(1)
    assert card.params["channel"] == B_CHANNEL  # routed by cluster=b
    body = text(card)
    assert "GPU capacity lost · pool a100 · cluster b" in body
    assert "gpu-1: 0 of 8 GPUs allocatable (8 lost)" in body
    # Diagnosed in b: the thread's answer says which cluster it read.
    thread = fleet.thread(card.response["ts"], "doctor gpu-1")
    assert "cluster b" in thread and "cluster a" not in thread
    # a's gpu-1, of the same name, is fine: nothing more opens.
    time.sleep(LOST_AFTER + 1.5)
    assert len(fleet.cards()) == 1
    a, b = fleet.server.bot.sentinels["a"], fleet.server.bot.sentinels["b"]
    assert [i.cluster for i in b.book.open()] == ["b"] and a.book.open() == []
    # /metrics: each cluster's series, labelled (both clusters have a gpu-1).
    wait_until(lambda: bool(b.open_now), timeout=10)
    with urllib.request.urlopen(fleet.server.url + "/metrics", timeout=10) as r:
        metrics = r.read().decode()
    assert 'gpubot_gpus_lost{cluster="b",node="gpu-1",pool="a100"} 8.0' in metrics
    assert 'gpubot_incidents_open{cluster="b",detector="gpu-capacity-lost"} 1.0' in metrics
    assert 'gpubot_incidents_open{cluster="a",detector="gpu-capacity-lost"} 0.0' in metrics
    assert 'cluster="a",node="gpu-1"' not in metrics
    # The daily digest: each cluster's card, then the clusters side by side and in total.
    rows = fleet.digest()
    assert [r["cluster"] for r in rows] == ["a", "b", "total"]
    assert [r["lost_now"] for r in rows] == [0, 8, 8]
    assert [r["peak"] for r in rows] == [0, 8, 8]  # b's incident, open now


def table(call: Call) -> list[dict[str, Any]]:
    """The fleet digest's table: a row per cluster, then the total."""
    body = " ".join(b["text"]["text"] for b in call.blocks if b.get("type") == "section")
    lines = [ln.split() for ln in body.split("```")[1].strip().splitlines()]
    keys = ["cluster", "peak", "gpu_hours", "lost_now", "free", "pending_gpus", "pending"]
    return [{k: (v if k == "cluster" else float(v)) for k, v in zip(keys, ln, strict=True)}
            for ln in lines[1:]]


def test_the_same_node_in_two_clusters_is_two_incidents(fleet: Fleet) -> None:
    fleet.watching()
    for name in ("a", "b"):
        set_allocatable(fleet.core[name], "gpu-1", 0)
    cards = fleet.wait_cards(2)
    by_channel = {c.params["channel"]: text(c) for c in cards}
    assert set(by_channel) == {CHANNEL, B_CHANNEL}
    assert "cluster a" in by_channel[CHANNEL] and "cluster b" in by_channel[B_CHANNEL]
    store = fleet.server.bot.sentinels["a"].book.store
    records = {r.data["cluster"]: r.key for r in store.list("incidents")}
    assert set(records) == {"a", "b"} and records["a"] != records["b"]
    # A channel that may read cluster a only sees a's incident, and is told of one more.
    wait_until(lambda: all(s.open_now for s in fleet.server.bot.sentinels.values()),
               timeout=10)
    status = fleet.sentinel_status("C0AONLY")
    assert "1 open incident" in status and "cluster a" in status
    assert "cluster b" not in status and "1 more about namespaces or nodes" in status
    # b's GPUs back: b's card resolves; a's incident stays open.
    b_ts = next(c.response["ts"] for c in cards if c.params["channel"] == B_CHANNEL)
    set_allocatable(fleet.core["b"], "gpu-1", 8)
    fleet.slack.wait_for("chat.update", timeout=30, where=lambda c: (
        c.params.get("ts") == b_ts and "Resolved" in text(c)))
    wait_until(lambda: [i.cluster for i in fleet.server.bot.sentinels["a"].open_now] == ["a"]
               and not fleet.server.bot.sentinels["b"].open_now, timeout=10)
    assert not [c for c in fleet.slack.calls("chat.update")
                if c.params["channel"] == CHANNEL and "Resolved" in text(c)]


def test_one_cluster_down_does_not_stop_the_others_sentinel(fleet: Fleet) -> None:
    fleet.watching()
    fleet.fakes["a"].stop()  # a's API server goes away: its watches break, lists fail
    wait_until(lambda: fleet.server.bot.sentinels["a"].unreadable() is not None, timeout=20)
    set_allocatable(fleet.core["b"], "gpu-2", 0)
    [card] = fleet.wait_cards(1)
    assert "cluster b" in text(card) and "gpu-2" in text(card)
    wait_until(lambda: bool(fleet.server.bot.sentinels["b"].open_now), timeout=10)
    status = fleet.sentinel_status()
    assert "1 open incident" in status and "cluster b" in status
    assert "`a` not answering" in status and "`b` watching" in status
    rows = fleet.digest(not_read="a")
    assert [(r["cluster"], r["lost_now"]) for r in rows] == [("b", 8), ("total", 8)]


def test_a_clusters_book_keeps_its_own_incidents_and_the_first_takes_over_old_ones(
        tmp_path: Path) -> None:
    store = open_store("sqlite", path=str(tmp_path / "state.db"))
    view, clock = Objects(), Clock(T0)
    view.put(gpu_node("gpu-1", alloc=0))
    limits = {"lost_after": 60.0, "plugin_down_after": 60.0, "pending_after": 60.0}

    def sentinel(book: IncidentBook) -> Sentinel:
        return Sentinel(Watcher(view, clock=clock), book, Recorder(), limits, clock=clock)

    alone = sentinel(IncidentBook(store))  # a bot that served one cluster
    alone.tick()
    clock.t += 61
    alone.tick()
    [old] = IncidentBook(store).open()
    assert old.cluster == "" and old.key == incident_key("gpu-capacity-lost", old.group)
    # Now a fleet: its first cluster carries the incident on; the second has none of it.
    first = IncidentBook(store, cluster="a", legacy=True)
    second = IncidentBook(store, cluster="b")
    assert [i.key for i in first.open()] == [old.key] and second.open() == []
    view.put(gpu_node("gpu-2", alloc=0))
    sentinel(first).tick()  # open: its members are updated at once
    [now] = first.open()
    assert now.key == old.key and now.cluster == "a" and now.members_total == 2
    # The same nodes in b are b's own incident, under another key.
    in_b = sentinel(second)
    in_b.tick()
    clock.t += 61
    in_b.tick()
    [other] = second.open()
    assert other.cluster == "b" and other.key == incident_key(
        "gpu-capacity-lost", other.group, "b") != now.key
    assert len(IncidentBook(store, cluster="a").open()) == 1  # taken over: a's now
    store.close()


def test_gpubot_watch_on_a_configured_cluster_names_it(tmp_path: Path) -> None:
    """``gpubot watch --cluster b``: b's context from the clusters setting; its incidents
    carry b, with the command to diagnose them there."""
    import io
    import threading

    from kubernetes import client

    from bot.cli import build_parser
    from bot.watch import main as watch_main

    with FakeKube(objects=cluster(NODES)) as a, FakeKube(objects=cluster(NODES)) as b:
        kubeconfig = write_kubeconfig_many(tmp_path / "kubeconfig", {"a-ctx": a, "b-ctx": b})
        env = {"GPUBOT_CLUSTERS": yaml.safe_dump([
            {"name": n, "context": f"{n}-ctx", "kubeconfig": str(kubeconfig)} for n in "ab"])}
        out, err, stop = io.StringIO(), io.StringIO(), threading.Event()
        args = build_parser().parse_args(["watch", "--cluster", "b", "--lost-after", "1s",
                                          "--interval", "0.2s", "-o", "json"])
        codes: list[int] = []
        thread = threading.Thread(target=lambda: codes.append(
            watch_main(args, out, err, env, stop=stop)), daemon=True)
        thread.start()
        try:
            wait_until(lambda: "Watching." in err.getvalue(), timeout=30)
            assert "watching cluster b · " in err.getvalue()
            api = connect(b, tmp_path, "kubeconfig-test")
            try:
                set_allocatable(client.CoreV1Api(api), "gpu-1", 0)
            finally:
                api.close()
            wait_until(lambda: '"event": "opened"' in out.getvalue(), timeout=30)
        finally:
            stop.set()
            thread.join(30)
    assert codes == [0]
    [opened] = [json.loads(ln) for ln in out.getvalue().splitlines()]
    assert opened["cluster"] == "b"
    assert opened["diagnose"] == ["gpubot doctor gpu-1 --cluster b"]
    assert opened["key"] == incident_key("gpu-capacity-lost", opened["group"], "b")



def test_a_cluster_that_cannot_be_opened_is_named_by_gpubot_sentinel(tmp_path: Path) -> None:
    with ExitStack() as stack:
        fleet = Fleet(stack, tmp_path, unopened=True)
        fleet.watching()
        assert set(fleet.server.bot.sentinels) == {"a", "b"}  # none for c
        status = fleet.sentinel_status()
        assert "`a` watching" in status and "`b` watching" in status
        assert "`c` not opened (" in status and "c-ctx" in status
