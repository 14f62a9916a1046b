"""The bot is ready only once its watch cache has synced; meanwhile answers come from direct
reads and say so; once synced, the GPU nodes' NodeInfos are built before anyone asks."""

from __future__ import annotations

import argparse
import logging
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from bot.live import open_live_view
from bot.serve import add_arguments
from handlers.pending.context import node_table
from handlers.scheduler import nodeinfo
from handlers.view import Reader
from handlers.warm import warm
from tests.fake_kube import FakeKube
from tests.fake_slack import FakeSlack
from tests.fake_slack.harness import ROOT
from tests.serving import serving

EXAMPLE = ROOT / "examples" / "plugin-crashloop-cuda-mismatch"


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return int(r.status)
    except urllib.error.HTTPError as err:
        return int(err.code)


def test_readyz_waits_for_the_cache_and_the_bot_logs_each_kind_synced(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    with FakeSlack() as slack, FakeKube(EXAMPLE) as fk:
        slow = fk.faults.latency(3.0, resource="pods", verb="list", times=1)
        kubeconfig = fk.write_kubeconfig(tmp_path / "kubeconfig")
        env = {"SLACK_BOT_TOKEN": "xoxb-r", "SLACK_SIGNING_SECRET": "ready-test-secret",
               "SLACK_API_URL": slack.api_url, "GPUBOT_PORT": "0"}
        p = argparse.ArgumentParser()
        add_arguments(p)
        args = p.parse_args(["--kubeconfig", str(kubeconfig), "--mode", "http",
                             "--host", "127.0.0.1"])
        with serving(args, env) as server:
            url = server.url + "/readyz"
            assert _status(url) == 503  # pods still listing
            fk.faults.remove(slow)
            deadline = time.monotonic() + 30
            while _status(url) != 200:
                assert time.monotonic() < deadline, "never ready"
                server.bot._cluster = None  # do not wait out the probe's 10 s memo
                time.sleep(0.2)
    synced = [r.getMessage() for r in caplog.records if "synced," in r.getMessage()]
    assert any(m.startswith("watch cache: Pod synced") for m in synced)
    assert any(m.startswith("watch cache: Node synced") for m in synced)


def test_while_syncing_answers_say_they_read_the_api_server(tmp_path: Path) -> None:
    with FakeKube(EXAMPLE) as fk:
        slow = fk.faults.latency(2.0, resource="pods", verb="list", times=1)
        live = open_live_view(str(fk.write_kubeconfig(tmp_path / "k")), timeout=10)
        cache = live.watch()
        try:
            assert "syncing" in live.source
            fk.faults.remove(slow)
            assert cache.wait_synced(30)
            assert "syncing" not in live.source
            # The example holds no ResourceQuota: refused (403), it never syncs, yet it
            # does not hold the bot back.
            assert not cache.synced("ResourceQuota")
        finally:
            cache.stop()
            live.close()


def test_warm_builds_every_nodes_node_info_from_the_cached_objects(tmp_path: Path) -> None:
    with FakeKube(EXAMPLE) as fk:
        live = open_live_view(str(fk.write_kubeconfig(tmp_path / "k")), timeout=10)
        cache = live.watch()
        try:
            assert cache.wait_synced(30)
            nodeinfo._REMEMBERED.clear()
            node_table._last = None
            n = warm(Reader(live))
            nodes = live.list("Node")
            assert 0 < n <= len(nodes) == len(nodeinfo._REMEMBERED)
            # Built from the very objects the cache hands out: a diagnosis will hit them.
            for name, info in nodeinfo._REMEMBERED.items():
                assert info.node is live.get("Node", name)
                assert info.pods is cache.pods_on([name])[name] or not info.pods
            warmed = node_table._last
            assert warmed is not None and node_table(nodes) is warmed[2]
        finally:
            cache.stop()
            live.close()
