"""The fake API server (tests/fake_kube), driven by the real clients: the official
``kubernetes`` Python client (typed APIs, CustomObjectsApi, the dynamic client, watches)
and ``kubectl``. Nothing is patched: everything goes over HTTP on 127.0.0.1."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import kubernetes as _kubernetes
import pytest
from urllib3.exceptions import MaxRetryError, ProtocolError

from tests.fake_kube import FakeKube, wait_until
from tests.fake_kube.fixtures import api_client_fixture, connect, fake_kube_fixture
from tests.real_binaries import kubectl as require_kubectl

# The client's own annotations are partial (untyped calls, Optional everywhere): tests treat
# it as dynamic.
kubernetes: Any = _kubernetes
client = kubernetes.client
config = kubernetes.config
watch = kubernetes.watch
ApiException = kubernetes.client.rest.ApiException
DynamicClient = kubernetes.dynamic.DynamicClient

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOT = ROOT / "tests" / "data" / "fake_kube" / "cluster"
PLUGIN_NS = "gpu-operator"
PLUGIN_DS = "nvidia-device-plugin-daemonset"
CRASHING = "nvidia-device-plugin-daemonset-x7k2p"  # on gpu-node-1, allocatable GPUs 0
HEALTHY = "nvidia-device-plugin-daemonset-m4q9z"  # on gpu-node-2
RBAC_MSG = ('pods is forbidden: User "system:serviceaccount:gpubot:gpubot" cannot list '
            'resource "pods" in API group "" in the namespace "ml-team"')


fk = fake_kube_fixture(SNAPSHOT, daemonset_delay=0.3)
api = api_client_fixture("fk")


@pytest.fixture
def v1(api: Any) -> Any:
    return client.CoreV1Api(api)


def status_of(err: Any) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(err.body)
    return body


def names(items: list[Any]) -> list[str]:
    return [i.metadata.name for i in items]


# -- reads -----------------------------------------------------------------------------------


def test_list_with_label_and_field_selectors(v1: Any) -> None:
    everything = v1.list_pod_for_all_namespaces()
    assert names(everything.items) == [HEALTHY, CRASHING, "notebook-1", "train-0"]
    assert int(everything.metadata.resource_version) > 0
    assert names(v1.list_namespaced_pod("ml-team", label_selector="app=train").items) == [
        "train-0"]
    assert names(v1.list_pod_for_all_namespaces(
        label_selector="app in (train,notebook),!job-name").items) == ["notebook-1"]
    on_node = v1.list_pod_for_all_namespaces(field_selector="spec.nodeName=gpu-node-2")
    assert names(on_node.items) == [HEALTHY, "notebook-1"]
    assert names(v1.list_pod_for_all_namespaces(field_selector="spec.nodeName=").items) == [
        "train-0"]
    assert names(v1.list_pod_for_all_namespaces(
        field_selector="status.phase!=Running,metadata.namespace=ml-team").items) == ["train-0"]
    assert names(v1.list_node(field_selector="spec.unschedulable=false").items) == [
        "gpu-node-1", "gpu-node-2"]
    events = v1.list_namespaced_event("ml-team", field_selector="involvedObject.name=train-0")
    assert [e.reason for e in events.items] == ["FailedScheduling"]


def test_unsupported_field_selector_is_a_400_status(api: Any, v1: Any) -> None:
    with pytest.raises(ApiException) as err:
        v1.list_pod_for_all_namespaces(field_selector="spec.foo=bar")
    assert err.value.status == 400
    assert status_of(err.value) == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "field label not supported: spec.foo", "reason": "BadRequest", "code": 400}
    with pytest.raises(ApiException) as err:
        client.AppsV1Api(api).list_namespaced_daemon_set(PLUGIN_NS, field_selector="spec.x=y")
    assert status_of(err.value)["message"] == (
        '"spec.x" is not a known field selector: only "metadata.name", "metadata.namespace"')


def test_paging_with_limit_and_continue(v1: Any) -> None:
    first = v1.list_pod_for_all_namespaces(limit=3)
    assert names(first.items) == [HEALTHY, CRASHING, "notebook-1"]
    assert first.metadata.remaining_item_count == 1
    second = v1.list_pod_for_all_namespaces(limit=3, _continue=first.metadata._continue)
    assert names(second.items) == ["train-0"]
    assert second.metadata._continue is None
    with pytest.raises(ApiException) as err:
        v1.list_pod_for_all_namespaces(limit=3, _continue="not-a-token!")
    assert err.value.status == 400


def test_continue_token_from_compacted_history_is_410_expired(tmp_path: Path) -> None:
    with FakeKube(SNAPSHOT, history=16) as fake:
        api_client = connect(fake, tmp_path)
        v1 = client.CoreV1Api(api_client)
        page = v1.list_namespaced_pod("ml-team", limit=1)
        for i in range(20):
            v1.patch_namespaced_pod("notebook-1", "ml-team", {"metadata": {"labels": {
                "n": str(i)}}})
        with pytest.raises(ApiException) as err:
            v1.list_namespaced_pod("ml-team", limit=1, _continue=page.metadata._continue)
        assert err.value.status == 410
        assert status_of(err.value)["reason"] == "Expired"
        api_client.close()


def test_get_missing_object_is_404_not_found(api: Any, v1: Any) -> None:
    with pytest.raises(ApiException) as err:
        v1.read_namespaced_pod("nope", "ml-team")
    assert err.value.status == 404
    assert status_of(err.value) == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": 'pods "nope" not found', "reason": "NotFound",
        "details": {"name": "nope", "kind": "pods"}, "code": 404}
    with pytest.raises(ApiException) as err:
        client.AppsV1Api(api).read_namespaced_daemon_set("nope", PLUGIN_NS)
    assert status_of(err.value)["message"] == 'daemonsets.apps "nope" not found'
    assert v1.read_node("gpu-node-1").status.capacity["nvidia.com/gpu"] == "8"


def test_discovery_and_aggregated_discovery_fallback(fk: FakeKube, api: Any) -> None:
    accept = ("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
              "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,"
              "application/json")
    req = urllib.request.Request(f"{fk.url}/apis", headers={"Accept": accept})
    with urllib.request.urlopen(req, timeout=5) as resp:
        assert resp.headers["Content-Type"] == "application/json"
        groups = json.load(resp)
    assert groups["kind"] == "APIGroupList"
    assert {"apps", "batch", "events.k8s.io", "scheduling.k8s.io", "node.k8s.io",
            "scheduling.volcano.sh", "kueue.x-k8s.io", "nvidia.com"} <= {
        g["name"] for g in groups["groups"]}
    apps = client.CoreApi(api).get_api_versions()
    assert apps.versions == ["v1"]
    resources = client.AppsV1Api(api).get_api_resources()
    ds = next(r for r in resources.resources if r.name == "daemonsets")
    assert (ds.kind, ds.namespaced, ds.short_names, ds.singular_name) == (
        "DaemonSet", True, ["ds"], "daemonset")
    assert "watch" in ds.verbs
    assert client.VersionApi(api).get_code().major == "1"


# -- writes ----------------------------------------------------------------------------------


def cm(name: str, **data: str) -> Any:
    return client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name), data=data)


def test_create_conflicts_and_missing_namespace(v1: Any) -> None:
    made = v1.create_namespaced_config_map("ml-team", cm("settings", a="1"))
    assert made.metadata.uid and made.metadata.resource_version
    assert made.metadata.creation_timestamp is not None
    with pytest.raises(ApiException) as err:
        v1.create_namespaced_config_map("ml-team", cm("settings", a="2"))
    assert err.value.status == 409
    assert status_of(err.value)["reason"] == "AlreadyExists"
    assert status_of(err.value)["message"] == 'configmaps "settings" already exists'
    with pytest.raises(ApiException) as err:
        v1.create_namespaced_config_map("no-such-ns", cm("settings"))
    assert err.value.status == 404
    assert status_of(err.value)["message"] == 'namespaces "no-such-ns" not found'


def test_replace_with_stale_resource_version_is_409_conflict(v1: Any) -> None:
    v1.create_namespaced_config_map("ml-team", cm("settings", a="1"))
    stale = v1.read_namespaced_config_map("settings", "ml-team")
    fresh = v1.read_namespaced_config_map("settings", "ml-team")
    fresh.data = {"a": "2"}
    updated = v1.replace_namespaced_config_map("settings", "ml-team", fresh)
    assert int(updated.metadata.resource_version) > int(stale.metadata.resource_version)
    stale.data = {"a": "3"}
    with pytest.raises(ApiException) as err:
        v1.replace_namespaced_config_map("settings", "ml-team", stale)
    assert err.value.status == 409
    assert status_of(err.value)["reason"] == "Conflict"
    assert status_of(err.value)["message"] == (
        'Operation cannot be fulfilled on configmaps "settings": the object has been '
        "modified; please apply your changes to the latest version and try again")
    assert v1.read_namespaced_config_map("settings", "ml-team").data == {"a": "2"}


def test_patch_kinds_and_status_subresource(api: Any, v1: Any) -> None:
    before = v1.read_namespaced_pod("notebook-1", "ml-team")
    patched = v1.patch_namespaced_pod("notebook-1", "ml-team",
                                      {"metadata": {"labels": {"team": "ml"}}})
    assert patched.metadata.labels == {"app": "notebook", "team": "ml"}
    assert int(patched.metadata.resource_version) > int(before.metadata.resource_version)
    # A JSON patch (a list body).
    v1.create_namespaced_config_map("ml-team", cm("settings", a="1"))
    out = v1.patch_namespaced_config_map("settings", "ml-team", [
        {"op": "replace", "path": "/data/a", "value": "2"},
        {"op": "add", "path": "/data/b", "value": "3"}])
    assert out.data == {"a": "2", "b": "3"}
    # A resourceVersion in the patch is a precondition.
    with pytest.raises(ApiException) as err:
        v1.patch_namespaced_pod("notebook-1", "ml-team", {"metadata": {
            "resourceVersion": before.metadata.resource_version, "labels": {"x": "y"}}})
    assert err.value.status == 409
    # Status is written through /status only, as for every type with a status subresource.
    gpus = {"nvidia.com/gpu": "8"}
    ignored = v1.patch_node("gpu-node-1", {"status": {"allocatable": gpus}})
    assert ignored.status.allocatable["nvidia.com/gpu"] == "0"
    written = v1.patch_node_status("gpu-node-1", {"status": {"allocatable": gpus}})
    assert written.status.allocatable["nvidia.com/gpu"] == "8"
    # Patching to what is already there writes nothing.
    again = v1.patch_node_status("gpu-node-1", {"status": {"allocatable": gpus}})
    assert again.metadata.resource_version == written.metadata.resource_version


def test_delete_dry_run_and_cascade(fk: FakeKube, api: Any, v1: Any) -> None:
    dry = v1.delete_namespaced_pod("train-0", "ml-team", dry_run="All")
    assert dry.metadata.name == "train-0"
    assert v1.read_namespaced_pod("train-0", "ml-team").metadata.name == "train-0"
    deleted = v1.delete_namespaced_pod("train-0", "ml-team")
    assert deleted.metadata.name == "train-0"  # pods answer with the object
    with pytest.raises(ApiException) as err:
        v1.read_namespaced_pod("train-0", "ml-team")
    assert err.value.status == 404
    deletes = fk.requests.find("DELETE", "/api/v1/namespaces/ml-team/pods/train-0")
    assert [r.query.get("dryRun") for r in deletes] == ["All", None]
    # Most kinds answer a Status.
    v1.create_namespaced_config_map("ml-team", cm("settings"))
    gone = v1.delete_namespaced_config_map("settings", "ml-team")
    assert (gone["kind"], gone["status"], gone["details"]["name"]) == (
        "Status", "Success", "settings")
    # Deleting the DaemonSet deletes its pods (background propagation); none come back.
    client.AppsV1Api(api).delete_namespaced_daemon_set(PLUGIN_DS, PLUGIN_NS)
    assert names(v1.list_namespaced_pod(PLUGIN_NS).items) == []
    time.sleep(0.4)
    assert names(v1.list_namespaced_pod(PLUGIN_NS).items) == []


def test_pod_logs(v1: Any) -> None:
    text = v1.read_namespaced_pod_log(CRASHING, PLUGIN_NS)
    assert "Driver/library version mismatch" in text
    last = v1.read_namespaced_pod_log(CRASHING, PLUGIN_NS, container="nvidia-device-plugin",
                                      tail_lines=1)
    assert last.count("\n") == 1 and last.startswith("E0502 09:54:00.311")
    assert "version mismatch" in v1.read_namespaced_pod_log(CRASHING, PLUGIN_NS, previous=True)
    with pytest.raises(ApiException) as err:
        v1.read_namespaced_pod_log(HEALTHY, PLUGIN_NS, previous=True)
    assert status_of(err.value)["message"] == (
        'previous terminated container "nvidia-device-plugin" in pod '
        f'"{HEALTHY}" not found')
    with pytest.raises(ApiException) as err:
        v1.read_namespaced_pod_log("train-0", "ml-team")
    assert err.value.status == 400
    assert status_of(err.value)["message"] == (
        "a container name must be specified for pod train-0, choose one of: [trainer sidecar]")
    assert v1.read_namespaced_pod_log("train-0", "ml-team", container="trainer") == ""


# -- watch -----------------------------------------------------------------------------------


def test_watch_streams_changes_and_honours_timeout(v1: Any) -> None:
    def mutate() -> None:
        v1.patch_namespaced_pod("notebook-1", "ml-team", {"metadata": {"labels": {"x": "1"}}})
        v1.create_namespaced_pod("ml-team", client.V1Pod(
            metadata=client.V1ObjectMeta(name="new-pod", labels={"app": "new"}),
            spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="busybox")])))
        v1.delete_namespaced_pod("train-0", "ml-team")

    worker = threading.Thread(target=mutate)
    seen: list[tuple[str, str]] = []
    start = time.monotonic()
    for ev in watch.Watch().stream(v1.list_namespaced_pod, "ml-team", timeout_seconds=1):
        seen.append((ev["type"], ev["object"].metadata.name))
        if len(seen) == 2:  # the initial state is in: change things
            worker.start()
    elapsed = time.monotonic() - start
    worker.join()
    assert seen == [("ADDED", "notebook-1"), ("ADDED", "train-0"),
                    ("MODIFIED", "notebook-1"), ("ADDED", "new-pod"), ("DELETED", "train-0")]
    assert 0.9 < elapsed < 2.5


def test_watch_from_resource_version_with_selectors(v1: Any) -> None:
    rv = v1.list_namespaced_pod("ml-team").metadata.resource_version
    v1.patch_namespaced_pod("train-0", "ml-team", {"metadata": {"labels": {"app": "other"}}})
    v1.patch_namespaced_pod("notebook-1", "ml-team", {"metadata": {"labels": {"app": "train"}}})
    seen: list[tuple[str, str]] = []
    for ev in watch.Watch().stream(v1.list_namespaced_pod, "ml-team", label_selector="app=train",
                                   resource_version=rv, timeout_seconds=2):
        seen.append((ev["type"], ev["object"].metadata.name))
        if len(seen) == 2:
            break
    # Leaving the selection is a DELETED, entering it an ADDED, as the watch cache does.
    assert seen == [("DELETED", "train-0"), ("ADDED", "notebook-1")]


def test_watch_from_too_old_resource_version_is_410(tmp_path: Path) -> None:
    with FakeKube(SNAPSHOT, history=16) as fake:
        api_client = connect(fake, tmp_path)
        v1 = client.CoreV1Api(api_client)
        old = v1.list_namespaced_pod("ml-team").metadata.resource_version
        for i in range(20):
            v1.patch_namespaced_pod("notebook-1", "ml-team", {"metadata": {"labels": {
                "n": str(i)}}})
        with pytest.raises(ApiException) as err:
            for _ in watch.Watch().stream(v1.list_namespaced_pod, "ml-team",
                                          resource_version=old, timeout_seconds=1):
                pass
        assert err.value.status == 410
        assert "too old resource version" in str(err.value.reason)
        # On the wire: a 200 with one ERROR event holding an Expired Status.
        raw = v1.list_namespaced_pod("ml-team", watch=True, resource_version=old,
                                     timeout_seconds=1, _preload_content=False)
        event = json.loads(raw.data.decode().splitlines()[0])
        raw.release_conn()
        assert event["type"] == "ERROR"
        assert (event["object"]["kind"], event["object"]["code"],
                event["object"]["reason"]) == ("Status", 410, "Expired")
        api_client.close()


# -- custom resources and other groups ------------------------------------------------------------


def test_custom_resources(api: Any) -> None:
    crd = client.CustomObjectsApi(api)
    groups = crd.list_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", "ml-team",
                                               "podgroups")
    assert [g["metadata"]["name"] for g in groups["items"]] == ["train-pg"]
    assert groups["items"][0]["kind"] == "PodGroup"  # CR list items keep their kind
    pg = crd.get_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", "ml-team",
                                          "podgroups", "train-pg")
    assert pg["spec"]["minMember"] == 1
    patched = crd.patch_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", "ml-team",
                                                 "podgroups", "train-pg",
                                                 {"spec": {"minMember": 2}})
    assert patched["spec"]["minMember"] == 2
    assert patched["metadata"]["generation"] == 2
    policy = crd.get_cluster_custom_object("nvidia.com", "v1", "clusterpolicies",
                                           "cluster-policy")
    assert policy["status"]["state"] == "notReady"
    workloads = crd.list_cluster_custom_object("kueue.x-k8s.io", "v1beta1", "workloads")
    assert [w["metadata"]["name"] for w in workloads["items"]] == ["job-eval-3f2a1"]


def test_crds_installed_or_not(tmp_path: Path) -> None:
    with FakeKube(SNAPSHOT, absent_kinds=["PodGroup"], extra_kinds=["NodeFeature"]) as fake:
        api_client = connect(fake, tmp_path)
        crd = client.CustomObjectsApi(api_client)
        with pytest.raises(ApiException) as err:
            crd.list_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", "ml-team",
                                              "podgroups")
        assert err.value.status == 404
        assert status_of(err.value)["message"] == (
            "the server could not find the requested resource")
        groups = [g.name for g in client.ApisApi(api_client).get_api_versions().groups]
        assert "scheduling.volcano.sh" not in groups and "nfd.k8s-sigs.io" in groups
        assert crd.list_cluster_custom_object("nfd.k8s-sigs.io", "v1alpha1",
                                              "nodefeatures")["items"] == []
        api_client.close()


def test_dynamic_client(api: Any, tmp_path: Path) -> None:
    dyn = DynamicClient(api, cache_file=str(tmp_path / "discovery.json"))
    podgroups = dyn.resources.get(api_version="scheduling.volcano.sh/v1beta1", kind="PodGroup")
    assert [g.metadata.name for g in podgroups.get(namespace="ml-team").items] == ["train-pg"]
    nodes = dyn.resources.get(api_version="v1", kind="Node")
    gpu = nodes.get(label_selector="nvidia.com/gpu.present=true")
    assert [n.metadata.name for n in gpu.items] == ["gpu-node-1", "gpu-node-2"]
    # Custom resources take no strategic merge patch, as on a real apiserver.
    with pytest.raises(Exception) as err:
        podgroups.patch(namespace="ml-team", name="train-pg", body={"spec": {"queue": "x"}})
    assert getattr(err.value, "status", None) == 415
    done = podgroups.patch(namespace="ml-team", name="train-pg", body={"spec": {"queue": "x"}},
                           content_type="application/merge-patch+json")
    assert done.spec.queue == "x"


def test_events_served_by_both_event_apis(api: Any) -> None:
    # Raw JSON: events.k8s.io events converted from core ones have "eventTime": null, as on
    # a real apiserver, which the typed EventsV1Event model refuses.
    events_v1 = client.EventsV1Api(api)
    raw = events_v1.list_namespaced_event(PLUGIN_NS, _preload_content=False)
    (ev,) = json.loads(raw.data)["items"]
    assert ev["regarding"]["name"] == CRASHING and ev["note"].startswith("Back-off restarting")
    assert (ev["deprecatedCount"], ev["reportingController"], ev["eventTime"]) == (
        250, "kubelet", None)
    old_style = client.CoreV1Api(api).list_namespaced_event(
        PLUGIN_NS, field_selector=f"involvedObject.name={CRASHING}")
    (core,) = old_style.items
    assert (core.reason, core.count, core.message) == ("BackOff", 250, ev["note"])
    raw = events_v1.list_event_for_all_namespaces(field_selector="regarding.name=train-0",
                                                  _preload_content=False)
    assert [e["reason"] for e in json.loads(raw.data)["items"]] == ["FailedScheduling"]


# -- auth ------------------------------------------------------------------------------------


def test_bearer_token(tmp_path: Path) -> None:
    with FakeKube(SNAPSHOT, token="s3cret") as fake:
        good = connect(fake, tmp_path)
        assert len(client.CoreV1Api(good).list_node().items) == 3
        good.close()
        cfg = client.Configuration(host=fake.url)
        anonymous = client.ApiClient(cfg)
        with pytest.raises(ApiException) as err:
            client.CoreV1Api(anonymous).list_node()
        anonymous.close()
    assert err.value.status == 401
    assert status_of(err.value) == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "Unauthorized", "reason": "Unauthorized", "code": 401}


# -- the DaemonSet controller ---------------------------------------------------------------------


def plugin_pods_on(v1: Any, node: str) -> list[Any]:
    pods: list[Any] = v1.list_namespaced_pod(
        PLUGIN_NS, field_selector=f"spec.nodeName={node}").items
    return pods


def test_deleted_device_plugin_pod_comes_back_ready_and_gpus_return(v1: Any) -> None:
    assert v1.read_node("gpu-node-1").status.allocatable["nvidia.com/gpu"] == "0"
    rv = v1.list_node().metadata.resource_version
    node_events: list[tuple[str, str]] = []
    watcher = watch.Watch()

    def watch_nodes() -> None:
        for ev in watcher.stream(v1.list_node, resource_version=rv, timeout_seconds=3):
            alloc = ev["object"].status.allocatable["nvidia.com/gpu"]
            node_events.append((ev["type"], alloc))
            if alloc == "8":
                watcher.stop()

    thread = threading.Thread(target=watch_nodes)
    thread.start()
    v1.delete_namespaced_pod(CRASHING, PLUGIN_NS)
    assert names(plugin_pods_on(v1, "gpu-node-1")) == []  # not back before the delay
    new = wait_until(lambda: plugin_pods_on(v1, "gpu-node-1"), timeout=3)[0]
    assert new.metadata.name.startswith(f"{PLUGIN_DS}-") and new.metadata.name != CRASHING
    assert new.metadata.owner_references[0].kind == "DaemonSet"
    wait_until(lambda: v1.read_namespaced_pod(new.metadata.name, PLUGIN_NS).status.phase
               == "Running", timeout=2)
    pod = v1.read_namespaced_pod(new.metadata.name, PLUGIN_NS)
    ready = {c.type: c.status for c in pod.status.conditions}["Ready"]
    (cs,) = pod.status.container_statuses
    assert (ready, cs.ready, cs.restart_count, pod.spec.node_name) == (
        "True", True, 0, "gpu-node-1")
    assert cs.state.running is not None
    wait_until(lambda: v1.read_node("gpu-node-1").status.allocatable["nvidia.com/gpu"] == "8",
               timeout=2)
    thread.join(timeout=5)
    assert node_events == [("MODIFIED", "8")]


def test_daemonset_pod_can_come_back_crash_looping(tmp_path: Path) -> None:
    outcome = {f"{PLUGIN_NS}/{PLUGIN_DS}": "crashloop"}
    with FakeKube(SNAPSHOT, daemonset_delay=0.1, daemonset_outcome=outcome) as fake:
        api_client = connect(fake, tmp_path)
        v1 = client.CoreV1Api(api_client)
        v1.delete_namespaced_pod(CRASHING, PLUGIN_NS)

        def crashing() -> Any:
            for pod in plugin_pods_on(v1, "gpu-node-1"):
                statuses = pod.status.container_statuses or []
                if statuses and statuses[0].state.waiting:
                    return pod
            return None

        pod = wait_until(crashing, timeout=3)
        (cs,) = pod.status.container_statuses
        assert cs.state.waiting.reason == "CrashLoopBackOff" and not cs.ready
        assert "version mismatch" in v1.read_namespaced_pod_log(pod.metadata.name, PLUGIN_NS)
        assert v1.read_node("gpu-node-1").status.allocatable["nvidia.com/gpu"] == "0"
        api_client.close()


# -- faults ----------------------------------------------------------------------------------


def test_fault_latency(fk: FakeKube, v1: Any) -> None:
    fk.faults.latency(0.3, resource="nodes")
    start = time.monotonic()
    v1.list_node()
    assert time.monotonic() - start >= 0.3
    start = time.monotonic()
    v1.list_namespaced_pod("ml-team")
    assert time.monotonic() - start < 0.3


def test_fault_errors_a_number_of_times(fk: FakeKube, v1: Any) -> None:
    fk.faults.error("pods", verb="list", times=1)
    with pytest.raises(ApiException) as err:
        v1.list_namespaced_pod("ml-team")
    assert err.value.status == 500
    assert status_of(err.value)["reason"] == "InternalError"
    assert names(v1.list_namespaced_pod("ml-team").items) == ["notebook-1", "train-0"]
    fk.faults.error("nodes", code=503)
    for _ in range(2):
        with pytest.raises(ApiException) as err:
            v1.read_node("gpu-node-1")
        assert err.value.status == 503


def test_fault_forbidden_with_the_rbac_message(fk: FakeKube, v1: Any) -> None:
    fk.faults.forbid("pods", verb="list", namespace="ml-team")
    with pytest.raises(ApiException) as err:
        v1.list_namespaced_pod("ml-team")
    assert err.value.status == 403
    assert status_of(err.value) == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": RBAC_MSG, "reason": "Forbidden", "details": {"kind": "pods"}, "code": 403}
    assert names(v1.list_namespaced_pod(PLUGIN_NS).items) == [HEALTHY, CRASHING]
    assert v1.read_namespaced_pod("train-0", "ml-team").metadata.name == "train-0"
    fk.faults.forbid("nodes", verb="list")
    with pytest.raises(ApiException) as err:
        v1.list_node()
    assert status_of(err.value)["message"] == (
        'nodes is forbidden: User "system:serviceaccount:gpubot:gpubot" cannot list resource '
        '"nodes" in API group "" at the cluster scope')


def test_fault_throttled_with_retry_after(fk: FakeKube, v1: Any) -> None:
    fk.faults.throttle("nodes", retry_after=1, times=1)
    start = time.monotonic()
    assert len(v1.list_node().items) == 3  # urllib3 honours Retry-After on a GET
    assert time.monotonic() - start >= 1
    assert [r.status for r in fk.requests.find("GET", "/api/v1/nodes")] == [429, 200]
    fk.faults.throttle("nodes", retry_after=7)
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(f"{fk.url}/api/v1/nodes", timeout=5)
    with err.value:
        assert err.value.code == 429
        assert err.value.headers["Retry-After"] == "7"
        body = json.load(err.value)
    assert (body["reason"], body["details"]) == ("TooManyRequests", {"retryAfterSeconds": 7})


def test_fault_dropped_connection(fk: FakeKube, v1: Any) -> None:
    fk.faults.drop("nodes", times=1)
    assert len(v1.list_node().items) == 3  # urllib3 retries an idempotent GET
    assert [r.status for r in fk.requests.find("GET", "/api/v1/nodes")] == [0, 200]
    fk.faults.drop("nodes")
    with pytest.raises((MaxRetryError, ProtocolError)):
        v1.list_node()


def test_pods_are_indexed_by_node(fk: FakeKube) -> None:
    # fieldSelector=spec.nodeName=X reads the index, not every pod.
    store = fk.store
    pods = store.registry.by_kind("Pod")
    assert pods is not None
    bucket = store.bucket(pods)
    assert bucket.index["spec.nodeName"]["gpu-node-2"] == {(PLUGIN_NS, HEALTHY),
                                                          ("ml-team", "notebook-1")}
    assert store._candidates(bucket, None, (("spec.nodeName", "=", "gpu-node-2"),)) == [
        (PLUGIN_NS, HEALTHY), ("ml-team", "notebook-1")]
    store.put({**store.all("Pod", "ml-team")[0], "spec": {"nodeName": "gpu-node-1",
                                                          "containers": []}})
    assert ("ml-team", "notebook-1") in bucket.index["spec.nodeName"]["gpu-node-1"]
    assert ("ml-team", "notebook-1") not in bucket.index["spec.nodeName"]["gpu-node-2"]


# -- the request log --------------------------------------------------------------------------


def test_request_log_file(tmp_path: Path) -> None:
    log = tmp_path / "requests.log"
    with FakeKube(SNAPSHOT, log_requests=log) as fake:
        api_client = connect(fake, tmp_path)
        v1 = client.CoreV1Api(api_client)
        v1.list_pod_for_all_namespaces(label_selector="app=train")
        v1.delete_namespaced_pod("train-0", "ml-team", dry_run="All")
        assert log.read_text().splitlines() == [
            "GET /api/v1/pods?labelSelector=app%3Dtrain 200",
            "DELETE /api/v1/namespaces/ml-team/pods/train-0?dryRun=All 200"]
        api_client.close()


# -- kubectl and the command line -------------------------------------------------------------


def kubectl(fake: FakeKube, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cfg = fake.write_kubeconfig(tmp_path / "kubectl-config")
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "KUBECONFIG": str(cfg)}
    return subprocess.run(["kubectl", "--cache-dir", str(tmp_path / "kube-cache"), *args],
                          capture_output=True, text=True, env=env, timeout=20, check=False)


def test_kubectl_get_nodes_and_pods(fk: FakeKube, tmp_path: Path) -> None:
    require_kubectl()
    out = kubectl(fk, tmp_path, "get", "nodes,pods", "-A")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert re.match(r"NAME\s+STATUS\s+ROLES\s+AGE\s+VERSION", lines[0])
    assert any(re.match(r"node/cpu-node-1\s+Ready,SchedulingDisabled\s+control-plane", ln)
               for ln in lines)
    assert any(re.match(rf"gpu-operator\s+pod/{CRASHING}\s+0/1\s+CrashLoopBackOff\s+42", ln)
               for ln in lines)
    assert any(re.match(r"ml-team\s+pod/train-0\s+0/2\s+Pending", ln) for ln in lines)
    dry = kubectl(fk, tmp_path, "delete", "pod", "train-0", "-n", "ml-team",
                  "--dry-run=server")
    assert dry.returncode == 0, dry.stderr
    (delete,) = fk.requests.find("DELETE", "/api/v1/namespaces/ml-team/pods/train-0")
    assert delete.dry_run and str(delete).endswith(" 200 body:dryRun=All")
    assert fk.store.find("Pod", "train-0", "ml-team") is not None


def test_command_line(tmp_path: Path) -> None:
    cfg = tmp_path / "kubeconfig"
    log = tmp_path / "requests.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fake_kube", "--snapshot", str(SNAPSHOT),
         "--kubeconfig-out", str(cfg), "--log-requests", str(log)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert re.fullmatch(r"ready http://127\.0\.0\.1:\d+\n", line), line
        api_client = config.new_client_from_config(config_file=str(cfg))
        assert len(client.CoreV1Api(api_client).list_node().items) == 3
        api_client.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    assert "GET /api/v1/nodes 200" in log.read_text().splitlines()


def test_kinds_a_cluster_info_dump_cannot_hold_are_unreadable(tmp_path: Path) -> None:
    """A ``cluster-info dump`` has no quotas, RuntimeClasses, ...: served as forbidden (as the
    snapshot view reports them not captured), not as empty lists; pods are served."""
    with FakeKube(ROOT / "tests" / "data" / "loader" / "dump") as fake:
        assert sorted(fake.uncaptured) == [
            "clusterqueues", "configmaps", "controllerrevisions", "deviceclasses",
            "limitranges", "localqueues", "priorityclasses", "resourceclaims",
            "resourceclaimtemplates", "resourceflavors", "resourcequotas", "resourceslices",
            "runtimeclasses"]
        api_client = connect(fake, tmp_path)
        v1 = client.CoreV1Api(api_client)
        with pytest.raises(ApiException) as err:
            v1.list_resource_quota_for_all_namespaces()
        assert err.value.status == 403
        with pytest.raises(ApiException) as err:
            client.NodeV1Api(api_client).list_runtime_class()
        assert err.value.status == 403
        assert v1.list_pod_for_all_namespaces().items
        api_client.close()
    with FakeKube(ROOT / "tests" / "data" / "loader" / "dump", hide_uncaptured=False) as fake:
        assert fake.uncaptured == []
