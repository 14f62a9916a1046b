"""The bot is ready only once its watch cache has synced; meanwhile answers come from direct
reads and say so; once synced, the GPU nodes' NodeInfos are built before anyone asks."""

from __future__ import annotations

import argparse
import logging
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.live import open_live_view
from bot.serve import add_arguments
from bot.snapshot import load_snapshot
from bot.snapshot.view import SnapshotView
from handlers.pending.context import node_table
from handlers.scheduler import nodeinfo
from handlers.scheduler.filters import simulate
from handlers.view import Obj, Reader
from handlers.warm import pending_kinds, warm
from tests.fake_kube import FakeKube
from tests.fake_slack import FakeSlack
from tests.fake_slack.harness import ROOT
from tests.serving import serving
from tests.test_scheduler_filters import mk_pod

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
            reader = Reader(live)  # the cache's memos, current while it lives
            assert reader.memos is cache.memos
            warmed = warm(reader)
            infos = nodeinfo._NODES.of(cache.memos)
            assert infos is not None
            nodes = live.list("Node")
            assert 0 < warmed.gpu_nodes <= len(nodes) == len(infos)
            # The pending GPU pod's verdicts on every node are kept: its first diagnosis
            # finds them (simulate hands out the very fits the warm-up made).
            assert warmed.pending == ["ml-team/train-0"]
            kept = {name: list(info.verdicts.values()) for name, info in infos.items()}
            pod = live.get("Pod", "train-0", "ml-team")
            assert pod is not None
            fits = simulate(pod, nodes, cache.pods_on([n["metadata"]["name"] for n in nodes]))
            for fit in fits:
                assert any(fit is k for k in kept[fit.node]), fit.node
            # Built from the very objects the cache hands out: a diagnosis will hit them.
            for name, info in infos.items():
                assert info.node is live.get("Node", name)
                assert info.pods is cache.pods_on([name])[name] or not info.pods
            table = node_table.kept(cache.memos)
            assert table is not None and node_table(nodes, cache.memos) is table
        finally:
            cache.stop()
            live.close()


def test_pending_kinds_are_the_oldest_gpu_pod_of_each_kind_most_pods_first(
        tmp_path: Path) -> None:
    def pod(name: str, gpus: str, stamp: str, **extra: Any) -> dict[str, Any]:
        p = mk_pod(name, requests={"nvidia.com/gpu": gpus}, uid=f"uid-{name}", **extra)
        p["apiVersion"] = "v1"
        p["metadata"]["creationTimestamp"] = f"2026-01-0{stamp}T00:00:00Z"
        return p

    tol = [{"key": "nvidia.com/gpu", "operator": "Exists"}]
    pods = [
        pod("one-a", "1", "3"), pod("one-b", "1", "2"), pod("one-c", "1", "4"),  # 3 pods
        pod("two-a", "2", "5"), pod("two-b", "2", "1"),  # 2 pods
        pod("tol-a", "1", "1", tolerations=tol),  # tolerates: a kind of its own
        pod("placed", "1", "1", node="gpu-1", phase="Running"),
        pod("ended", "1", "1", phase="Failed"),
        mk_pod("cpu-only", requests={"cpu": "1"}, uid="uid-cpu"),
    ]
    snap = tmp_path / "cluster.yaml"
    snap.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": pods}))
    reader = Reader(load_snapshot(snap))
    names = [p["metadata"]["name"] for p in pending_kinds(reader, limit=10)]
    assert names == ["one-b", "two-b", "tol-a"]
    assert [p["metadata"]["name"] for p in pending_kinds(reader, limit=2)] == ["one-b", "two-b"]


def test_a_pending_pod_gone_before_its_warm_diagnosis_is_passed_over() -> None:
    class Racing:  # the pod was listed, then deleted before it was diagnosed
        def __init__(self, inner: SnapshotView) -> None:
            self.inner = inner

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

        def list(self, kind: str, namespace: str | None = None, *,
                 label_selector: str | None = None,
                 field_selector: str | None = None) -> list[Obj]:
            got = self.inner.list(kind, namespace, label_selector=label_selector,
                                  field_selector=field_selector)
            if kind == "Pod" and field_selector == "spec.nodeName=":
                ghost = mk_pod("ghost", "ml-team", requests={"nvidia.com/gpu": "3"},
                               uid="uid-ghost")
                got = [*got, ghost]
            return got

    warmed = warm(Reader(Racing(load_snapshot(EXAMPLE))))  # type: ignore[arg-type]
    assert warmed.pending == ["ml-team/train-0"]  # the ghost's kind came first, and went
