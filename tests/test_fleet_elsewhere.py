"""Fits elsewhere end to end (issue 26 item 4): ``gpubot serve`` over three fake API servers
and a context where nothing answers; ``/gpu why-pending`` about a pod pending in one cluster
says, in the card's thread, the other cluster where it would schedule now (its nodes, the
command to run it there), why not in the third, and that the fourth could not be read.

tests/data/fleet: train (home: ml-team/train-x7k2p asks 4 A100s, its one A100 node is
full), lab (A100s free on b-gpu-1 and b-gpu-2), spare (H100s only).
"""

from __future__ import annotations

import argparse
import io
import json
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.cli import main
from bot.serve import add_arguments
from tests.fake_kube import FakeKube, write_kubeconfig_many
from tests.fake_slack import FakeSlack, signed_headers
from tests.fake_slack.server import Call
from tests.serving import serving

SECRET = "elsewhere-secret"
DATA = Path(__file__).parent / "data" / "fleet"
DOWN = "http://127.0.0.1:9"  # nothing listens there
PIPE = ("kubectl --context train-ctx -n ml-team apply view-last-applied job/train -o yaml | "
        "kubectl --context lab-ctx -n ml-team apply -f -")


class Bot:
    def __init__(self, server: Any, slack: FakeSlack) -> None:
        self.server, self.slack = server, slack
        self._n = 0

    def command(self, text: str, channel: str) -> None:
        self._n += 1
        body = urllib.parse.urlencode({
            "command": "/gpu", "text": text, "user_id": "U0ASKER", "channel_id": channel,
            "channel_name": channel.lower(), "trigger_id": f"t{self._n}",
            "response_url": self.slack.response_url(f"r{self._n}")})
        req = urllib.request.Request(self.server.url + "/slack/events", data=body.encode(),
                                     headers=signed_headers(SECRET, body))
        with urllib.request.urlopen(req, timeout=10) as r:
            assert r.status == 200

    def thread_part(self, channel: str, heading: str) -> str:
        """The thread message under ``channel``'s card that carries ``heading``."""
        call = self.slack.wait_for("chat.postMessage", timeout=30, where=lambda c: (
            c.params.get("channel") == channel and bool(c.params.get("thread_ts"))
            and heading in _text(c)))[0]
        return _text(call)

    def card(self, channel: str) -> Call:
        return self.slack.wait_for("chat.postMessage", timeout=30, where=lambda c: (
            c.params.get("channel") == channel and not c.params.get("thread_ts")))[0]


def _text(call: Call) -> str:
    return json.dumps(call.blocks, ensure_ascii=False)


@pytest.fixture
def config(tmp_path: Path) -> Iterator[Path]:
    """A config with clusters train, lab, spare (fake API servers) and down."""
    with FakeKube(DATA / "train.yaml") as train, FakeKube(DATA / "lab.yaml") as lab, \
            FakeKube(DATA / "spare.yaml") as spare:
        kubeconfig = write_kubeconfig_many(tmp_path / "kubeconfig", {
            "train-ctx": train, "lab-ctx": lab, "spare-ctx": spare, "down-ctx": DOWN})
        path = tmp_path / "gpubot.yaml"
        path.write_text(yaml.safe_dump({
            "clusters": [{"name": n, "context": f"{n}-ctx", "kubeconfig": str(kubeconfig)}
                         for n in ("train", "lab", "spare", "down")],
            "channel_namespaces": {"C0ALL": ["*"],
                                   "C0NOLAB": ["train:*", "spare:*", "down:*"]}}))
        yield path


@pytest.fixture
def bot(config: Path, tmp_path: Path) -> Iterator[Bot]:
    with FakeSlack() as slack:
        env = {"SLACK_BOT_TOKEN": "xoxb-elsewhere", "SLACK_SIGNING_SECRET": SECRET,
               "SLACK_API_URL": slack.api_url, "GPUBOT_PORT": "0", "GPUBOT_KUBE_TIMEOUT": "3",
               "GPUBOT_SENTINEL": "false", "GPUBOT_STORE_PATH": str(tmp_path / "state.db")}
        p = argparse.ArgumentParser()
        add_arguments(p)
        args = p.parse_args(["--config", str(config), "--mode", "http", "--host", "127.0.0.1"])
        with serving(args, env) as server:
            yield Bot(server, slack)


def test_slack_names_the_cluster_where_it_fits_and_why_not_the_others(bot: Bot) -> None:
    bot.command("why-pending ml-team/train-x7k2p", "C0ALL")
    card = bot.card("C0ALL")
    assert "cluster train" in _text(card)
    assert "Fits now on cluster lab: its nodes and the command to run it there are in the " \
        "thread" in _text(card)
    part = bot.thread_part("C0ALL", "Fits elsewhere")
    assert "*lab* · fits on b-gpu-1 (8 free, NVIDIA-A100-SXM4-80GB), b-gpu-2 (4 free" in part
    assert "b-gpu-3" not in part  # free, but an H100
    assert json.dumps(PIPE)[1:-1] in part
    assert "*spare* · does not fit: no node of the GPU model the pod asks" in part
    assert "*down* · not checked: unreachable" in part
    # Never an action: no button runs it there.
    buttons = [e for b in card.blocks if b.get("type") == "actions" for e in b["elements"]]
    assert not any("lab" in json.dumps(e) for e in buttons)


def test_a_cluster_the_channel_may_not_read_is_not_asked(bot: Bot) -> None:
    bot.command("why-pending ml-team/train-x7k2p", "C0NOLAB")
    part = bot.thread_part("C0NOLAB", "Fits elsewhere")
    assert "*spare*" in part and "lab" not in part
    assert "Fits now on cluster" not in _text(bot.card("C0NOLAB"))


def test_the_cli_says_it_too(config: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    code = main(["why-pending", "ml-team/train-x7k2p", "--config", str(config)],
                out=out, err=err, environ={})
    assert code == 0, err.getvalue()
    text = out.getvalue()
    part = text[text.index("Fits elsewhere"):]
    assert "lab: fits on b-gpu-1 (8 free, NVIDIA-A100-SXM4-80GB), b-gpu-2" in part
    assert f"$ {PIPE}" in part
    assert "spare: does not fit" in part and "down: not checked" in part


def _snapshot_fleet() -> tuple[Any, Any]:
    """Fleet train, lab, spare over the snapshot files; the why-pending answer from train."""
    from bot.fleet import ClusterHandle, Fleet
    from bot.snapshot import load_snapshot
    from handlers import why_pending
    from handlers.target import parse_target
    from handlers.view import Reader

    fleet = Fleet([ClusterHandle(n, load_snapshot(DATA / f"{n}.yaml"), context=f"{n}-ctx")
                   for n in ("train", "lab", "spare")])
    home = fleet.get("train").view
    return fleet, why_pending.run(Reader(home), parse_target("ml-team/train-x7k2p", None))


class Ticks:
    """A clock that moves one second each time it is read."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


@pytest.mark.parametrize("seconds", [0.0, 6.0], ids=["none-left", "runs-out-mid-cluster"])
def test_clusters_not_reached_in_time_are_said(seconds: float) -> None:
    from bot.fleet.elsewhere import Budget, add_fits_elsewhere
    from handlers.target import parse_target

    fleet, diag = _snapshot_fleet()
    add_fits_elsewhere(fleet, fleet.get("train"), parse_target("ml-team/train-x7k2p", None),
                       diag, fleet.names, Budget(seconds=lambda: seconds, clock=Ticks()))
    clusters = diag.details["fits_elsewhere"]["clusters"]
    assert [(c["cluster"], c["verdict"]) for c in clusters] == [
        ("lab", "not checked"), ("spare", "not checked")]
    assert all(c["reasons"][0].startswith("out of time") for c in clusters)
    assert diag.findings  # the home answer stands


def test_only_the_clusters_named_are_asked() -> None:
    from bot.fleet.elsewhere import Budget, add_fits_elsewhere
    from handlers.target import parse_target

    fleet, diag = _snapshot_fleet()
    add_fits_elsewhere(fleet, fleet.get("train"), parse_target("ml-team/train-x7k2p", None),
                       diag, ["train", "spare"], Budget())
    assert [c["cluster"] for c in diag.details["fits_elsewhere"]["clusters"]] == ["spare"]
