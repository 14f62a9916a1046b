"""Plugin pods of every layout are found by the live view's narrow reads (each plugin
DaemonSet's selector plus the known plugin labels, never a list of every pod), exactly as a
full scan with ``is_device_plugin_pod`` finds them."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml

from bot.live import open_live_view
from bot.snapshot import load_snapshot
from handlers.chain.inventory import device_plugin_nodes, plugin_nodes_among
from handlers.gpu import is_device_plugin_pod
from handlers.view import Reader
from tests.fake_kube import FakeKube, wait_until

DP = "/var/lib/kubelet/device-plugins"


def _ds(name: str, ns: str, labels: dict[str, str], image: str,
        hostpath: bool = True) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "ctr", "image": image}]}
    if hostpath:
        spec["volumes"] = [{"name": "dp", "hostPath": {"path": DP}}]
    return {"kind": "DaemonSet", "apiVersion": "apps/v1",
            "metadata": {"name": name, "namespace": ns, "uid": f"ds-{name}"},
            "spec": {"selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": spec}}}


def _pod_of(ds: dict[str, Any], node: str, phase: str = "Running") -> dict[str, Any]:
    tmpl = ds["spec"]["template"]
    name = f"{ds['metadata']['name']}-{node}"
    return {"kind": "Pod", "apiVersion": "v1",
            "metadata": {"name": name, "namespace": ds["metadata"]["namespace"],
                         "uid": f"p-{name}", "labels": dict(tmpl["metadata"]["labels"]),
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet",
                                              "name": ds["metadata"]["name"],
                                              "uid": ds["metadata"]["uid"],
                                              "controller": True}]},
            "spec": {**tmpl["spec"], "nodeName": node}, "status": {"phase": phase}}


def _node(name: str) -> dict[str, Any]:
    return {"kind": "Node", "apiVersion": "v1", "metadata": {"name": name, "uid": f"n-{name}"},
            "status": {"capacity": {"cpu": "4"}, "allocatable": {"cpu": "4"}}}


LAYOUTS = [
    (_ds("nvidia-device-plugin-daemonset", "kube-system",
         {"name": "nvidia-device-plugin-ds"}, "nvidia/k8s-device-plugin:1.0.0-beta4"), "n-static"),
    (_ds("hami-device-plugin", "kube-system",
         {"app.kubernetes.io/component": "hami-device-plugin"}, "projecthami/hami:v2.4.0"),
     "n-hami"),
    (_ds("volcano-device-plugin", "kube-system", {"name": "volcano-device-plugin"},
         "projecthami/volcano-vgpu-device-plugin:v1.10.0"), "n-volcano"),
    # Relabelled by hand: found only through its DaemonSet (image, then hostPath + name).
    (_ds("gpu-plugin", "infra", {"app": "gpu-plugin"}, "nvcr.io/nvidia/k8s-device-plugin:v0.17.1"),
     "n-image"),
    (_ds("acme-nvidia-dp", "infra", {"app": "acme"}, "registry.acme/dp:3"), "n-hostpath"),
]
NOT_PLUGINS = [
    (_ds("kube-sriov-device-plugin", "kube-system", {"app": "sriovdp"},
         "ghcr.io/k8snetworkplumbingwg/sriov-network-device-plugin:v3.6"), "n-sriov"),
]


def test_live_reads_find_every_layout_the_function_accepts(tmp_path: Path) -> None:
    objs: list[dict[str, Any]] = []
    for ds, node in LAYOUTS + NOT_PLUGINS:
        objs += [ds, _pod_of(ds, node), _node(node)]
    # A finished plugin pod does not make its node a plugin node.
    old = _ds("nvidia-device-plugin-daemonset", "old", {"name": "nvidia-device-plugin-ds"},
              "nvidia/k8s-device-plugin:1.11")
    objs += [_pod_of(old, "n-done", phase="Succeeded"), _node("n-done")]
    snap = tmp_path / "cluster.yaml"
    snap.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": objs}))
    pods = [o for o in objs if o["kind"] == "Pod"]
    full_scan = {p["spec"]["nodeName"] for p in pods
                 if is_device_plugin_pod(p) and p["status"]["phase"] == "Running"}
    assert full_scan == {node for _, node in LAYOUTS}
    assert device_plugin_nodes(Reader(load_snapshot(snap))) == full_scan
    reader = Reader(load_snapshot(snap))
    assert plugin_nodes_among(reader, reader.list("Pod")) == full_scan
    with FakeKube(snap) as fk:
        view = open_live_view(str(fk.write_kubeconfig(tmp_path / "kc")), timeout=5)
        assert device_plugin_nodes(Reader(view)) == full_scan
        pod_lists = [parse_qs(urlsplit(r.path).query) for r in fk.requests
                     if urlsplit(r.path).path.endswith("/pods")]
    assert pod_lists and all("labelSelector" in q for q in pod_lists)


def scanned(view: Any) -> set[str]:
    """The plugin nodes found by looking at every pod (why-pending with no node scope)."""
    reader = Reader(view)
    return plugin_nodes_among(reader, reader.list("Pod"))


def test_a_warm_cache_s_changed_plugin_pod_is_read_again(tmp_path: Path) -> None:
    # What is worked out per plugin pod is kept by object: the watch cache hands out a new
    # object for a changed pod, so a plugin pod that failed stops counting at once.
    objs: list[dict[str, Any]] = []
    for ds, node in LAYOUTS[:2]:
        objs += [ds, _pod_of(ds, node), _node(node)]
    snap = tmp_path / "cluster.yaml"
    snap.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": objs}))
    with FakeKube(snap) as fk:
        view = open_live_view(str(fk.write_kubeconfig(tmp_path / "kc")), timeout=5)
        cache = view.watch()
        try:
            assert cache.wait_synced(10)
            assert device_plugin_nodes(Reader(view)) == {"n-static", "n-hami"}
            assert device_plugin_nodes(Reader(view)) == {"n-static", "n-hami"}  # kept
            assert scanned(view) == {"n-static", "n-hami"}
            assert scanned(view) == {"n-static", "n-hami"}  # kept
            fk.store.put(_pod_of(LAYOUTS[0][0], "n-static", phase="Failed"))
            wait_until(lambda: device_plugin_nodes(Reader(view)) == {"n-hami"}, timeout=5)
            wait_until(lambda: scanned(view) == {"n-hami"}, timeout=5)
            fk.store.put(_pod_of(LAYOUTS[0][0], "n-static"))
            wait_until(lambda: device_plugin_nodes(Reader(view)) == {"n-static", "n-hami"},
                       timeout=5)
            wait_until(lambda: scanned(view) == {"n-static", "n-hami"}, timeout=5)
        finally:
            view.close()
