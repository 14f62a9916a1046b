"""One gpubot for several clusters (issue 26), end to end: ``gpubot serve`` with a
``clusters`` config over two fake API servers and a context where nothing answers, one
kubeconfig with a context each, commands signed as Slack signs them, answers read from the
fake Slack.

- the same pod name in two clusters: named without a cluster, the asker is told both and
  how to pick; ``-c`` picks; a pod in one cluster only is found there, and the card says so;
- one cluster down: named, it is reported unreachable; the others answer; /readyz stays up;
- a channel's default cluster; access rules per cluster and namespace;
- an alert labelled with its cluster: diagnosed there, its card and record the cluster's own.
"""

from __future__ import annotations

import argparse
import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.serve import add_arguments
from bot.slack.server import BotServer
from tests.alert_payloads import TOKEN, alert, webhook
from tests.fake_kube import FakeKube, write_kubeconfig_many
from tests.fake_slack import FakeSlack, signed_headers
from tests.fake_slack.harness import ROOT
from tests.fake_slack.server import Call
from tests.serving import serving

SECRET = "fleet-secret"
TRAIN = ROOT / "examples/plugin-crashloop-cuda-mismatch"  # ml-team/train-0 pending
LAB = ROOT / "tests/data/fake_kube/cluster"  # ml-team/train-0 too, and ml-team/notebook-1
DOWN = "http://127.0.0.1:9"  # nothing listens there


class Fleet:
    def __init__(self, server: BotServer, slack: FakeSlack) -> None:
        self.server, self.slack = server, slack
        self._n = 0

    def command(self, text: str, channel: str = "C0ALL", name: str = "gpu-all") -> dict[str, Any]:
        """The command's ack (its ephemeral answer) as JSON."""
        self._n += 1
        body = urllib.parse.urlencode({
            "command": "/gpu", "text": text, "user_id": "U0ASKER", "channel_id": channel,
            "channel_name": name, "trigger_id": f"t{self._n}",
            "response_url": self.slack.response_url(f"r{self._n}")})
        req = urllib.request.Request(self.server.url + "/slack/events", data=body.encode(),
                                     headers=signed_headers(SECRET, body))
        with urllib.request.urlopen(req, timeout=10) as r:
            data: dict[str, Any] = json.loads(r.read() or b"{}")
        data["key"] = f"r{self._n}"
        return data

    def card(self, channel: str, n: int = 1) -> Call:
        return self.slack.wait_for("chat.postMessage", n, timeout=30, where=lambda c: (
            c.params.get("channel") == channel and not c.params.get("thread_ts")))[n - 1]

    def response(self, key: str) -> str:
        call = self.slack.wait_for("response_url", timeout=30,
                                   where=lambda c: c.path.endswith(f"/{key}"))[0]
        return str(call.params.get("text", ""))


def _text(call: Call) -> str:
    return json.dumps(call.blocks)


def _recheck(call: Call) -> list[str]:
    """The command a card's Re-check runs again."""
    button = next(e for b in call.blocks if b.get("type") == "actions"
                  for e in b["elements"] if e.get("action_id") == "gpubot_recheck")
    q: list[str] = json.loads(button["value"])["q"]
    return q


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    with FakeKube(TRAIN) as train, FakeKube(LAB) as lab, FakeSlack() as slack:
        kubeconfig = write_kubeconfig_many(tmp_path / "kubeconfig",
                                           {"train-ctx": train, "lab-ctx": lab,
                                            "down-ctx": DOWN})
        clusters = [{"name": n, "context": f"{n}-ctx", "kubeconfig": str(kubeconfig)}
                    for n in ("train", "lab", "down")]
        config = tmp_path / "gpubot.yaml"
        config.write_text(yaml.safe_dump({
            "clusters": clusters, "channel_clusters": {"C0LAB": "lab"},
            "channel_namespaces": {"C0ALL": ["*"], "C0LAB": ["*"], "C0ALERTS": ["*"],
                                   "C0LABALERTS": ["lab:*"], "C0ML": ["train:ml-team"]}}))
        env = {"SLACK_BOT_TOKEN": "xoxb-fleet", "SLACK_SIGNING_SECRET": SECRET,
               "SLACK_API_URL": slack.api_url, "GPUBOT_PORT": "0", "GPUBOT_KUBE_TIMEOUT": "3",
               "GPUBOT_SENTINEL": "false", "GPUBOT_STORE_PATH": str(tmp_path / "state.db"),
               "GPUBOT_ALERT_TOKEN": TOKEN, "GPUBOT_ALERT_CHANNEL": "C0ALERTS",
               "GPUBOT_ALERT_ROUTES": "cluster=lab=C0LABALERTS"}
        p = argparse.ArgumentParser()
        add_arguments(p)
        args = p.parse_args(["--config", str(config), "--mode", "http", "--host", "127.0.0.1"])
        with serving(args, env) as server:
            yield Fleet(server, slack)


def test_the_same_pod_in_two_clusters_is_ambiguous_until_a_cluster_is_named(
        fleet: Fleet) -> None:
    ack = fleet.command("why-pending ml-team/train-0")
    assert "the clusters this channel may read" in ack["text"]
    said = fleet.response(ack["key"])
    assert "exists in clusters train, lab" in said and "-c train or -c lab" in said

    ack = fleet.command("-c lab why-pending ml-team/train-0")
    assert "cluster lab" in ack["text"]
    card = fleet.card("C0ALL")
    assert "cluster lab" in _text(card)
    assert _recheck(card)[-2:] == ["-c", "lab"]


def test_a_pod_in_one_cluster_is_found_there_and_the_card_says_where(fleet: Fleet) -> None:
    fleet.command("why-pending ml-team/notebook-1")
    card = fleet.card("C0ALL")
    assert "cluster lab" in _text(card)
    # Not found anywhere: every cluster asked is named, the one down said not read.
    said = fleet.response(fleet.command("why-pending ml-team/nobody")["key"])
    assert "not found" in said and "train, lab, down" in said
    assert "cluster down: unreachable" in said


def test_a_cluster_down_is_reported_and_the_others_answer(fleet: Fleet) -> None:
    said = fleet.response(fleet.command("-c down nodes")["key"])
    assert "cluster down is unreachable" in said
    fleet.command("-c train nodes")
    assert "cluster train" in _text(fleet.card("C0ALL"))
    with urllib.request.urlopen(fleet.server.url + "/readyz", timeout=5) as r:
        assert r.status == 200


def test_unknown_cluster_and_no_cluster_for_a_cluster_command(fleet: Fleet) -> None:
    ack = fleet.command("-c nowhere nodes")
    assert "no cluster `nowhere`" in ack["text"] and "`train`" in ack["text"]
    ack = fleet.command("doctor")
    assert "3 clusters" in ack["text"] and "doctor -c train" in ack["text"]


def test_a_channel_reads_its_default_cluster(fleet: Fleet) -> None:
    ack = fleet.command("why-pending ml-team/train-0", channel="C0LAB", name="gpu-lab")
    assert "cluster lab" in ack["text"]
    assert "cluster lab" in _text(fleet.card("C0LAB"))


def test_access_rules_hold_per_cluster(fleet: Fleet) -> None:
    # C0ML may read ml-team in train only: lab is refused, and the search looks in train.
    ack = fleet.command("-c lab why-pending ml-team/notebook-1", channel="C0ML", name="ml")
    assert ack["text"].startswith(":no_entry:") and "cluster `lab`" in ack["text"]
    fleet.command("why-pending ml-team/train-0", channel="C0ML", name="ml")
    assert "cluster train" in _text(fleet.card("C0ML"))
    said = fleet.response(fleet.command("why-pending ml-team/notebook-1", channel="C0ML",
                                        name="ml")["key"])
    assert "not found" in said and "(train)" in said


def _alert(fleet: Fleet, cluster: str) -> dict[str, Any]:
    body = json.dumps(webhook([alert("GPUPodPendingTooLong", namespace="ml-team",
                                     pod="train-0", cluster=cluster)])).encode()
    req = urllib.request.Request(fleet.server.url + "/alertmanager", data=body, headers={
        "Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        answer: dict[str, Any] = json.loads(r.read())
    return answer


def test_an_alert_is_diagnosed_in_the_cluster_its_label_names(fleet: Fleet) -> None:
    # The same groupKey from two clusters: two cards, each routed, titled and diagnosed
    # in its own cluster (the pod exists in both).
    assert _alert(fleet, "train")["channel"] == "C0ALERTS"
    assert _alert(fleet, "lab")["channel"] == "C0LABALERTS"
    for channel, cluster in (("C0ALERTS", "train"), ("C0LABALERTS", "lab")):
        card = fleet.card(channel)
        assert f"cluster {cluster}" in _text(card)
        diagnosis = fleet.slack.wait_for(
            "chat.postMessage", timeout=30, where=lambda c, channel=channel: (
                c.params.get("channel") == channel and c.params.get("thread_ts")
                and "why-pending" in _text(c)))[0]
        assert f"cluster {cluster}" in _text(diagnosis)
        assert _recheck(diagnosis)[-2:] == ["-c", cluster]  # Re-check: the same cluster


def _nodes_total(snapshot: Path) -> int:
    from bot.snapshot import load_snapshot
    from handlers import nodes
    from handlers.view import Reader

    total: int = nodes.run(Reader(load_snapshot(str(snapshot)))).details["totals"]["nodes"]
    return total


def test_nodes_without_a_cluster_shows_each_cluster_and_the_total(fleet: Fleet) -> None:
    ack = fleet.command("nodes")
    assert "every cluster" in ack["text"]
    card = fleet.card("C0ALL")
    assert f"{_nodes_total(TRAIN) + _nodes_total(LAB)} GPU nodes" in _text(card)
    assert _recheck(card) == ["nodes", "--all-clusters"]
    thread = " ".join(_text(c) for c in fleet.slack.wait_for(
        "chat.postMessage", timeout=30, where=lambda c: c.params.get("thread_ts")
        and "Per GPU model" in _text(c)))
    assert "train (all)" in thread and "lab (all)" in thread
    # Said in the thread's last part, which may be posted after the tables: waited for.
    assert fleet.slack.wait_for("chat.postMessage", timeout=30, where=lambda c: c.params.get(
        "thread_ts") and "cluster down is unreachable" in _text(c))
    # No action on a fleet-wide card: a node's name is only unique in its cluster.
    assert not any(e.get("action_id", "").startswith("gpubot_action_")
                   for b in card.blocks if b.get("type") == "actions" for e in b["elements"])


def test_pending_all_clusters_groups_by_cluster(fleet: Fleet) -> None:
    fleet.command("pending --all-clusters")
    posted = json.dumps([c.blocks for c in fleet.slack.wait_for(
        "chat.postMessage", n=2, timeout=30, where=lambda c: c.params.get("channel") == "C0ALL")])
    assert "train/ml-team" in posted and "lab/ml-team" in posted
