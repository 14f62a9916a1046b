"""A small GPU cluster for the sentinel's tests through the fake API server: GPU nodes in
pools, the NVIDIA device-plugin DaemonSet with one Ready pod on each, and the changes a
failing node goes through, made through the API as a kubelet would (status patches)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

Obj = dict[str, Any]
PLUGIN_NS = "gpu-operator"
DS = "nvidia-device-plugin-daemonset"
CONTAINER = "nvidia-device-plugin"
IMAGE = "nvcr.io/nvidia/k8s-device-plugin:v0.17.1"
STARTED = "2026-01-01T00:00:00Z"
REGISTERED_LOG = (
    "I0101 00:00:06.000000       1 main.go:235] Starting NVIDIA Device Plugin\n"
    "I0101 00:00:07.000000       1 server.go:204] Registered device plugin for "
    "'nvidia.com/gpu' with Kubelet\n")

# Privileged, with the kubelet's device-plugin directory: the plugin as its chart runs it.
POD_SPEC: Obj = {
    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
    "containers": [{"name": CONTAINER, "image": IMAGE, "securityContext": {"privileged": True},
                    "volumeMounts": [{"name": "device-plugin",
                                      "mountPath": "/var/lib/kubelet/device-plugins"}]}],
    "volumes": [{"name": "device-plugin",
                 "hostPath": {"path": "/var/lib/kubelet/device-plugins"}}]}


def now_stamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def namespace(name: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def gpu_node(name: str, pool: str, gpus: int = 8) -> Obj:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
        "kubernetes.io/hostname": name, "cloud.google.com/gke-nodepool": pool,
        "nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": str(gpus),
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
        "nvidia.com/gpu.deploy.device-plugin": "true"}},
        "spec": {},
        "status": {"capacity": {"cpu": "96", "memory": "1000Gi", "pods": "110",
                                "nvidia.com/gpu": str(gpus)},
                   "allocatable": {"cpu": "95", "memory": "990Gi", "pods": "110",
                                   "nvidia.com/gpu": str(gpus)},
                   "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                   "lastTransitionTime": STARTED}],
                   "nodeInfo": {"kubeletVersion": "v1.31.4",
                                "containerRuntimeVersion": "containerd://1.7.22"}}}


def daemonset(nodes: int) -> Obj:
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {
        "name": DS, "namespace": PLUGIN_NS, "labels": {"app": DS}},
        "spec": {"selector": {"matchLabels": {"app": DS}}, "template": {
            "metadata": {"labels": {"app": DS}},
            "spec": {"nodeSelector": {"nvidia.com/gpu.deploy.device-plugin": "true"},
                     **POD_SPEC}}},
        "status": {"desiredNumberScheduled": nodes, "currentNumberScheduled": nodes,
                   "numberReady": nodes, "numberAvailable": nodes}}


def plugin_pod_name(node: str) -> str:
    return f"{DS}-{node}"


def plugin_pod(node: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": plugin_pod_name(node), "namespace": PLUGIN_NS, "labels": {"app": DS},
        "creationTimestamp": STARTED,
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": DS,
                             "uid": "ds-nvidia-device-plugin", "controller": True}]},
        "spec": {"nodeName": node, **POD_SPEC},
        "status": running_status()}


def running_status() -> Obj:
    return {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True", "lastTransitionTime": STARTED}],
        "containerStatuses": [{"name": CONTAINER, "ready": True, "restartCount": 0,
                               "image": IMAGE, "state": {"running": {"startedAt": STARTED}}}]}


def crashloop_status(since: str, restarts: int = 4) -> Obj:
    return {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "False", "reason": "ContainersNotReady",
         "lastTransitionTime": since}],
        "containerStatuses": [{
            "name": CONTAINER, "ready": False, "restartCount": restarts, "image": IMAGE,
            "lastState": {"terminated": {"exitCode": 1, "reason": "Error",
                                         "finishedAt": since}},
            "state": {"waiting": {"reason": "CrashLoopBackOff",
                                  "message": "back-off 40s restarting failed container"}}}]}


def cluster(nodes: dict[str, str]) -> list[Obj]:
    """``{node: pool}``: the objects to seed a ``FakeKube`` with (``seed_logs`` after)."""
    out = [namespace("default"), namespace(PLUGIN_NS), namespace("gpubot"),
           daemonset(len(nodes))]
    for name, pool in nodes.items():
        out += [gpu_node(name, pool), plugin_pod(name)]
    return out


def seed_logs(fake: Any, nodes: list[str]) -> None:
    for n in nodes:
        fake.store.set_logs(PLUGIN_NS, plugin_pod_name(n), CONTAINER, REGISTERED_LOG)


def set_allocatable(core: Any, node: str, gpus: int) -> None:
    """What the kubelet does when the plugin reports its GPUs (un)healthy or goes away."""
    core.patch_node_status(node, {"status": {"allocatable": {"nvidia.com/gpu": str(gpus)}}})


def crash_plugin(core: Any, node: str) -> None:
    core.patch_namespaced_pod_status(plugin_pod_name(node), PLUGIN_NS,
                                     {"status": crashloop_status(now_stamp())})
