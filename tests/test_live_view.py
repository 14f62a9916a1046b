"""The live view against a fake API server over real HTTP: the same answers as the snapshot
view, paging and selectors done by the server, each failure as a message an on-call human
can act on, bounded retries, prefetch, and the watch cache."""

from __future__ import annotations

import copy
import gc
import json
import logging
import socket
import subprocess
import sys
import time
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.live import (
    ApiBadResponse,
    ApiForbidden,
    ApiServerError,
    ApiThrottled,
    ApiUnauthorized,
    ApiUnreachable,
    KubeconfigError,
    LiveView,
    RetryPolicy,
    WatchCache,
    open_live_view,
)
from bot.live import view as live_view_module
from bot.live.kinds import KINDS
from bot.live.lean import Leaner
from bot.slack.reads import SharedReads
from bot.snapshot import load_snapshot
from bot.snapshot.view import MUST_BE_CAPTURED, SnapshotView
from handlers.scheduler.nodeinfo import node_info
from handlers.view import Reader, ViewError
from tests.fake_kube import DEFAULT_USER, FakeKube, wait_until

FAST = RetryPolicy(attempts=3, backoff=0.01, max_backoff=0.05, max_retry_after=5.0)
N_PODS = 1100  # three pages of 500
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
T0 = "2025-05-01T10:00:00Z"


# -- a snapshot with every kind the view reads ------------------------------------------------


def _meta(name: str, namespace: str | None = None, **labels: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "uid": f"uid-{namespace or ''}-{name}",
                            "creationTimestamp": T0}
    if namespace:
        meta["namespace"] = namespace
    if labels:
        meta["labels"] = dict(labels)
    return meta


def _pod(i: int) -> dict[str, Any]:
    ns = ("ml-team", "research", "default")[i % 3]
    node = f"gpu-{i % 4}"
    running = {"running": {"startedAt": T0}}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {**_meta(f"job-{i:04d}", ns, app="trainer" if i % 2 else "infer",
                             tier=str(i % 5)),
                     "managedFields": [{"manager": "kubectl", "operation": "Apply"}]},
        "spec": {"nodeName": node, "schedulerName": "default-scheduler",
                 "containers": [{"name": "main", "image": "cuda:12",
                                 "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
        "status": {"phase": "Running" if i % 7 else "Pending",
                   "containerStatuses": [{"name": "main", "restartCount": 0, "state": running,
                                          "ready": True}] if i % 7 else []},
    }


def _event(name: str, ns: str, kind: str, obj: str, reason: str, when: str,
           message: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Event", "metadata": _meta(name, ns),
            "involvedObject": {"kind": kind, "name": obj,
                               "namespace": ns if kind != "Node" else ""},
            "reason": reason, "message": message, "type": "Warning", "count": 1,
            "firstTimestamp": when, "lastTimestamp": when,
            "source": {"component": "default-scheduler"}}


def snapshot_objects() -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = []
    for n in range(4):
        objs.append({"apiVersion": "v1", "kind": "Node",
                     "metadata": _meta(f"gpu-{n}", None, **{"nvidia.com/gpu.present": "true"}),
                     "status": {"capacity": {"nvidia.com/gpu": "8"},
                                "allocatable": {"nvidia.com/gpu": "8"},
                                "conditions": [{"type": "Ready", "status": "True",
                                                "lastHeartbeatTime": T0}]}})
    objs.extend(_pod(i) for i in range(N_PODS))
    crash = {
        "apiVersion": "v1", "kind": "Pod", "metadata": _meta("crashy", "ml-team", app="crashy"),
        "spec": {"nodeName": "gpu-1", "initContainers": [{"name": "setup", "image": "busybox"}],
                 "containers": [{"name": "main", "image": "cuda:12"},
                                {"name": "sidecar", "image": "envoy"}]},
        "status": {"phase": "Running",
                   "initContainerStatuses": [{"name": "setup", "restartCount": 0, "state": {
                       "terminated": {"exitCode": 0, "reason": "Completed"}}}],
                   "containerStatuses": [
                       {"name": "main", "restartCount": 3, "state": {"running": {}},
                        "lastState": {"terminated": {
                            "exitCode": 1, "reason": "Error",
                            "message": "CUDA driver version is insufficient"}}},
                       {"name": "sidecar", "restartCount": 0, "state": {"running": {}}}]},
    }
    objs.append(crash)
    objs += [
        _event("job-0001.a", "research", "Pod", "job-0001", "FailedScheduling",
               "2025-05-01T10:05:00Z", "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."),
        _event("job-0001.b", "research", "Pod", "job-0001", "FailedScheduling",
               "2025-05-01T10:01:00Z", "0/4 nodes are available."),
        _event("crashy.a", "ml-team", "Pod", "crashy", "BackOff", "2025-05-01T10:03:00Z",
               "Back-off restarting failed container main"),
        _event("gpu-1.a", "default", "Node", "gpu-1", "NodeNotReady", "2025-05-01T09:00:00Z",
               "Node gpu-1 status is now: NodeNotReady"),
        {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": _meta("crashy.b",
                                                                              "ml-team"),
         "regarding": {"kind": "Pod", "name": "crashy", "namespace": "ml-team"},
         "reason": "Pulled", "note": "Successfully pulled image", "type": "Normal",
         "eventTime": "2025-05-01T10:02:00.000000Z", "reportingController": "kubelet",
         "reportingInstance": "gpu-1", "action": "Pull"},
    ]
    for ns in ("ml-team", "research", "default", "gpu-operator"):
        objs.append({"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(ns, None),
                     "status": {"phase": "Active"}})
    objs += [
        {"apiVersion": "apps/v1", "kind": "DaemonSet",
         "metadata": {**_meta("nvidia-device-plugin-daemonset", "gpu-operator"),
                      "annotations": {LAST_APPLIED: '{"big": "' + "x" * 500 + '"}',
                                      "keep": "me"}},
         "spec": {"selector": {"matchLabels": {"app": "nvidia-device-plugin-daemonset"}},
                  "template": {"metadata": {"labels": {"app": "nvidia-device-plugin-daemonset"}},
                               "spec": {"containers": [{"name": "p", "image": "plugin"}]}}},
         "status": {"desiredNumberScheduled": 4, "numberReady": 3}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": _meta("web", "default"),
         "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                  "template": {"metadata": {"labels": {"app": "web"}},
                               "spec": {"containers": [{"name": "w", "image": "nginx"}]}}}},
        {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": _meta("db", "research"),
         "spec": {"replicas": 1, "serviceName": "db", "selector": {"matchLabels": {"a": "db"}},
                  "template": {"metadata": {"labels": {"a": "db"}},
                               "spec": {"containers": [{"name": "d", "image": "pg"}]}}}},
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": _meta("web-1", "default"),
         "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                  "template": {"metadata": {"labels": {"app": "web"}},
                               "spec": {"containers": [{"name": "w", "image": "nginx"}]}}}},
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": _meta("train", "ml-team"),
         "spec": {"template": {"spec": {"restartPolicy": "Never",
                                        "containers": [{"name": "t", "image": "cuda"}]}}}},
        {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": _meta("nightly", "ml-team"),
         "spec": {"schedule": "0 1 * * *", "jobTemplate": {"spec": {"template": {"spec": {
             "restartPolicy": "Never", "containers": [{"name": "n", "image": "cuda"}]}}}}}},
        {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": _meta("gpu-quota", "ml-team"),
         "spec": {"hard": {"requests.nvidia.com/gpu": "4"}},
         "status": {"hard": {"requests.nvidia.com/gpu": "4"},
                    "used": {"requests.nvidia.com/gpu": "4"}}},
        {"apiVersion": "v1", "kind": "LimitRange", "metadata": _meta("limits", "ml-team"),
         "spec": {"limits": [{"type": "Container", "max": {"nvidia.com/gpu": "2"}}]}},
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
         "metadata": _meta("high", None), "value": 1000},
        {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
         "metadata": _meta("nvidia", None), "handler": "nvidia"},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta("time-slicing",
                                                                   "gpu-operator"),
         "data": {"any": "version: v1\nsharing:\n  timeSlicing:\n    replicas: 4\n"}},
        {"apiVersion": "apps/v1", "kind": "ControllerRevision",
         "metadata": _meta("nvdp-6d9f7b8c5", "kube-system"), "revision": 1,
         "data": {"spec": {"template": {"spec": {"containers": [{"name": "p",
                                                                  "image": "plugin:1"}]}}}}},
        {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": _meta("pv-1", None),
         "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"]}},
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
         "metadata": _meta("data", "ml-team"),
         "spec": {"accessModes": ["ReadWriteOnce"],
                  "resources": {"requests": {"storage": "10Gi"}}},
         "status": {"phase": "Pending"}},
        {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
         "metadata": _meta("gang", "ml-team"), "spec": {"minMember": 4},
         "status": {"phase": "Pending"}},
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload",
         "metadata": _meta("job-train", "ml-team"), "spec": {"queueName": "gpu"},
         "status": {"conditions": [{"type": "QuotaReserved", "status": "False"}]}},
        {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy",
         "metadata": _meta("cluster-policy", None),
         "spec": {"devicePlugin": {"config": {"name": "time-slicing"}}}},
    ]
    return objs


LOGS = {
    ("ml-team", "crashy", "setup"): "setup done\n",
    ("ml-team", "crashy", "main"): "starting\nCUDA driver version is insufficient\n",
    ("ml-team", "crashy", "sidecar"): "envoy ready\n",
    ("research", "job-0001", "main"): "epoch 1\nepoch 2\n",
}


def write_snapshot(path: Path) -> Path:
    blocks = []
    for (ns, pod, container), text in LOGS.items():
        blocks.append(f"==== START logs for container {container} of pod {ns}/{pod} ====\n"
                      f"{text}==== END logs for container {container} of pod {ns}/{pod} ====\n")
    doc = json.dumps({"kind": "List", "apiVersion": "v1", "items": snapshot_objects()})
    path.write_text(doc + "\n" + "".join(blocks))
    return path


# -- fixtures ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def snapshot_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_snapshot(tmp_path_factory.mktemp("live") / "cluster.txt")


@pytest.fixture(scope="module")
def snap(snapshot_path: Path) -> SnapshotView:
    return load_snapshot(snapshot_path)


@pytest.fixture(scope="module")
def server(snapshot_path: Path) -> Iterator[FakeKube]:
    with FakeKube(snapshot_path, daemonset_delay=0.1) as fk:
        yield fk


def settled(fk: FakeKube) -> FakeKube:
    """The fake logs a request after answering it: wait for the log to stop growing."""
    seen = -1
    while len(fk.requests) != seen:
        seen = len(fk.requests)
        time.sleep(0.03)
    return fk


@pytest.fixture
def fk(server: FakeKube) -> Iterator[FakeKube]:
    server.faults.clear()
    settled(server).requests.clear()
    yield server
    server.faults.clear()


@pytest.fixture
def kubeconfig(fk: FakeKube, tmp_path: Path) -> Path:
    return fk.write_kubeconfig(tmp_path / "kubeconfig", context="fake")


@pytest.fixture
def view(kubeconfig: Path) -> Iterator[LiveView]:
    v = open_live_view(str(kubeconfig), timeout=5.0, retry=FAST)
    yield v
    v.close()


def _list_requests(fk: FakeKube, verb: str = "list") -> list[Any]:
    return [r for r in settled(fk).requests if r.verb == verb]


# -- comparing with the snapshot view ------------------------------------------------------------

_SERVER_META = ("resourceVersion", "generation", "managedFields")


def comparable(obj: dict[str, Any]) -> dict[str, Any]:
    """The object without what an API server adds (resourceVersion, generation)."""
    out = dict(obj)
    out["metadata"] = {k: v for k, v in obj["metadata"].items() if k not in _SERVER_META}
    if obj["kind"] == "Event":  # the fake stores events.k8s.io events in core/v1 shape
        return {k: out.get(k) for k in ("kind", "metadata", "involvedObject", "reason",
                                        "message", "type", "count", "lastTimestamp")}
    return out


def holds(got: Any, want: Any) -> bool:
    """``got`` has everything ``want`` has; an API server adds defaults (``status: {}``,
    ``nodeInfo``, zero counters) that a snapshot written by hand lacks."""
    if isinstance(want, dict):
        return isinstance(got, dict) and all(k in got and holds(got[k], v)
                                             for k, v in want.items())
    if isinstance(want, list):
        return (isinstance(got, list) and len(got) == len(want)
                and all(holds(g, w) for g, w in zip(got, want, strict=True)))
    return bool(got == want)


def by_key(objs: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(o["metadata"].get("namespace", ""), o["metadata"]["name"]): comparable(o)
            for o in objs}


def lean_copies(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The snapshot's objects as a list read from the server gives them: lean, like the
    watch cache's (a GET gives the full object)."""
    leaner = Leaner()
    return [leaner.lean(o["kind"], copy.deepcopy(o)) for o in objs]


def assert_same(got: list[dict[str, Any]], want: list[dict[str, Any]]) -> None:
    """The same objects (by namespace/name), each holding what the snapshot's holds once
    leaned."""
    g, w = by_key(got), by_key(lean_copies(want))
    assert sorted(g) == sorted(w)
    bad = [k for k in w if not holds(g[k], w[k])]
    assert not bad, (bad[:3], g[bad[0]], w[bad[0]])


# -- opening a view -----------------------------------------------------------------------------


def test_source_names_the_context_and_server(fk: FakeKube, kubeconfig: Path) -> None:
    with open_live_view(str(kubeconfig)) as v:
        assert v.source == f"context fake ({fk.url})"
        assert v.server == fk.url


def test_kubeconfig_from_environment_and_context_choice(
    fk: FakeKube, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = fk.write_kubeconfig(tmp_path / "kc", context="prod")
    monkeypatch.setenv("KUBECONFIG", str(path))
    with open_live_view(context="prod") as v:
        assert v.source.startswith("context prod (")
        assert v.get("Node", "gpu-0") is not None
    with pytest.raises(KubeconfigError, match=r'context "staging" is not in .*prod'):
        open_live_view(context="staging")


def test_missing_kubeconfig_is_a_view_error(tmp_path: Path) -> None:
    with pytest.raises(KubeconfigError, match=r"no kubeconfig at .*nothing-here"):
        open_live_view(str(tmp_path / "nothing-here"))


def test_in_cluster_config_is_used_in_a_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    # No service account is mounted on a test machine: the in-cluster path must say so.
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    if Path("/var/run/secrets/kubernetes.io/serviceaccount/token").exists():
        pytest.skip("running inside a pod")
    with pytest.raises(KubeconfigError, match="in-cluster service account"):
        open_live_view()


def test_importing_bot_live_does_not_import_kubernetes() -> None:
    code = ("import sys, bot.live, bot.live.view, bot.live.cache; "
            "print(any(m.split('.')[0] == 'kubernetes' for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).parents[1])
    assert out.stdout.strip() == "False"


# -- the same answers as the snapshot ------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(set(KINDS) - {"NodeFeature"}))
def test_list_and_get_equal_the_snapshot_view(
    view: LiveView, snap: SnapshotView, kind: str
) -> None:
    live = view.list(kind)
    if kind in MUST_BE_CAPTURED and kind not in snap.kinds:
        # The snapshot says "not captured"; the server, serving the kind, has none.
        with pytest.raises(ViewError):
            snap.list(kind)
        assert live == []
        return
    want = snap.list(kind)
    assert all(o["kind"] == kind and o["apiVersion"] for o in live)
    if kind == "Namespace":  # the server also has kube-system & co.
        live = [o for o in live if o["metadata"]["name"] in {w["metadata"]["name"]
                                                             for w in want}]
    assert_same(live, want)
    for obj in want[:5]:
        meta = obj["metadata"]
        one = view.get(kind, meta["name"], meta.get("namespace"))
        assert one is not None
        assert holds(comparable(one), comparable(obj))
    assert view.get(kind, "no-such-object", "ml-team") is None


def test_listed_objects_are_lean_and_share_across_lists_a_get_is_whole(
    fresh: FakeKube, tmp_path: Path
) -> None:
    # A cold diagnosis lists the pods of each GPU node: full objects made most of its peak.
    for name, node in (("rep-a", "gpu-node-1"), ("rep-b", "gpu-node-2")):
        fresh.store.put({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "ml-team", "uid": f"uid-{name}",
                         "labels": {"app": "rep"}, "managedFields": [{"manager": "kubelet"}]},
            "spec": {"nodeName": node, "containers": [{
                "name": "c", "image": "cuda:12.4",
                "resources": {"limits": {"nvidia.com/gpu": "1"}},
                "livenessProbe": {"exec": {"command": ["true"]}}}]},
            "status": {"phase": "Running", "podIP": "10.0.0.9"}})
    view = open_live_view(str(fresh.write_kubeconfig(tmp_path / "kc")), timeout=5.0,
                          retry=FAST)
    try:
        _lean_and_whole(view)
    finally:
        view.close()


def _lean_and_whole(view: LiveView) -> None:
    a, = view.list("Pod", "ml-team", field_selector="spec.nodeName=gpu-node-1,"
                   "metadata.name=rep-a")
    b, = view.list("Pod", "ml-team", field_selector="spec.nodeName=gpu-node-2,"
                   "metadata.name=rep-b")
    assert a["spec"]["containers"] is b["spec"]["containers"]  # two lists, one copy
    assert a["metadata"]["labels"] is b["metadata"]["labels"]
    assert "livenessProbe" not in a["spec"]["containers"][0] and "podIP" not in a["status"]
    assert a["spec"]["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": "1"}}
    whole = view.get("Pod", "rep-a", "ml-team")  # the rare reader of a dropped field
    assert whole is not None and "livenessProbe" in whole["spec"]["containers"][0]
    assert whole["status"]["podIP"] == "10.0.0.9"


def test_namespaced_list_and_get_default_namespace(view: LiveView, snap: SnapshotView) -> None:
    assert_same(view.list("Pod", "research"), snap.list("Pod", "research"))
    assert view.list("Pod", "nowhere") == []
    got = view.get("Pod", "job-0002")  # no namespace: "default", as kubectl does
    want = snap.get("Pod", "job-0002")
    assert got is not None and want is not None
    assert holds(comparable(got), comparable(want))


def test_events_equal_the_snapshot_view(view: LiveView, snap: SnapshotView) -> None:
    for kind, name, ns in [("Pod", "job-0001", "research"), ("Pod", "crashy", "ml-team"),
                           ("Node", "gpu-1", None), ("Pod", "job-0001", None),
                           ("Pod", "job-0001", "ml-team"), ("Pod", "nobody", "ml-team")]:
        got = [comparable(e) for e in view.events(kind, name, ns)]
        want = [comparable(e) for e in snap.events(kind, name, ns)]
        assert got == want, (kind, name, ns)
    crashy = view.events("Pod", "crashy", "ml-team")
    assert [e["reason"] for e in crashy] == ["Pulled", "BackOff"]  # oldest first
    assert crashy[0]["message"] == "Successfully pulled image"  # events.k8s.io, normalised
    assert crashy[0]["source"]["component"] == "kubelet"


def test_events_ask_the_server_with_a_field_selector(view: LiveView, fk: FakeKube) -> None:
    view.events("Pod", "job-0001", "research")
    (req,) = _list_requests(fk)
    assert req.path.startswith("/api/v1/namespaces/research/events?")
    assert req.query["fieldSelector"] == "involvedObject.kind=Pod,involvedObject.name=job-0001"
    settled(fk).requests.clear()
    view.events("Node", "gpu-1")
    (req,) = _list_requests(fk)
    assert req.path.startswith("/api/v1/events?")


def _log_asks(fk: FakeKube) -> list[tuple[str, str]]:
    logs = [r for r in settled(fk).requests if r.resource == "pods/log"]
    assert all(r.query["tailLines"] == "200" for r in logs)
    fk.requests.clear()
    return sorted((r.query["container"], r.query.get("previous", "")) for r in logs)


def test_logs_equal_the_snapshot_view(view: LiveView, snap: SnapshotView, fk: FakeKube) -> None:
    settled(fk).requests.clear()
    view.logs("ml-team", "crashy")
    # main restarted: its previous instance is read too; the others only once.
    assert _log_asks(fk) == [("main", ""), ("main", "true"), ("setup", ""), ("sidecar", "")]
    for ns, pod, container in [("research", "job-0001", None), ("research", "job-0001", "main"),
                               ("ml-team", "crashy", "main"), ("ml-team", "crashy", None),
                               ("ml-team", "crashy", "sidecar")]:
        assert view.logs(ns, pod, container) == snap.logs(ns, pod, container), (pod, container)
    assert view.logs("ml-team", "no-such-pod") is None


def test_a_finished_instance_log_is_read_once(view: LiveView, fk: FakeKube) -> None:
    # A crash-looping plugin is diagnosed again and again: a finished instance's log does
    # not change; a running one's grows, and is read again after live_log_ttl.
    view.live_log_ttl = 0.5
    first = view.logs("ml-team", "crashy")
    settled(fk).requests.clear()
    assert view.logs("ml-team", "crashy") == first
    assert _log_asks(fk) == []  # nothing has restarted, the running logs are fresh enough
    time.sleep(0.6)
    assert view.logs("ml-team", "crashy") == first
    assert _log_asks(fk) == [("main", ""), ("sidecar", "")]  # running: asked again
    pod = fk.store.find("Pod", "crashy", "ml-team")
    assert pod is not None
    main = next(cs for cs in pod["status"]["containerStatuses"] if cs["name"] == "main")
    main["restartCount"] += 1
    fk.store.put(pod)
    view.logs("ml-team", "crashy")
    # a new instance: its log and the one before it are read at once; sidecar's is fresh
    assert _log_asks(fk) == [("main", ""), ("main", "true")]


def test_an_empty_running_log_is_kept_too(view: LiveView, fk: FakeKube) -> None:
    # Many containers log nothing for hours: not asked again on every diagnosis.
    fk.store.set_logs("ml-team", "crashy", "sidecar", "")
    fk.store.set_logs("ml-team", "crashy", "main", "", previous=True)  # finished, empty
    try:
        assert view.logs("ml-team", "crashy", "sidecar") is None
        assert _log_asks(fk) == [("sidecar", "")]
        assert view.logs("ml-team", "crashy", "sidecar") is None
        view.logs("ml-team", "crashy", "main")
        assert _log_asks(fk) == [("main", ""), ("main", "true")]
        view.logs("ml-team", "crashy", "main")
        assert _log_asks(fk) == []
    finally:
        fk.store._logs.clear()


def test_kept_logs_are_bounded_empty_ones_too(view: LiveView,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    # A bot that runs for weeks reads the empty logs of thousands of pod instances.
    monkeypatch.setattr(live_view_module, "_LOGS_KEPT_CHARS",
                        3 * live_view_module._LOG_ENTRY_CHARS)
    for i in range(10):
        view._keep_log(("uid", f"c{i}", False, 0, "t", "running"), "", running=True, now=0.0)
    assert len(view._logs) == 3
    assert set(view._live_until) == set(view._logs)


def test_running_logs_are_not_kept_with_no_ttl(view: LiveView, fk: FakeKube) -> None:
    view.live_log_ttl = 0
    view.logs("ml-team", "crashy")
    settled(fk).requests.clear()
    view.logs("ml-team", "crashy")
    assert _log_asks(fk) == [("main", ""), ("sidecar", "")]


def test_logs_put_the_previous_instance_first(view: LiveView, fk: FakeKube) -> None:
    fk.store.set_logs("ml-team", "crashy", "main", "old run: Xid 79\n", previous=True)
    fk.store.set_logs("ml-team", "crashy", "main", "new run\n")
    try:
        assert view.logs("ml-team", "crashy", "main") == (
            "old run: Xid 79\nnew run\nCUDA driver version is insufficient")
    finally:
        fk.store._logs.clear()


def test_a_pod_that_never_ran_has_no_log_and_no_log_request(view: LiveView,
                                                             fk: FakeKube) -> None:
    assert view.logs("default", "job-0000") is None  # Pending, no container status
    assert [r for r in settled(fk).requests if r.resource == "pods/log"] == []


def test_missing_crd_lists_empty_and_is_remembered(view: LiveView, fk: FakeKube) -> None:
    # The fake serves no nfd.k8s-sigs.io group: like a cluster without Node Feature Discovery.
    assert view.list("NodeFeature") == []
    assert view.get("NodeFeature", "gpu-0", "default") is None
    assert view.list("NodeFeature", "ml-team") == []
    assert len([r for r in settled(fk).requests if "nfd.k8s-sigs.io" in r.path]) == 1
    assert view.missing_kinds == ["NodeFeature"]


# -- paging and selectors go to the server -------------------------------------------------------


def test_lists_are_paged_by_500(view: LiveView, fk: FakeKube) -> None:
    pods = view.list("Pod")
    assert len(pods) == N_PODS + 1
    reqs = _list_requests(fk)
    assert [r.query.get("limit") for r in reqs] == ["500", "500", "500"]
    assert [bool(r.query.get("continue")) for r in reqs] == [False, True, True]
    assert len({(p["metadata"]["namespace"], p["metadata"]["name"]) for p in pods}) == len(pods)


def test_small_pages(kubeconfig: Path, fk: FakeKube) -> None:
    with open_live_view(str(kubeconfig), retry=FAST) as v:
        v.page_size = 7
        assert len(v.list("Pod", "ml-team", label_selector="app=trainer")) == len(
            [i for i in range(N_PODS) if i % 3 == 0 and i % 2])
    assert len(_list_requests(fk)) == 27  # ceil(184 / 7)


def test_selectors_are_passed_to_the_server(view: LiveView, snap: SnapshotView,
                                            fk: FakeKube) -> None:
    cases = [
        ("Pod", None, "app=trainer,tier in (1,2)", None),
        ("Pod", "ml-team", None, "spec.nodeName=gpu-2"),
        ("Pod", None, "app!=trainer", "status.phase!=Running"),
        ("Node", None, "nvidia.com/gpu.present", None),
    ]
    for kind, ns, labels, fields in cases:
        settled(fk).requests.clear()
        got = view.list(kind, ns, label_selector=labels, field_selector=fields)
        want = snap.list(kind, ns, label_selector=labels, field_selector=fields)
        assert want
        assert_same(got, want)
        (req,) = _list_requests(fk)
        assert req.query.get("labelSelector") == labels
        assert req.query.get("fieldSelector") == fields


# -- failures ------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_unreachable_server_is_one_clear_message(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{_free_port()}"
    path = tmp_path / "kc"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "gone",
        "clusters": [{"name": "c", "cluster": {"server": url}}],
        "users": [{"name": "u", "user": {"token": "t0ps3cret"}}],
        "contexts": [{"name": "gone", "context": {"cluster": "c", "user": "u"}}]}))
    with open_live_view(str(path), retry=FAST) as v:
        reader = Reader(v)
        for kind in ("Node", "Pod", "Event", "DaemonSet", "ResourceQuota"):
            # Nothing else can be read either: the Reader lets this through, so the user
            # gets one clear message instead of a diagnosis built on nothing.
            with pytest.raises(ApiUnreachable) as info:
                reader.list(kind)
            err = info.value
            assert err.server == url and err.why == "connection refused"
            assert "t0ps3cret" not in str(err)
        assert v.stats["requests"] == 1  # refused once, then remembered


def test_timeout_names_the_server_and_the_wait(kubeconfig: Path, fk: FakeKube) -> None:
    fk.faults.latency(1.0, resource="nodes")
    with open_live_view(str(kubeconfig), timeout=0.3, retry=FAST) as v:
        started = time.monotonic()
        with pytest.raises(ApiUnreachable) as info:
            v.list("Node")
        assert time.monotonic() - started < 0.9
    wait_until(lambda: fk.requests.find(path_prefix="/api/v1/nodes"))  # the late answer
    assert info.value.server == fk.url
    assert info.value.why == "timed out after 0.3s"
    assert str(info.value) == f"cannot reach the Kubernetes API at {fk.url}: timed out after 0.3s"
    assert info.value.__cause__ is not None  # the urllib3 error, chained


def test_rejected_credentials(tmp_path: Path, snapshot_path: Path) -> None:
    with FakeKube(snapshot_path, token="right-token") as fk:
        good = fk.write_kubeconfig(tmp_path / "good")
        bad = tmp_path / "bad"
        bad.write_text(good.read_text().replace("right-token", "wrong-token"))
        with open_live_view(str(good)) as v:
            assert v.get("Node", "gpu-0") is not None
        with open_live_view(str(bad), retry=FAST) as v, pytest.raises(ApiUnauthorized) as info:
            v.list("Pod", "ml-team")
    err = info.value
    assert err.status == 401 and err.server == fk.url
    assert "401" in str(err) and "credentials" in str(err)
    assert "wrong-token" not in str(err) and "right-token" not in str(err)


def test_forbidden_names_verb_resource_namespace_and_the_rule(view: LiveView,
                                                              fk: FakeKube) -> None:
    fk.faults.forbid("pods", verb="list", namespace="ml-team")
    with pytest.raises(ApiForbidden) as info:
        view.list("Pod", "ml-team")
    err = info.value
    assert (err.verb, err.resource, err.namespace, err.status) == ("list", "pods", "ml-team", 403)
    assert err.rule == {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}
    assert err.user == DEFAULT_USER
    text = str(err)
    assert text.startswith('forbidden: cannot list pods in namespace "ml-team" (403)')
    assert 'rules: [{apiGroups: [""], resources: ["pods"], verbs: ["list"]}]' in text
    assert "Role in ml-team" in text
    assert len(_list_requests(fk)) == 1  # 403 is not retried


def test_a_refused_list_is_remembered_for_a_while(view: LiveView, fk: FakeKube) -> None:
    # A bot whose RBAC leaves out a kind must not be refused again on every diagnosis.
    fault = fk.faults.forbid("resourcequotas", verb="list", namespace="ml-team")
    view.refused_ttl = 0.5
    for _ in range(3):
        with pytest.raises(ApiForbidden) as info:
            view.list("ResourceQuota", "ml-team")
        assert info.value.namespace == "ml-team"
    assert len(_list_requests(fk)) == 1
    view.list("ResourceQuota", "default")  # another namespace is asked
    assert len(_list_requests(fk)) == 2
    fk.faults.remove(fault)  # RBAC granted: seen once the memory expires
    time.sleep(0.6)
    assert [q["metadata"]["name"] for q in view.list("ResourceQuota", "ml-team")] == [
        "gpu-quota"]
    assert len(_list_requests(fk)) == 3


def test_forbidden_cluster_scope_asks_for_a_cluster_role(view: LiveView, fk: FakeKube) -> None:
    fk.faults.forbid("daemonsets", verb="list")
    fk.faults.forbid("clusterpolicies", verb="get")
    with pytest.raises(ApiForbidden) as info:
        view.list("DaemonSet")
    assert info.value.rule["apiGroups"] == ["apps"]
    assert "cannot list daemonsets in all namespaces" in str(info.value)
    assert "ClusterRole" in str(info.value)
    with pytest.raises(ApiForbidden) as info:
        view.get("ClusterPolicy", "cluster-policy")
    assert info.value.rule == {"apiGroups": ["nvidia.com"], "resources": ["clusterpolicies"],
                               "verbs": ["get"]}
    assert 'cannot get clusterpolicies "cluster-policy" (403)' in str(info.value)


def test_forbidden_logs_name_the_subresource(view: LiveView, fk: FakeKube) -> None:
    fk.faults.forbid("pods/log", namespace="ml-team")
    with pytest.raises(ApiForbidden) as info:
        view.logs("ml-team", "crashy", "main")
    assert info.value.rule["resources"] == ["pods/log"]
    assert info.value.verb == "get"


def test_429_waits_for_retry_after(view: LiveView, fk: FakeKube) -> None:
    fk.faults.throttle("nodes", retry_after=1, times=1)
    started = time.monotonic()
    assert len(view.list("Node")) == 4
    elapsed = time.monotonic() - started
    assert 0.9 <= elapsed < 2.0
    assert len(_list_requests(fk)) == 2
    assert view.stats["retries"] == 1


def test_429_attempts_are_bounded(kubeconfig: Path, fk: FakeKube) -> None:
    fk.faults.throttle("nodes", retry_after=1)
    policy = RetryPolicy(attempts=3, backoff=0.01, max_retry_after=1.5)
    with open_live_view(str(kubeconfig), retry=policy) as v:
        started = time.monotonic()
        with pytest.raises(ApiThrottled) as info:
            v.list("Node")
        assert time.monotonic() - started < 3.0
    assert info.value.status == 429 and info.value.attempts == 3
    assert info.value.server == fk.url
    assert len(_list_requests(fk)) == 3


def test_a_retry_after_longer_than_the_cap_fails_at_once_and_is_remembered(
        kubeconfig: Path, fk: FakeKube) -> None:
    fk.faults.throttle("nodes", retry_after=60)
    policy = RetryPolicy(attempts=3, backoff=0.01, max_retry_after=0.1)
    with open_live_view(str(kubeconfig), retry=policy) as v:
        started = time.monotonic()
        with pytest.raises(ApiThrottled) as info:
            v.list("Node")
        with pytest.raises(ApiThrottled):
            v.list("Pod")  # the server asked for a minute: not asked again meanwhile
        assert time.monotonic() - started < 1.0
    assert "wait 60s" in str(info.value) and info.value.server == fk.url
    assert len(_list_requests(fk)) == 1


def test_5xx_is_retried_with_backoff(view: LiveView, fk: FakeKube) -> None:
    fk.faults.error("nodes", code=503, times=2)
    assert len(view.list("Node")) == 4
    assert len(_list_requests(fk)) == 3


def test_5xx_gives_up_after_the_attempts(view: LiveView, fk: FakeKube) -> None:
    fk.faults.error("nodes", code=500, message="etcdserver: request timed out")
    with pytest.raises(ApiServerError) as info:
        view.list("Node")
    err = info.value
    assert (err.status, err.attempts, err.server) == (500, 3, fk.url)
    assert "etcdserver: request timed out" in str(err)
    assert len(_list_requests(fk)) == 3


def test_dropped_connections_are_retried_then_reported(view: LiveView, fk: FakeKube) -> None:
    import urllib3

    fk.faults.drop("nodes", times=2)
    assert len(view.list("Node")) == 4
    fk.faults.drop("pods", verb="list")
    with pytest.raises(ApiServerError) as info:
        view.list("Pod", "ml-team")
    assert "dropped the connection" in str(info.value)
    assert info.value.server == fk.url and info.value.status is None
    assert isinstance(info.value.__cause__, urllib3.exceptions.ProtocolError)


def test_a_remembered_refusal_keeps_no_reader_alive(view: LiveView, fk: FakeKube) -> None:
    # Raised again and again, one kept exception gathered the frames of each raise, and with
    # them the Reader of each diagnosis: garbage that only a full collection could free.
    fk.faults.forbid("resourcequotas", verb="list", namespace="ml-team")
    gc.disable()
    try:
        for _ in range(3):  # asked, then refused from memory
            reader = Reader(view)
            assert reader.list("ResourceQuota", "ml-team") == [] and reader.unchecked
            gone = weakref.ref(reader)
            del reader
            assert gone() is None, [type(r).__name__ for r in gc.get_referrers(gone())]
    finally:
        gc.enable()
    assert len(_list_requests(fk)) == 1


def test_reader_turns_failures_into_unchecked_lines(view: LiveView, fk: FakeKube) -> None:
    fk.faults.forbid("resourcequotas", verb="list", namespace="ml-team")
    reader = Reader(view)
    assert reader.list("ResourceQuota", "ml-team") == []
    assert not reader.readable("ResourceQuota")
    assert reader.unchecked and 'cannot list resourcequotas in namespace "ml-team"' in (
        reader.unchecked[0])
    assert reader.list("Node") != []


def test_an_unknown_kind_is_a_view_error(view: LiveView) -> None:
    with pytest.raises(ViewError, match="Secret"):
        view.list("Secret")


# -- prefetch and counters -----------------------------------------------------------------------


def test_prefetch_runs_lists_concurrently_and_next_list_is_free(kubeconfig: Path,
                                                                fk: FakeKube) -> None:
    fk.faults.latency(0.3, verb="list")
    wanted: list[tuple[str, str | None, str | None, str | None]] = [
        ("Node", None, None, None), ("Pod", "ml-team", None, None),
        ("DaemonSet", None, None, None), ("ResourceQuota", "ml-team", None, None),
        ("LimitRange", "ml-team", None, None), ("PriorityClass", None, None, None),
        ("Event", "ml-team", None, "involvedObject.name=crashy"),
    ]
    with open_live_view(str(kubeconfig), max_workers=8) as v:
        started = time.monotonic()
        assert v.prefetch(wanted) == len(wanted)
        assert v.prefetch(wanted) == 0  # already in flight
        results = [v.list(k, ns, label_selector=ls, field_selector=fs)
                   for k, ns, ls, fs in wanted]
        elapsed = time.monotonic() - started
        assert elapsed < 0.3 * len(wanted) / 2  # sequential would take 2.1 s
        assert all(results[:6]) and len(results[6]) == 2
        assert len(_list_requests(fk)) == len(wanted)
        # Taken once: the next list asks the server again.
        fk.faults.clear()
        v.list("Node")
        assert len(_list_requests(fk)) == len(wanted) + 1


def test_prefetch_errors_surface_from_list(view: LiveView, fk: FakeKube) -> None:
    fk.faults.forbid("nodes", verb="list")
    view.prefetch([("Node", None, None, None)])
    with pytest.raises(ApiForbidden):
        view.list("Node")


def test_stats_count_requests_and_bytes(view: LiveView, fk: FakeKube) -> None:
    view.list("Pod")
    view.get("Node", "gpu-0")
    stats = view.stats
    assert stats["requests"] == 4
    assert stats["by_path"]["/api/v1/pods"]["requests"] == 3
    assert stats["by_path"]["/api/v1/nodes/gpu-0"]["requests"] == 1
    assert stats["bytes"] == sum(p["bytes"] for p in stats["by_path"].values()) > 100_000


# -- the watch cache -----------------------------------------------------------------------------


@pytest.fixture
def fresh(snapshot_path: Path) -> Iterator[FakeKube]:
    """A server of its own, for tests that change objects."""
    with FakeKube(snapshot_path, daemonset_delay=0.1) as fk:
        yield fk


def _cache(fk: FakeKube, **options: Any) -> tuple[LiveView, WatchCache]:
    path = fk.write_kubeconfig(Path(fk.snapshot or ".").parent / f"kc-{fk.port}")
    view = open_live_view(str(path), retry=FAST)
    options.setdefault("backoff", 0.02)
    cache = view.watch(("Node", "Pod", "Event", "DaemonSet"), **options)
    assert cache.wait_synced(10)
    return view, cache


@pytest.fixture
def warm(fresh: FakeKube) -> Iterator[tuple[LiveView, WatchCache]]:
    """A live view on ``fresh`` with a synced watch cache, stopped afterwards."""
    view, cache = _cache(fresh)
    try:
        yield view, cache
    finally:
        cache.stop()
        view.close()


def test_watch_cache_syncs_and_serves_warm_reads_without_requests(
    fresh: FakeKube, snap: SnapshotView
) -> None:
    fk = fresh
    view, cache = _cache(fresh)
    try:
        settled(fk).requests.clear()
        assert_same(view.list("Pod"), snap.list("Pod"))
        assert_same(view.list("Pod", "ml-team", label_selector="app=trainer",
                              field_selector="spec.nodeName=gpu-2"),
                    snap.list("Pod", "ml-team", label_selector="app=trainer",
                              field_selector="spec.nodeName=gpu-2"))
        # the cache keeps the lean projection (bot/live/lean.py) of what the server holds
        assert holds(comparable(view.get("Node", "gpu-1") or {}), comparable(
            Leaner().lean("Node", copy.deepcopy(snap.get("Node", "gpu-1") or {}))))
        assert [comparable(e) for e in view.events("Pod", "crashy", "ml-team")] == [
            comparable(e) for e in snap.events("Pod", "crashy", "ml-team")]
        assert view.get("Pod", "nobody", "ml-team") is None
        assert [r for r in settled(fk).requests if r.verb != "watch"] == []
        assert view.stats["cache_reads"] == 5
        # A kind the cache does not hold, or a field it cannot match, goes to the server.
        view.list("ResourceQuota", "ml-team")
        with pytest.raises(ApiBadResponse) as info:  # the server's verdict on the field
            view.list("Pod", field_selector="spec.serviceAccountName=default")
        assert info.value.status == 400
        assert len(_list_requests(fk)) == 2
        stats = cache.stats()
        assert stats["kinds"]["Pod"]["objects"] == N_PODS + 1
        assert stats["kinds"]["Pod"]["synced"] is True
        assert stats["bytes"] == sum(k["bytes"] for k in stats["kinds"].values()) > 0
    finally:
        cache.stop()
        view.close()


def test_label_selected_reads_come_from_label_indexes_that_follow_changes(
    fresh: FakeKube, snap: SnapshotView, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("bot.live.cache.MAX_LABEL_INDEXES", 1)
    fk = fresh
    view, cache = _cache(fresh)
    pod_rt = fk.registry.by_kind("Pod")
    assert pod_rt is not None
    settled(fk).requests.clear()
    selectors = ["app=trainer", "app in (trainer,crashy)", "app notin (trainer)", "app",
                 "app=trainer,app!=infer", "a=db"]  # the last key is not indexed: a scan
    try:
        for sel in selectors:
            for ns in (None, "ml-team", "research"):
                assert_same(view.list("Pod", ns, label_selector=sel),
                            snap.list("Pod", ns, label_selector=sel))
        assert list(cache._stores["Pod"].labels) == ["app"]

        def apps(sel: str) -> set[str]:
            return {p["metadata"]["name"] for p in view.list("Pod", label_selector=sel)}

        crashy = fk.store.get(pod_rt, "ml-team", "crashy")
        fk.store.put({**crashy, "metadata": {**crashy["metadata"], "labels": {"app": "moved"}}})
        wait_until(lambda: apps("app=moved") == {"crashy"})
        assert "crashy" not in apps("app in (crashy,trainer)")
        fk.store.delete(pod_rt, "ml-team", "crashy")
        wait_until(lambda: not apps("app=moved"))
        assert len(apps("app=trainer")) == len(snap.list("Pod", label_selector="app=trainer"))
        assert not [r for r in settled(fk).requests if r.verb == "list"]
    finally:
        cache.stop()
        view.close()


def test_pods_of_many_nodes_come_from_the_warm_cache_in_one_pass(
    fresh: FakeKube, warm: tuple[LiveView, WatchCache], snap: SnapshotView
) -> None:
    from handlers.view import Reader

    view, _ = warm
    settled(fresh).requests.clear()
    reader = Reader(view)
    nodes = ["gpu-0", "gpu-1", "gpu-2", "nowhere"]
    got = reader.pods_on(nodes)
    assert list(got) == nodes and list(got["nowhere"]) == []
    for n in nodes:
        assert_same(got[n], snap.list("Pod", field_selector=f"spec.nodeName={n}"))
    assert reader.pods_on(["gpu-1"])["gpu-1"] is got["gpu-1"]  # one answer a diagnosis
    assert view.stats["cache_reads"] == 1
    assert [r for r in settled(fresh).requests if r.verb != "watch"] == []


def test_configmaps_are_kept_for_the_operator_namespace_only(fresh: FakeKube) -> None:
    fk = fresh
    path = fk.write_kubeconfig(Path(fk.snapshot or ".").parent / f"kc-{fk.port}")
    view = open_live_view(str(path), retry=FAST)
    cache = view.watch(("ConfigMap", "ClusterPolicy"))  # the default: gpu-operator's
    try:
        assert cache.wait_synced(10)
        cm_requests = [r for r in settled(fk).requests if r.resource == "configmaps"]
        assert {r.namespace for r in cm_requests} == {"gpu-operator"}  # what RBAC grants
        fk.requests.clear()
        assert [c["metadata"]["name"] for c in view.list("ConfigMap", "gpu-operator")] == [
            "time-slicing"]
        assert view.get("ConfigMap", "time-slicing", "gpu-operator") is not None
        assert view.get("ClusterPolicy", "cluster-policy") is not None
        assert _list_requests(fk) == []
        view.list("ConfigMap", "ml-team")  # another namespace: the server answers
        view.list("ConfigMap")
        assert [r.namespace for r in _list_requests(fk)] == ["ml-team", None]
    finally:
        cache.stop()
        view.close()


def test_a_big_relist_is_kept_out_of_the_cycle_collectors_reach(fresh: FakeKube) -> None:
    import gc

    gc.unfreeze()
    try:
        view, cache = _cache(fresh)  # the default threshold: these lists are small
        cache.stop()
        view.close()
        assert gc.get_freeze_count() == 0
        view, cache = _cache(fresh, freeze_at=N_PODS)  # the Pod list reaches it
        cache.stop()
        view.close()
        assert gc.get_freeze_count() > N_PODS
    finally:
        gc.unfreeze()


def test_the_connection_pool_holds_every_caller_and_watch_at_once(
    fresh: FakeKube, caplog: pytest.LogCaptureFixture
) -> None:
    from concurrent.futures import ThreadPoolExecutor

    callers = 24
    path = fresh.write_kubeconfig(Path(fresh.snapshot or ".").parent / f"kc-{fresh.port}")
    view = open_live_view(str(path), retry=FAST, callers=callers)
    cache = view.watch()  # every default kind: one long-lived stream each
    try:
        assert cache.wait_synced(10)
        fresh.faults.latency(0.2, resource="namespaces")  # so that the reads overlap
        caplog.set_level(logging.WARNING, logger="urllib3")
        with ThreadPoolExecutor(callers) as pool:
            found = list(pool.map(lambda i: view.get("Namespace", "ml-team"), range(callers)))
        assert all(found)
        assert not [r for r in caplog.records if "pool is full" in r.getMessage()]
    finally:
        cache.stop()
        view.close()


def test_watch_cache_strips_managed_fields_and_last_applied(fresh: FakeKube) -> None:
    view, cache = _cache(fresh)
    try:
        ds = view.get("DaemonSet", "nvidia-device-plugin-daemonset", "gpu-operator")
        assert ds is not None and ds["metadata"]["annotations"] == {"keep": "me"}
        pod = view.get("Pod", "job-0001", "research")
        assert pod is not None and "managedFields" not in pod["metadata"]
        assert pod["kind"] == "Pod" and pod["apiVersion"] == "v1"
    finally:
        cache.stop()
        view.close()


def test_watch_cache_applies_changes(fresh: FakeKube) -> None:
    fk = fresh
    view, cache = _cache(fresh)
    settled(fk).requests.clear()
    node_rt = fk.registry.by_kind("Node")
    assert node_rt is not None
    try:
        new: dict[str, Any] = {"kind": "Node", "apiVersion": "v1",
               "metadata": {"name": "gpu-9", "labels": {"pool": "new"}}, "status": {}}
        fk.store.put(new)
        wait_until(lambda: view.get("Node", "gpu-9") is not None)
        new["metadata"]["labels"] = {"pool": "changed"}
        fk.store.put(new)
        wait_until(lambda: view.list("Node", label_selector="pool=changed"))
        fk.store.put({"kind": "Event", "apiVersion": "v1",
                      "metadata": {"name": "gpu-9.x", "namespace": "default"},
                      "involvedObject": {"kind": "Node", "name": "gpu-9"},
                      "reason": "Rebooted", "message": "rebooted", "count": 1,
                      "lastTimestamp": "2025-05-01T11:00:00Z"})
        wait_until(lambda: view.events("Node", "gpu-9"))
        fk.store.delete(node_rt, "", "gpu-9")
        wait_until(lambda: view.get("Node", "gpu-9") is None)
        assert cache.stats()["kinds"]["Node"]["lists"] == 1
        assert not [r for r in settled(fk).requests if r.verb in ("list", "get")
                    and r.resource in ("nodes", "events")]
    finally:
        cache.stop()
        view.close()


def test_a_diagnosis_reads_one_state_of_the_cache_and_holds_events_at_most_hold_max(
        fresh: FakeKube) -> None:
    fk = fresh
    view, cache = _cache(fresh, hold_max=1.5)
    node: dict[str, Any] = {"kind": "Node", "apiVersion": "v1",
                            "metadata": {"name": "gpu-9", "labels": {"pool": "a"}}, "status": {}}
    try:
        fk.store.put(node)
        wait_until(lambda: view.get("Node", "gpu-9") is not None)
        with SharedReads(view).reading():  # as `gpubot serve` wraps the view
            node["metadata"]["labels"] = {"pool": "b"}
            fk.store.put(node)
            time.sleep(0.3)  # the event has arrived, and waits
            assert (view.get("Node", "gpu-9") or {})["metadata"]["labels"] == {"pool": "a"}
        wait_until(lambda: view.list("Node", label_selector="pool=b"))  # applied at once
        with view.reading():  # a diagnosis that takes too long holds the cache back no more
            node["metadata"]["labels"] = {"pool": "c"}
            fk.store.put(node)
            wait_until(lambda: view.list("Node", label_selector="pool=c"), timeout=6)
        with view.reading():
            cache.stop(timeout=2)  # stopping does not wait for the reader
            assert not cache._threads
    finally:
        cache.stop()
        view.close()


def test_a_heartbeat_keeps_the_cached_node_and_its_node_info(
        fresh: FakeKube, warm: tuple[LiveView, WatchCache]) -> None:
    # A kubelet renews lastHeartbeatTime every 10 s on older clusters: the cache keeps the
    # node object (and the NodeInfo built on it) unless something a handler reads changed.
    view, cache = warm
    node = view.get("Node", "gpu-0")
    assert node is not None
    info = node_info(node, view.list("Pod", field_selector="spec.nodeName=gpu-0"),
                     memos=cache.memos)
    changes = cache.stats()["kinds"]["Node"]["changes"]
    live = fresh.store.find("Node", "gpu-0")
    assert live is not None and live["status"]["conditions"]
    for cond in live["status"]["conditions"]:
        cond["lastHeartbeatTime"] = "2031-01-01T00:00:00Z"
    fresh.store.put(live)
    wait_until(lambda: cache.stats()["kinds"]["Node"]["changes"] > changes)
    assert view.get("Node", "gpu-0") is node
    assert node_info(node, view.list("Pod", field_selector="spec.nodeName=gpu-0"),
                     memos=cache.memos) is info
    live["metadata"]["labels"]["nvidia.com/gpu.product"] = "NVIDIA-H100-80GB-HBM3"
    fresh.store.put(live)
    wait_until(lambda: view.get("Node", "gpu-0") is not node)
    changed = view.get("Node", "gpu-0")
    assert changed is not None
    assert changed["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"


def test_a_kind_refused_again_and_again_is_warned_about_once(
        fresh: FakeKube, caplog: pytest.LogCaptureFixture) -> None:
    fresh.faults.forbid("daemonsets", verb="list")
    caplog.set_level(logging.DEBUG, logger="bot.live.cache")
    view, cache = _cache(fresh, backoff=0.01, max_backoff=0.02)
    try:
        # The error count goes up just before the line is logged: wait for the lines.
        def said() -> list[logging.LogRecord]:
            return [r for r in list(caplog.records) if "DaemonSet" in r.getMessage()]
        wait_until(lambda: len(said()) >= 3)
        assert cache.stats()["kinds"]["DaemonSet"]["errors"] >= 3
        assert [r.levelno for r in said()][:3] == [logging.WARNING, logging.DEBUG, logging.DEBUG]
    finally:
        cache.stop()
        view.close()


def test_settle_gc_freezes_what_exists_and_raises_the_thresholds() -> None:
    # In a process of its own: the policy is process-wide.
    code = ("import gc\n"
            "from bot.live.cache import GC_THRESHOLDS, settle_gc\n"
            "kept = [{'a': [i]} for i in range(5000)]\n"
            "settle_gc()\n"
            "print(gc.get_threshold() == GC_THRESHOLDS, gc.get_freeze_count() >= 10000)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True)
    assert out.stdout.split() == ["True", "True"]


def test_watch_cache_relists_on_410(snapshot_path: Path) -> None:
    with FakeKube(snapshot_path, history=16, daemonset_delay=0.1) as fk:
        view, cache = _cache(fk)
        try:
            before = {n["metadata"]["name"]: n for n in view.list("Node")}
            # More changes than the server's history holds, while the watch cannot read.
            with fk.store.lock:
                for i in range(40):
                    fk.store.put({"kind": "Node", "metadata": {"name": f"burst-{i}"}})
                gpu0 = fk.store.find("Node", "gpu-0")
                assert gpu0 is not None
                gpu0["metadata"]["labels"]["pool"] = "moved"
                fk.store.put(gpu0)
            wait_until(lambda: cache.stats()["kinds"]["Node"]["lists"] >= 2)
            wait_until(lambda: len(view.list("Node")) == 44)
            node_stats = cache.stats()["kinds"]["Node"]
            assert "410" in (node_stats["last_error"] or "")
            assert node_stats["synced"] is True
            # The re-list keeps one copy of what did not change (and its memos); only the
            # changed node is a new object.
            after = {n["metadata"]["name"]: n for n in view.list("Node")}
            assert [n for n in before if after[n] is not before[n]] == ["gpu-0"]
            assert after["gpu-0"]["metadata"]["labels"]["pool"] == "moved"
        finally:
            cache.stop()
            view.close()


def test_watch_cache_relists_every_kind_after_compaction(
        fresh: FakeKube, warm: tuple[LiveView, WatchCache]) -> None:
    # etcd compaction ends every watch with 410 Gone, idle ones too; the objects that did
    # not change are the very same ones afterwards.
    view, cache = warm
    pods = {p["metadata"]["name"]: p for p in view.list("Pod")}
    fresh.store.compact()
    wait_until(lambda: all(k["lists"] >= 2 for k in cache.stats()["kinds"].values()))
    assert cache.settled()
    assert all(p is pods[p["metadata"]["name"]] for p in view.list("Pod"))


def test_watch_cache_relists_after_a_dropped_connection(fresh: FakeKube) -> None:
    fk = fresh
    view, cache = _cache(fresh, watch_timeout=1)
    try:
        fk.faults.drop("nodes", verb="watch", times=1)
        wait_until(lambda: cache.stats()["kinds"]["Node"]["lists"] >= 2, timeout=5)
        stats = cache.stats()["kinds"]["Node"]
        assert stats["errors"] >= 1 and stats["synced"] is True
        assert "dropped" in (stats["last_error"] or "")
    finally:
        cache.stop()
        view.close()


def test_watch_cache_resumes_without_relist_when_the_watch_times_out(fresh: FakeKube) -> None:
    fk = fresh
    view, cache = _cache(fresh, watch_timeout=1)
    try:
        wait_until(lambda: cache.stats()["kinds"]["Node"]["watches"] >= 2, timeout=5)
        assert cache.stats()["kinds"]["Node"]["lists"] == 1
        watches = [r for r in settled(fk).requests if r.verb == "watch" and r.resource == "nodes"]
        assert all(r.query["allowWatchBookmarks"] == "true" for r in watches)
        assert all(r.query["resourceVersion"] for r in watches)
    finally:
        cache.stop()
        view.close()


def test_a_failed_relist_unsyncs_the_kind_and_reads_go_to_the_server(
    fresh: FakeKube
) -> None:
    fk = fresh
    view, cache = _cache(fresh, watch_timeout=1)
    try:
        fk.faults.forbid("nodes", verb="list")
        fk.faults.drop("nodes", verb="watch", times=1)
        wait_until(lambda: not cache.synced("Node"), timeout=5)
        with pytest.raises(ApiForbidden):
            view.list("Node")
        fk.faults.clear()
        wait_until(lambda: cache.synced("Node"), timeout=5)
    finally:
        cache.stop()
        view.close()


def test_watch_cache_caps_events(fresh: FakeKube) -> None:
    fk = fresh
    view, cache = _cache(fresh, max_events=3)
    try:
        assert cache.stats()["kinds"]["Event"]["objects"] == 3
        assert cache.stats()["kinds"]["Event"]["evicted"] == 2
        # The newest kept: job-0001.a (10:05), crashy.a (10:03), crashy.b (10:02).
        assert [e["reason"] for e in view.events("Pod", "crashy", "ml-team")] == [
            "Pulled", "BackOff"]
        for i in range(3):
            fk.store.put({"kind": "Event", "apiVersion": "v1",
                          "metadata": {"name": f"late-{i}", "namespace": "default"},
                          "involvedObject": {"kind": "Node", "name": "gpu-0"},
                          "reason": "Late", "message": str(i), "count": 1})
        wait_until(lambda: len(view.events("Node", "gpu-0")) == 3)
        assert view.events("Pod", "crashy", "ml-team") == []
        assert cache.stats()["kinds"]["Event"]["objects"] == 3
    finally:
        cache.stop()
        view.close()


def test_watch_cache_stop_is_prompt(fresh: FakeKube) -> None:
    view, cache = _cache(fresh)  # watches open for 300 s
    started = time.monotonic()
    view.close()  # stops the cache it started
    assert time.monotonic() - started < 1.0
    assert cache._threads == []
