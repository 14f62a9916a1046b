"""A container-hook "no driver" line is read in context: on a node without GPUs, for a pod
that asks none, the hook ran where it should not (the runtime); on a GPU node the driver is
missing. GPU_NOT_REQUESTED stays where the workload's image needs a GPU."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import yaml

from bot.snapshot import load_snapshot
from handlers import why_pending
from handlers.target import parse_target
from handlers.view import Reader
from tests.pending_ctx import SCENARIOS

SCENARIO = SCENARIOS / "plugin-hook-on-cpu-node-default-runtime" / "cluster.yaml"
CPU_NODE = "00-25-90-c0-f7-c8"
PLUGIN = "kube-system/nvidia-device-plugin-daemonset-7wq9x"
# NVIDIA/k8s-device-plugin#1376's hook line, as a kubelet StartError would carry it.
DRIVER_NOT_LOADED = ("failed to create containerd task: failed to create shim task: OCI "
                     "runtime create failed: runc create failed: unable to start container "
                     "process: error during container init: error running hook #0: error "
                     "running hook: exit status 1, stdout: , stderr: nvidia-container-cli: "
                     "initialization error: nvml error: driver not loaded")


def _items() -> list[dict[str, Any]]:
    return copy.deepcopy(yaml.safe_load(SCENARIO.read_text())["items"])


def _run(tmp_path: Path, items: list[dict[str, Any]], target: str) -> Any:
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"kind": "List", "apiVersion": "v1", "items": items}))
    return why_pending.run(Reader(load_snapshot(path)), parse_target(target))


def _node(items: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(o for o in items if o["kind"] == "Node" and o["metadata"]["name"] == name)


def test_hook_on_a_node_without_gpus_is_the_runtime(tmp_path: Path) -> None:
    diag = _run(tmp_path, _items(), PLUGIN)
    assert diag.codes == ["CONTAINER_RUNTIME_NOT_CONFIGURED"]
    f = diag.findings[0]
    assert any("cuda error: unknown error" in e for e in f.evidence)
    assert any(e.startswith(f"node {CPU_NODE}: no GPU resource") and "no NFD labels" in e
               for e in f.evidence)
    assert f.fix.patch is not None and "NVIDIA_VISIBLE_DEVICES" in f.fix.patch.text
    assert "value: void" in f.fix.patch.text


def test_the_same_line_on_a_gpu_node_is_the_driver(tmp_path: Path) -> None:
    """Labelled as a GPU node (GFD's nvidia.com/gpu.present), the node has GPUs to drive:
    the hook belongs there and the line proves the driver missing."""
    items = _items()
    _node(items, CPU_NODE)["metadata"]["labels"]["nvidia.com/gpu.present"] = "true"
    diag = _run(tmp_path, items, PLUGIN)
    assert "DRIVER_NOT_READY" in diag.codes
    assert not any(f.code == "CONTAINER_RUNTIME_NOT_CONFIGURED"
                   and "a node without GPUs" in f.summary for f in diag.findings)


def test_nfd_without_an_nvidia_device_is_named(tmp_path: Path) -> None:
    items = _items()
    _node(items, CPU_NODE)["metadata"]["labels"][
        "feature.node.kubernetes.io/cpu-cpuid.AVX2"] = "true"
    f = _run(tmp_path, items, PLUGIN).findings[0]
    assert f.code == "CONTAINER_RUNTIME_NOT_CONFIGURED"
    assert any("feature.node.kubernetes.io/pci-10de.present absent" in e for e in f.evidence)


def test_cuda_image_without_gpu_request_keeps_gpu_not_requested(tmp_path: Path) -> None:
    """A CUDA-based pod that asks no GPU, on the CPU node: the hook's failure is the runtime,
    and the CUDA image still says the workload may need a GPU it did not request."""
    items = _items()
    uid = "c0ffee00-0000-4000-8000-000000000001"
    items.append({
        "kind": "Pod", "apiVersion": "v1",
        "metadata": {"name": "cuda-job", "namespace": "default", "uid": uid},
        "spec": {"nodeName": CPU_NODE, "containers": [
            {"name": "main", "image": "nvidia/cuda:12.4.1-base-ubuntu22.04",
             "command": ["nvidia-smi"]}]},
        "status": {"phase": "Pending", "startTime": "2018-05-29T08:10:00Z",
                   "containerStatuses": [{
                       "name": "main", "ready": False, "restartCount": 2,
                       "image": "nvidia/cuda:12.4.1-base-ubuntu22.04",
                       "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                       "lastState": {"terminated": {"exitCode": 128, "reason": "StartError",
                                                    "message": DRIVER_NOT_LOADED}}}]}})
    items.append({"kind": "Event", "apiVersion": "v1", "type": "Warning", "reason": "Failed",
                  "message": f"Error: {DRIVER_NOT_LOADED}", "count": 2,
                  "lastTimestamp": "2018-05-29T08:12:39Z",
                  "involvedObject": {"kind": "Pod", "name": "cuda-job", "namespace": "default",
                                     "uid": uid},
                  "metadata": {"name": "cuda-job.1", "namespace": "default"}})
    diag = _run(tmp_path, items, "default/cuda-job")
    assert "CONTAINER_RUNTIME_NOT_CONFIGURED" in diag.codes
    assert "GPU_NOT_REQUESTED" in diag.codes
    assert "DRIVER_NOT_READY" not in diag.codes


def test_doctor_reads_the_plugin_hook_alike() -> None:
    """The node chain reads the failing plugin pod's hook line the same way."""
    from handlers import doctor

    diag = doctor.run(Reader(load_snapshot(SCENARIO)), CPU_NODE)
    assert "CONTAINER_RUNTIME_NOT_CONFIGURED" in diag.codes
    assert "DRIVER_NOT_READY" not in diag.codes
    runtime = next(f for f in diag.findings if f.code == "CONTAINER_RUNTIME_NOT_CONFIGURED")
    assert "a node without GPUs" in runtime.summary and runtime.fix.patch is not None
    # The plugin DaemonSet is kept to GPU nodes (the pod's own opt-out is why-pending's).
    assert runtime.fix.patch.content == {"nvidia.com/gpu.present": "true"}
    crash = next(f for f in diag.findings if f.code == "DEVICE_PLUGIN_CRASHLOOP")
    assert "CONTAINER_RUNTIME_NOT_CONFIGURED" in crash.caused_by
