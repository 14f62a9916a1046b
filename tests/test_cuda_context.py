"""What an insufficient-driver line proves, decided by versions and the node's other pods."""

from __future__ import annotations

from typing import Any

from handlers.chain.cuda_context import read_insufficient


def _pod(name: str, image: str, *, rc: str | None = None, gpu: bool = True,
         running: bool = False) -> dict[str, Any]:
    c: dict[str, Any] = {"name": "main", "image": image}
    if gpu:
        c["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
    spec: dict[str, Any] = {"containers": [c], "nodeName": "gpu-0"}
    if rc:
        spec["runtimeClassName"] = rc
    status: dict[str, Any] = {"phase": "Running", "containerStatuses": [
        {"name": "main", "ready": running}]}
    return {"metadata": {"name": name, "namespace": "ml"}, "spec": spec, "status": status}


CUDA124 = "nvidia/cuda:12.4.1-runtime-ubuntu22.04"
RC = [{"metadata": {"name": "nvidia"}, "handler": "nvidia"}]


def test_driver_too_old_is_a_mismatch_with_versions_from_the_table() -> None:
    r = read_insufficient(_pod("train", CUDA124), "gpu-0", driver=("470.223.02", "GFD"),
                          node_cuda="11.4", siblings=[], runtime_classes=RC)
    assert r is not None and r.code == "CUDA_DRIVER_MISMATCH"
    assert "CUDA <= 11.4" in r.fix.summary and ">= 550.54.14" in r.fix.summary
    assert r.fix.patch is not None  # keep it on nodes with driver major > 549
    terms = r.fix.patch.content["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["549"]
    assert any("550.54.14" in e and "525.60.13" in e for e in r.evidence)


def test_driver_new_enough_without_runtimeclass_is_the_runtime() -> None:
    r = read_insufficient(_pod("train", CUDA124), "gpu-0", driver=("535.104.05", "GFD"),
                          node_cuda=None, siblings=[], runtime_classes=RC)
    assert r is not None and r.code == "CONTAINER_RUNTIME_NOT_CONFIGURED"
    assert r.fix.patch is not None and r.fix.patch.content == {"runtimeClassName": "nvidia"}


def test_a_sibling_using_the_gpu_the_same_way_clears_the_runtime() -> None:
    sibling = _pod("notebook", "jupyter/base:latest", running=True)
    r = read_insufficient(_pod("train", CUDA124), "gpu-0", driver=("550.54.15", "GFD"),
                          node_cuda=None, siblings=[sibling], runtime_classes=RC)
    assert r is not None and r.code == "NVML_INIT_FAILED"
    assert any("ml/notebook" in e and "not the cause" in e for e in r.evidence)


def test_a_sibling_with_another_runtime_class_proves_nothing() -> None:
    sibling = _pod("notebook", "jupyter/base:latest", rc="nvidia", running=True)
    r = read_insufficient(_pod("train", CUDA124), "gpu-0", driver=("550.54.15", "GFD"),
                          node_cuda=None, siblings=[sibling], runtime_classes=RC)
    assert r is not None and r.code == "CONTAINER_RUNTIME_NOT_CONFIGURED"


def test_a_running_device_plugin_is_no_sibling() -> None:
    # Recent plugins load NVML from a hostPath mount of the driver root, not via the runtime.
    plugin = _pod("nvidia-device-plugin-daemonset-x", "nvcr.io/nvidia/k8s-device-plugin:v0.17.0",
                  gpu=False, running=True)
    plugin["metadata"]["labels"] = {"app": "nvidia-device-plugin-daemonset"}
    r = read_insufficient(_pod("train", CUDA124), "gpu-0", driver=("550.54.15", "GFD"),
                          node_cuda=None, siblings=[plugin], runtime_classes=RC)
    assert r is not None and r.code == "CONTAINER_RUNTIME_NOT_CONFIGURED"


def test_unknown_versions_leave_the_line_as_it_is() -> None:
    assert read_insufficient(_pod("train", "nvcr.io/nvidia/pytorch:24.05-py3"), "gpu-0",
                             driver=("470.223.02", "GFD"), node_cuda="11.4", siblings=[],
                             runtime_classes=RC) is None
    assert read_insufficient(_pod("train", CUDA124), "gpu-0", driver=None, node_cuda=None,
                             siblings=[], runtime_classes=RC) is None
