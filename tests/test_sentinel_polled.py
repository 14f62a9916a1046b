"""The sentinel's detectors over Prometheus: GPUs allocated but idle (per pod, grouped by its
controller), new Xid errors (per GPU, grouped by pool), polled on a timer of their own, and a
Prometheus that is down neither stops the watch-based detectors nor resolves anything."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.metrics.prometheus import PrometheusConfig, PrometheusMetrics
from bot.sentinel.incidents import IncidentBook
from bot.sentinel.service import Sentinel
from bot.sentinel.watcher import Watcher
from bot.store import open_store
from bot.store.base import Store
from handlers.runtime.source import Sample
from handlers.sentinel.detectors import REGISTRY
from tests.fake_prometheus import FakeMetrics
from tests.real_prometheus import free_port
from tests.test_sentinel import T0, Clock, Objects, Recorder, gpu_node

Obj = dict[str, Any]
UTIL = "DCGM_FI_DEV_GPU_UTIL"
XID = "DCGM_FI_DEV_XID_ERRORS"
LIMITS = {"lost_after": 60.0, "plugin_down_after": 60.0, "pending_after": 60.0,
          "idle_after": 3600.0, "xid_after": 60.0}


def running_pod(name: str, ns: str = "ml", owner: str = "serve", gpus: int = 2,
                started: str = "2026-12-04T00:00:00Z", node: str = "a-0") -> Obj:
    """A Deployment's pod (its ReplicaSet named with the pod-template-hash)."""
    return {"kind": "Pod", "metadata": {
        "name": name, "namespace": ns, "creationTimestamp": started,
        "labels": {"pod-template-hash": "5c7b9d"},
        "ownerReferences": [{"kind": "ReplicaSet", "name": f"{owner}-5c7b9d",
                             "controller": True}]},
        "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {
            "limits": {"nvidia.com/gpu": str(gpus)}}}]},
        "status": {"phase": "Running", "startTime": started}}


def util(pod: str, gpu: int, value: float, ns: str = "ml", host: str = "a-0") -> Sample:
    # dcgm-exporter relabelled by a ServiceMonitor: the workload's pod in exported_*.
    return Sample({"gpu": str(gpu), "UUID": f"GPU-{host}-{gpu}", "Hostname": host,
                   "exported_pod": pod, "exported_namespace": ns,
                   "pod": "nvidia-dcgm-exporter-x", "namespace": "gpu-operator"}, value)


def xid(host: str, gpu: int, code: int) -> Sample:
    return Sample({"gpu": str(gpu), "UUID": f"GPU-{host}-{gpu}", "Hostname": host}, code)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return open_store("sqlite", path=str(tmp_path / "state.db"))


def sentinel(view: Objects, store: Store, clock: Clock, metrics: Any,
             poll_every: float = 60.0) -> Sentinel:
    w = Watcher(view, clock=clock, metrics=metrics)  # type: ignore[arg-type]
    return Sentinel(w, IncidentBook(store, quiet_for=300.0), Recorder(), LIMITS, clock=clock,
                    poll_every=poll_every)


def test_the_polled_detectors_are_registered_with_their_settings() -> None:
    assert REGISTRY["gpu-idle"].needs_metrics and REGISTRY["gpu-idle"].setting == "idle_after"
    assert REGISTRY["gpu-xid"].needs_metrics and REGISTRY["gpu-xid"].setting == "xid_after"
    from bot.slack.config import DURATIONS, Settings

    for name in ("gpu-idle", "gpu-xid"):
        d = REGISTRY[name]
        assert d.setting in DURATIONS and getattr(Settings(), d.setting) == d.default


def test_without_prometheus_nothing_is_polled(store: Store) -> None:
    view, clock = Objects(), Clock(T0)
    s = sentinel(view, store, clock, None)
    assert set(s.watcher.seen) == {"gpu-capacity-lost", "gpu-stack-down", "gpu-pending"}
    assert s.tick().polled is False and s.watcher.poll() == 0


def test_idle_pods_open_one_incident_per_controller(store: Store) -> None:
    view, clock = Objects(), Clock(T0)
    view.put(gpu_node("a-0"))
    for pod in ("serve-5c7b9d-aaaaa", "serve-5c7b9d-bbbbb"):
        view.put(running_pod(pod))
    view.put(running_pod("fresh-5c7b9d-ccccc", owner="fresh",
                         started="2026-12-04T23:30:00Z"))  # 30 min old: the window saw part
    view.put(running_pod("busy-5c7b9d-ddddd", owner="busy"))
    metrics = FakeMetrics({UTIL: [
        util("serve-5c7b9d-aaaaa", 0, 0), util("serve-5c7b9d-aaaaa", 1, 2),
        util("serve-5c7b9d-bbbbb", 2, 1),
        util("fresh-5c7b9d-ccccc", 3, 0),
        util("busy-5c7b9d-ddddd", 4, 88),  # above the threshold (the fake filters nothing)
        util("gone-5c7b9d-eeeee", 5, 0),  # its series lingers for the window; the pod is gone
    ]})
    s = sentinel(view, store, clock, metrics)
    r = s.tick()
    # Idle for the whole window: since the window's start, so idle_after (1h) has passed.
    assert r.polled and [(i.detector, i.group, i.members_total, i.gpus) for i in r.changed] == [
        ("gpu-idle", "ml/Deployment serve", 2, 3.0)]
    [inc] = r.changed
    assert inc.since == pytest.approx(T0 - 3600)
    assert inc.namespaces == ["ml"] and inc.diagnose() == [("nodes", "")]
    assert any("DCGM_FI_DEV_GPU_UTIL" in q and "max_over_time" in q for q in metrics.queries)


def test_an_idle_pod_keeps_the_start_its_first_poll_gave_it(store: Store) -> None:
    view, clock = Objects(), Clock(T0)
    view.put(running_pod("serve-5c7b9d-aaaaa"))
    metrics = FakeMetrics({UTIL: [util("serve-5c7b9d-aaaaa", 0, 0)]})
    s = sentinel(view, store, clock, metrics)
    s.tick()
    clock.t += 600
    s.tick()
    [seen] = s.watcher.seen["gpu-idle"].values()
    assert seen.start() == pytest.approx(T0 - 3600)


def test_polls_run_on_their_timer_not_on_watch_events(store: Store) -> None:
    view, clock = Objects(), Clock(T0)
    view.put(gpu_node("a-0"))
    metrics = FakeMetrics({XID: [xid("a-0", 0, 79)]})
    s = sentinel(view, store, clock, metrics, poll_every=60.0)
    assert s.tick().polled
    asked = len(metrics.queries)
    for i in range(5):  # watch events: evaluated at once, Prometheus is not asked
        clock.t += 10
        view.put(gpu_node("a-0", alloc=8 - i))
        s.changed("Node", "", "a-0")
        r = s.tick()
        assert r.evaluated == 1 and not r.polled
    assert len(metrics.queries) == asked
    clock.t += 10  # 60 s since the last poll
    assert s.tick().polled and len(metrics.queries) == 2 * asked


def test_new_xids_group_by_pool_and_resolve_when_the_gpu_is_reset(store: Store) -> None:
    view, clock = Objects(), Clock(T0)
    for name, pool in (("a-0", "a100"), ("a-1", "a100"), ("h-0", "h100")):
        view.put(gpu_node(name, pool=pool))
    metrics = FakeMetrics({XID: [
        xid("a-0.cluster.local", 0, 79),  # DCGM's Hostname, the node's FQDN
        xid("a-1", 3, 48),
        xid("h-0", 1, 13),  # the application's own fault: the GPU is fine
        xid("h-0", 2, 9999),  # not in gpubot's table: reported
    ]})
    s = sentinel(view, store, clock, metrics, poll_every=30.0)
    assert s.tick().changed == []  # new: counted from this poll (xid_after 60 s)
    clock.t += 30
    s.tick()
    clock.t += 30
    got = {i.group: i for i in s.tick().changed}
    assert sorted((g, i.members_total, i.gpus) for g, i in got.items()) == [
        ("pool a100", 2, 2.0), ("pool h100", 1, 1.0)]
    a100 = got["pool a100"]
    assert a100.diagnose() == [("doctor", "a-0"), ("doctor", "a-1")]
    assert sorted(a100.members) == ["gpu/a-0/GPU-a-0.cluster.local-0/xid-79",
                                    "gpu/a-1/GPU-a-1-3/xid-48"]
    # a-1's GPU is reset; a-0's reports a new code: it joins at once, the old one left.
    metrics.table[XID] = [xid("a-0.cluster.local", 0, 74), xid("h-0", 2, 9999)]
    clock.t += 30
    [updated] = s.tick().changed
    assert updated.group == "pool a100" and list(updated.members) == [
        "gpu/a-0/GPU-a-0.cluster.local-0/xid-74"]
    metrics.table[XID] = []  # every GPU reset
    clock.t += 30
    assert sorted((i.group, i.state) for i in s.tick().changed) == [
        ("pool a100", "resolved"), ("pool h100", "resolved")]


def test_prometheus_down_keeps_incidents_and_the_watch_detectors_go_on(store: Store) -> None:
    view, clock = Objects(), Clock(T0)
    view.put(gpu_node("a-0"))
    view.put(running_pod("serve-5c7b9d-aaaaa"))
    metrics = FakeMetrics({UTIL: [util("serve-5c7b9d-aaaaa", 0, 0)], XID: []})
    s = sentinel(view, store, clock, metrics)
    [idle] = s.tick().changed
    metrics.down = "connection refused"
    view.put(gpu_node("a-0", alloc=0))
    s.changed("Node", "", "a-0")
    for _ in range(3):
        clock.t += 61
        s.tick()
    assert s.watcher.metrics_error is not None and "connection refused" in s.watcher.metrics_error
    opened = {i.detector: i for i in s.book.open()}
    assert set(opened) == {"gpu-idle", "gpu-capacity-lost"}  # neither stopped nor resolved
    assert opened["gpu-idle"].key == idle.key
    metrics.down = None  # back, and the pod is busy now
    metrics.table[UTIL] = []
    clock.t += 61
    r = s.tick()
    assert [(i.detector, i.state) for i in r.changed] == [("gpu-idle", "resolved")]
    assert s.watcher.metrics_error is None


def test_a_prometheus_nobody_answers_is_noted(store: Store) -> None:
    prom = PrometheusMetrics(PrometheusConfig(f"http://127.0.0.1:{free_port()}", timeout=2))
    view, clock = Objects(), Clock(T0)
    view.put(gpu_node("a-0", alloc=0))
    s = sentinel(view, store, clock, prom)
    s.tick()
    clock.t += 61
    r = s.tick()
    assert [i.detector for i in r.changed] == ["gpu-capacity-lost"]
    assert "cannot be reached" in (s.watcher.metrics_error or "")
    prom.close()


def test_each_detector_s_cpu_time_is_kept(store: Store) -> None:
    view, clock = Objects(), Clock(T0)
    view.put(gpu_node("a-0"))
    s = sentinel(view, store, clock, FakeMetrics({XID: []}))
    s.tick()
    stats = s.watcher.stats
    assert stats.runs == {"gpu-capacity-lost": 1, "gpu-idle": 1, "gpu-xid": 1}
    assert set(stats.by_detector) == set(stats.runs)
    assert all(v >= 0 for v in stats.by_detector.values())


def test_with_the_real_prometheus(tmp_path: Path) -> None:
    """The same PromQL through a real Prometheus scraping dcgm-exporter's series."""
    import time

    from tests.fake_exporter import MetricsFixture
    from tests.real_binaries import require
    from tests.real_prometheus import start_prometheus, wait_series

    [binary] = require("prometheus")
    view = Objects()
    view.put(gpu_node("a-0"))
    view.put(running_pod("serve-5c7b9d-aaaaa"))
    with MetricsFixture() as fx:
        fx.set(f'{UTIL}{{gpu="0",UUID="GPU-a0",Hostname="a-0",exported_pod="serve-5c7b9d-aaaaa",'
               'exported_namespace="ml",pod="nvidia-dcgm-exporter-x",namespace="gpu-operator"}',
               0)
        fx.set(f'{UTIL}{{gpu="1",UUID="GPU-a1",Hostname="a-0",pod="busy-0",namespace="ml"}}', 90)
        fx.set(f'{XID}{{gpu="0",UUID="GPU-a0",Hostname="a-0"}}', 79)
        fx.set(f'{XID}{{gpu="1",UUID="GPU-a1",Hostname="a-0"}}', 0)
        proc, url = start_prometheus(binary, tmp_path, {"groups": []}, fx.target, None)
        prom = PrometheusMetrics(PrometheusConfig(url, timeout=5, idle_window="1m"))
        try:
            wait_series(url, XID, timeout=60)
            w = Watcher(view, clock=Clock(T0), metrics=prom)  # type: ignore[arg-type]
            assert w.poll() == 2 and w.metrics_error is None
            [idle] = w.seen["gpu-idle"].values()
            assert (idle.obs.group, idle.obs.gpus) == ("ml/Deployment serve", 1.0)
            assert list(w.seen["gpu-xid"]) == ["gpu/a-0/GPU-a0/xid-79"]
            fx.set(f'{XID}{{gpu="0",UUID="GPU-a0",Hostname="a-0"}}', 0)  # the GPU reset
            deadline = time.monotonic() + 30
            while w.seen["gpu-xid"] and time.monotonic() < deadline:
                time.sleep(0.5)
                w.poll()
            assert w.seen["gpu-xid"] == {} and w.metrics_error is None
        finally:
            prom.close()
            proc.stop()


def test_their_threads_run_nodes_for_idle_gpus_and_doctor_for_xids(store: Store) -> None:
    """The incident threads diagnose what the polled detectors name: ``nodes`` (the idle
    GPUs with their owners) and ``doctor NODE`` (the Xid)."""
    from bot.sentinel.threads import IncidentThreads
    from bot.slack.blocks import Renderer
    from bot.slack.threads import SlackPort
    from tests.test_sentinel_threads import Channels, Slack

    view, clock, slack, channels = Objects(), Clock(T0), Slack(), Channels()
    view.put(gpu_node("a-0"))
    view.put(running_pod("serve-5c7b9d-aaaaa"))
    metrics = FakeMetrics({UTIL: [util("serve-5c7b9d-aaaaa", 0, 0)], XID: [xid("a-0", 0, 79)]})
    book = IncidentBook(store, quiet_for=300.0)
    pub = IncidentThreads(book, SlackPort(slack.post, slack.update), Renderer(), channels,
                          channel="C0INC", routes=[], thresholds=LIMITS)
    s = Sentinel(Watcher(view, clock=clock, metrics=metrics),  # type: ignore[arg-type]
                 book, pub, LIMITS, clock=clock, poll_every=30.0)
    s.tick()
    clock.t += 61
    s.tick()
    assert len(slack.cards()) == 2 and sorted(channels.ran) == ["doctor a-0", "nodes"]
