"""The sentinel's core, without Slack: detectors on objects, observations kept from changes,
incidents in the store (open, update, resolve, re-open within quiet_for, archive), and
publishing that retries what failed."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from bot.sentinel.incidents import LOG, IncidentBook
from bot.sentinel.service import Sentinel
from bot.sentinel.watcher import Watcher
from bot.store import open_store
from bot.store.base import Store
from handlers.sentinel.detectors import REGISTRY
from handlers.view import ViewError

Obj = dict[str, Any]


class Objects:
    """A changeable cluster for the watcher: get and list, nothing else."""

    def __init__(self) -> None:
        self.objs: dict[tuple[str, str, str], Obj] = {}

    def put(self, obj: Obj) -> None:
        meta = obj["metadata"]
        self.objs[(obj["kind"], meta.get("namespace", ""), meta["name"])] = obj

    def drop(self, kind: str, name: str, namespace: str = "") -> None:
        del self.objs[(kind, namespace, name)]

    def get(self, kind: str, name: str, namespace: str | None = None) -> Obj | None:
        return self.objs.get((kind, namespace or "", name))

    def list(self, kind: str, namespace: str | None = None, **_: Any) -> list[Obj]:
        if kind == "ResourceSlice":
            raise ViewError("ResourceSlice: the server does not serve resource.k8s.io")
        return [o for (k, ns, _n), o in self.objs.items()
                if k == kind and (namespace is None or ns == namespace)]


def gpu_node(name: str, alloc: int = 8, pool: str = "a100") -> Obj:
    return {"kind": "Node", "metadata": {"name": name, "labels": {
        "nvidia.com/gpu.count": "8", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
        "cloud.google.com/gke-nodepool": pool}},
        "status": {"capacity": {"nvidia.com/gpu": str(alloc)},
                   "allocatable": {"nvidia.com/gpu": str(alloc)},
                   "conditions": [{"type": "Ready", "status": "True"}]}}


def pending_pod(name: str, job: str = "train", gpus: int = 8,
                created: str = "2026-12-04T00:00:00Z") -> Obj:
    return {"kind": "Pod", "metadata": {
        "name": name, "namespace": "ml", "creationTimestamp": created,
        "ownerReferences": [{"kind": "Job", "name": job, "controller": True}]},
        "spec": {"containers": [{"name": "c", "resources": {
            "limits": {"nvidia.com/gpu": str(gpus)}}}]},
        "status": {"phase": "Pending"}}


def plugin_pod(node: str, reason: str = "CrashLoopBackOff") -> Obj:
    return {"kind": "Pod", "metadata": {
        "name": f"nvidia-device-plugin-daemonset-{node}", "namespace": "gpu-operator",
        "labels": {"app": "nvidia-device-plugin-daemonset"},
        "creationTimestamp": "2026-12-04T00:00:00Z"},
        "spec": {"nodeName": node, "containers": [
            {"name": "nvidia-device-plugin", "image": "nvcr.io/nvidia/k8s-device-plugin:v0.17.1"}]},
        "status": {"phase": "Running", "conditions": [
            {"type": "Ready", "status": "False", "reason": "ContainersNotReady",
             "lastTransitionTime": "2026-12-04T00:00:00Z"}],
            "containerStatuses": [{"name": "nvidia-device-plugin", "ready": False,
                                   "restartCount": 7,
                                   "state": {"waiting": {"reason": reason}}}]}}


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


class Recorder:
    """A publisher that keeps what it was handed and can be made to fail."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, int, float]] = []
        self.down = False

    def publish(self, inc: Any, now: float) -> Mapping[str, Any] | None:
        if self.down:
            raise ConnectionError("slack is down")
        self.seen.append((inc.group, inc.state, inc.members_total, inc.gpus))
        return {"channel": "C1", "ts": "1.0"}


T0 = 1_796_428_800.0  # 2026-12-05: after every object's timestamp here


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return open_store("sqlite", path=str(tmp_path / "state.db"))


def sentinel(view: Objects, store: Store, clock: Clock, pub: Recorder,
             **thresholds: float) -> Sentinel:
    w = Watcher(view, clock=clock)  # type: ignore[arg-type]  # get/list are all it reads
    limits = {"lost_after": 60.0, "plugin_down_after": 60.0, "pending_after": 60.0}
    limits.update(thresholds)
    return Sentinel(w, IncidentBook(store, quiet_for=300.0), pub, limits, clock=clock)


def test_every_detector_has_a_setting_and_a_title() -> None:
    assert {"gpu-capacity-lost", "gpu-stack-down", "gpu-pending"} <= set(REGISTRY)
    for d in REGISTRY.values():
        assert d.title and d.setting.endswith("_after") and d.default > 0


def test_lost_gpus_open_one_incident_per_pool_after_the_threshold(store: Store) -> None:
    view, clock, pub = Objects(), Clock(T0), Recorder()
    for i in range(50):
        view.put(gpu_node(f"a-{i}"))
    view.put(gpu_node("h-0", pool="h100"))
    s = sentinel(view, store, clock, pub)
    assert s.tick().evaluated == 51 and not pub.seen  # the first tick sees every node
    for i in range(50):
        view.put(gpu_node(f"a-{i}", alloc=0))
        s.changed("Node", "", f"a-{i}")
    view.put(gpu_node("h-0", alloc=6, pool="h100"))
    s.changed("Node", "", "h-0")
    r = s.tick()
    assert r.evaluated == 51 and not r.changed  # only the changed nodes, not due yet
    clock.t += 59
    assert not s.tick().changed
    clock.t += 1
    r = s.tick()
    assert r.evaluated == 0  # nothing changed: the timer only
    assert sorted((i.group, i.members_total, i.gpus) for i in r.changed) == [
        ("pool a100", 50, 400.0), ("pool h100", 1, 2.0)]
    assert len(pub.seen) == 2


def test_restored_gpus_resolve_with_duration_and_gpu_hours(store: Store) -> None:
    view, clock, pub = Objects(), Clock(T0), Recorder()
    view.put(gpu_node("a-0", alloc=0))
    s = sentinel(view, store, clock, pub)
    s.tick()
    clock.t += 61
    [opened] = s.tick().changed
    clock.t += 3600
    view.put(gpu_node("a-0"))
    s.changed("Node", "", "a-0")
    [resolved] = s.tick().changed
    assert resolved.key == opened.key and resolved.state == "resolved"
    # 8 GPUs from when they were first seen lost (T0), not from the card (T0 + 61).
    assert resolved.gpu_hours(clock.t) == pytest.approx(8 * 3661 / 3600)
    assert resolved.duration(clock.t) == pytest.approx(3661.0)
    assert [st for _, st, _, _ in pub.seen] == ["open", "resolved"]


def test_flapping_within_quiet_for_reopens_the_same_incident(store: Store) -> None:
    view, clock, pub = Objects(), Clock(T0), Recorder()
    view.put(gpu_node("a-0", alloc=0))
    s = sentinel(view, store, clock, pub)
    s.tick()
    clock.t += 61
    [first] = s.tick().changed
    view.put(gpu_node("a-0"))
    s.changed("Node", "", "a-0")
    clock.t += 10
    s.tick()
    view.put(gpu_node("a-0", alloc=0))
    s.changed("Node", "", "a-0")
    clock.t += 100
    s.tick()
    clock.t += 61  # lasted lost_after again, within quiet_for (300) of the resolution
    s.tick()
    [again] = s.book.all()
    assert again.key == first.key and again.state == "open" and again.reopened == 1
    # Resolved and quiet for longer than quiet_for: archived, and the next one is new.
    view.put(gpu_node("a-0"))
    s.changed("Node", "", "a-0")
    s.tick()
    clock.t += 301
    s.tick()
    assert s.book.all() == [] and len(store.list(LOG)) == 1


def test_pending_gpu_pods_group_by_controller_since_their_creation(store: Store) -> None:
    view, clock, pub = Objects(), Clock(T0), Recorder()
    for i in range(3):
        view.put(pending_pod(f"train-{i}"))
    view.put(pending_pod("serve-0", job="serve", gpus=1, created="2100-01-01T00:00:00Z"))
    view.put({**pending_pod("cpu-0", job="cpu"), "spec": {"containers": [{"name": "c"}]}})
    s = sentinel(view, store, clock, pub)
    r = s.tick()  # created long ago: due at once
    assert [(i.group, i.members_total, i.gpus) for i in r.changed] == [("ml/Job train", 3, 24.0)]
    assert r.changed[0].diagnose() == [("why-pending", "ml/train-0"), ("why-pending", "ml/train-1"),
                                       ("why-pending", "ml/train-2")]


def test_a_crash_looping_plugin_is_the_stack_down_with_the_nodes_gpus(store: Store) -> None:
    view, clock, pub = Objects(), Clock(T0), Recorder()
    view.put(gpu_node("a-0", alloc=0))
    view.put(plugin_pod("a-0"))
    s = sentinel(view, store, clock, pub)
    first = s.tick().changed  # the plugin's Ready condition says since when: due at once
    clock.t += 61
    got = {i.detector: i for i in first + s.tick().changed}
    assert [i.detector for i in first] == ["gpu-stack-down"]
    assert got["gpu-stack-down"].gpus == 8.0
    assert got["gpu-stack-down"].diagnose() == [("doctor", "a-0")]
    assert got["gpu-capacity-lost"].gpus == 8.0


def test_a_slack_outage_posts_later_without_loss(store: Store) -> None:
    view, clock, pub = Objects(), Clock(T0), Recorder()
    view.put(gpu_node("a-0", alloc=0))
    s = sentinel(view, store, clock, pub)
    s.tick()
    pub.down = True
    clock.t += 61
    r = s.tick()
    assert len(r.changed) == 1 and r.failed == 1 and not pub.seen
    view.put(gpu_node("a-0"))
    s.changed("Node", "", "a-0")
    s.tick()  # resolved while Slack is down
    pub.down = False
    r = s.tick()
    assert r.published == 1 and pub.seen == [("pool a100", "resolved", 1, 0.0)]
    assert s.tick().published == 0  # posted once


def test_a_restart_continues_the_open_incident(store: Store, tmp_path: Path) -> None:
    view, clock, pub = Objects(), Clock(T0), Recorder()
    view.put(gpu_node("a-0", alloc=0))
    s = sentinel(view, store, clock, pub)
    s.tick()
    clock.t += 61
    [opened] = s.tick().changed
    view.put(gpu_node("a-1", alloc=4))
    clock.t += 5
    # A new process: a fresh watcher, the same store; a-1 joins the open incident at once.
    s2 = sentinel(view, open_store("sqlite", path=str(tmp_path / "state.db")), clock, pub)
    [updated] = s2.tick().changed
    assert updated.key == opened.key and updated.members_total == 2 and updated.gpus == 12.0


def test_a_deleted_node_leaves_the_incident() -> None:
    view = Objects()
    view.put(gpu_node("a-0", alloc=0))
    w = Watcher(view, clock=Clock(T0))  # type: ignore[arg-type]
    w.scan()
    w.evaluate()
    assert "node/a-0" in w.seen["gpu-capacity-lost"]
    view.drop("Node", "a-0")
    w.changed("Node", "", "a-0")
    w.evaluate()
    assert w.seen["gpu-capacity-lost"] == {}
    assert copy.deepcopy(w.errors) == []
