"""Volcano's device plugins count GPUs as volcano.sh/vgpu-number (vGPU, HAMi-core) and
volcano.sh/gpu-number: a pod asking one is a GPU pod, a node advertising one a GPU node.
vgpu-memory / vgpu-cores size a share and are neither counts nor resources a node must list.
Resource names: https://github.com/Project-HAMi/volcano-vgpu-device-plugin (README) and
volcano-sh/volcano pkg/scheduler/api/devices/config/vgpu.go."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.snapshot import load_snapshot
from handlers import doctor, nodes, why_pending
from handlers.gpu import advertises_gpus, is_gpu_node, is_gpu_resource
from handlers.pending.context import main_gpu_request
from handlers.pending.spec import check_gpu_not_requested, check_unknown_resource
from handlers.scheduler.filters import simulate
from handlers.target import parse_target
from handlers.view import Reader
from tests.pending_ctx import PendingContext

# HAMi#1376 (https://github.com/Project-HAMi/HAMi/issues/1376): k3s + CRI-O, the Volcano vGPU
# plugin serving 8 GPUs split 10 ways; the NVIDIA plugin advertises nvidia.com/gpu: 0.
CAPACITY = {"cpu": "128", "ephemeral-storage": "102626232Ki", "hugepages-1Gi": "0",
            "hugepages-2Mi": "4Gi", "memory": "1869512080Ki", "nvidia.com/gpu": "0",
            "pods": "110", "volcano.sh/vgpu-cores": "800", "volcano.sh/vgpu-memory": "0",
            "volcano.sh/vgpu-number": "80"}
PLUGIN_IMAGE = "docker.io/projecthami/volcano-vgpu-device-plugin:v1.11.0"


def _node() -> dict[str, Any]:
    return {"kind": "Node", "apiVersion": "v1",
            "metadata": {"name": "gpu-node-1", "uid": "n1",
                         "labels": {"kubernetes.io/hostname": "gpu-node-1"}},
            "status": {"capacity": dict(CAPACITY), "allocatable": dict(CAPACITY),
                       "conditions": [{"type": "Ready", "status": "True"}],
                       "nodeInfo": {"containerRuntimeVersion": "cri-o://1.33.4"}}}


def _plugin() -> dict[str, Any]:
    state = {"running": {"startedAt": "2025-09-27T09:00:00Z"}}
    return {"kind": "Pod", "apiVersion": "v1",
            "metadata": {"name": "volcano-device-plugin-x2v9k", "namespace": "kube-system",
                         "uid": "p1", "labels": {"name": "volcano-device-plugin"}},
            "spec": {"nodeName": "gpu-node-1", "containers": [
                {"name": "volcano-device-plugin", "image": PLUGIN_IMAGE}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
                       "containerStatuses": [{"name": "volcano-device-plugin", "ready": True,
                                              "restartCount": 0, "image": PLUGIN_IMAGE,
                                              "state": state}]}}


def _vgpu_pod(name: str, limits: dict[str, str], **status: Any) -> dict[str, Any]:
    """The README's example pod: limits only (the API server copies them to requests)."""
    return {"kind": "Pod", "apiVersion": "v1",
            "metadata": {"name": name, "namespace": "default", "uid": f"u-{name}"},
            "spec": {"schedulerName": "volcano", "containers": [
                {"name": "cuda-container", "image": "nvidia/cuda:9.0-devel",
                 "command": ["sleep"], "args": ["100000"],
                 "resources": {"limits": limits, "requests": dict(limits)}}]},
            "status": status or {"phase": "Pending"}}


def _reader(tmp_path: Path, *items: dict[str, Any]) -> Reader:
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"kind": "List", "apiVersion": "v1", "items": list(items)}))
    return Reader(load_snapshot(path))


@pytest.mark.parametrize(("name", "counts"), [
    ("volcano.sh/vgpu-number", True), ("volcano.sh/gpu-number", True),
    ("volcano.sh/vgpu-memory", False), ("volcano.sh/vgpu-cores", False),
    ("volcano.sh/vgpu-memory-percentage", False), ("volcano.sh/gpu-memory", False),
])
def test_only_volcano_counts_are_gpu_resources(name: str, counts: bool) -> None:
    assert is_gpu_resource(name) is counts


def test_a_pod_asking_vgpus_is_a_gpu_pod() -> None:
    pod = _vgpu_pod("gpu-pod1", {"volcano.sh/vgpu-number": "2",
                                 "volcano.sh/vgpu-memory": "3000",
                                 "volcano.sh/vgpu-cores": "50"})
    assert main_gpu_request(pod) == ("volcano.sh/vgpu-number", 2.0)


def test_a_node_advertising_vgpus_is_a_gpu_node() -> None:
    node = _node()
    assert advertises_gpus(node) and is_gpu_node(node)


def test_share_sizes_need_not_be_advertised(tmp_path: Path) -> None:
    """vgpu-cores is a share size Volcano's fit ignores: a node listing only vgpu-number
    and vgpu-memory (the README's node) still fits, and no UNKNOWN_GPU_RESOURCE."""
    node = _node()
    for field in ("capacity", "allocatable"):
        del node["status"][field]["volcano.sh/vgpu-cores"]
    pod = _vgpu_pod("gpu-pod1", {"volcano.sh/vgpu-number": "2",
                                 "volcano.sh/vgpu-memory": "3000",
                                 "volcano.sh/vgpu-cores": "50"})
    fit, = simulate(pod, [node], {})
    assert fit.fits, fit.rejections
    reader = _reader(tmp_path, node, pod)
    ctx = PendingContext(reader, pod, True, "default")
    assert check_unknown_resource(ctx) == []
    assert check_gpu_not_requested(ctx) == []


def test_doctor_and_nodes_count_the_vgpu_node(tmp_path: Path) -> None:
    reader = _reader(tmp_path, _node(), _plugin())
    diag = doctor.run(reader)
    assert not {"GPU_NOT_ADVERTISED", "KUBELET_REGISTRATION_FAILED",
                "DEVICE_PLUGIN_MISSING"} & set(diag.codes)
    listing = nodes.run(_reader(tmp_path, _node(), _plugin()))
    row, = listing.details["rows"]
    assert row["node"] == "gpu-node-1"
    assert row["other_resources"]["volcano.sh/vgpu-number"] == 80


def test_admission_rejected_vgpu_pod_is_diagnosed_not_gpu_not_requested(
        tmp_path: Path) -> None:
    """volcano-sh/devices#42 (https://github.com/volcano-sh/devices/issues/42): the plugin's
    Allocate failed, the kubelet rejected a pod asking volcano.sh/vgpu-number: 2."""
    msg = ("Pod was rejected: Allocate failed due to rpc error: code = Unavailable desc = "
           "error reading from server: EOF, which is unexpected")
    pod = _vgpu_pod("pod1", {"volcano.sh/vgpu-number": "2"}, phase="Failed",
                    reason="UnexpectedAdmissionError", message=msg,
                    startTime="2023-07-06T08:59:05Z")
    pod["spec"]["nodeName"] = "gpu-node-1"
    pod["spec"]["containers"][0]["image"] = "nvidia/cuda:10.1-base-ubuntu18.04"
    diag = why_pending.run(_reader(tmp_path, _node(), _plugin(), pod), parse_target("default/pod1"))
    assert "DEVICE_ADMISSION_FAILED" in diag.codes
    assert not {"GPU_NOT_REQUESTED", "POD_NOT_PENDING", "ALL_CLEAR"} & set(diag.codes)


def test_the_scheduler_knows_the_same_gpu_resources() -> None:
    """handlers.scheduler keeps its own copy (it imports only handlers.kube)."""
    from handlers.gpu import OTHER_GPU_RESOURCES
    from handlers.scheduler import filters

    assert filters._OTHER_GPU_RESOURCES == OTHER_GPU_RESOURCES
