"""Driver and plugin states read right (issue 23, item 6): a driver pod idle by design, GPUs
vfio-pci holds for VMs, a plugin that found no devices, runtime hints on a node whose
runtime serves GPUs. Each case is a scenario (tests/scenarios/doctor-*); these tests change
one fact of it and assert what the verdict then rests on. Assertions are on codes, objects,
actions and the evidence lines' facts, never on prose."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from bot.snapshot import load_snapshot
from handlers import doctor
from handlers.model import Diagnosis, Finding, ObjectRef, Severity
from handlers.view import Reader

SCENARIOS = Path(__file__).parent / "scenarios"
Obj = dict[str, Any]


def _run(name: str, tmp: Path | None = None, edit: Callable[[list[Obj]], None] | None = None,
         logs: Callable[[str], str] | None = None) -> Diagnosis:
    """doctor on a scenario's snapshot, its objects (and logs) changed by ``edit``."""
    src = SCENARIOS / name / "snapshot"
    if tmp is None:
        return doctor.run(Reader(load_snapshot(src)), None)
    dst = tmp / name
    shutil.copytree(src, dst)
    doc = yaml.safe_load((dst / "cluster.yaml").read_text())
    if edit is not None:
        edit(doc["items"])
    (dst / "cluster.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    if logs is not None:
        (dst / "logs.txt").write_text(logs((dst / "logs.txt").read_text()))
    return doctor.run(Reader(load_snapshot(dst)), None)


def _find(items: list[Obj], kind: str, name: str) -> Obj:
    return next(i for i in items if i["kind"] == kind and i["metadata"]["name"] == name)


def _on(diag: Diagnosis, code: str, node: str) -> list[Finding]:
    return [f for f in diag.findings if f.code == code and ObjectRef("Node", node) in f.objects]


# -- a driver pod that stands down for a host driver -------------------------------------------

def test_driver_pod_waiting_for_a_host_driver_is_no_failure() -> None:
    diag = _run("doctor-driver-preinstalled-manager-waits")
    assert diag.codes == ["ALL_CLEAR"]


def test_the_same_pod_stuck_in_init_without_the_managers_words_still_fails(tmp_path: Path
                                                                          ) -> None:
    diag = _run("doctor-driver-preinstalled-manager-waits", tmp_path,
                logs=lambda t: t.replace("already pre-installed on the node",
                                         "being uninstalled from the node"))
    assert _on(diag, "DRIVER_NOT_READY", "gpu-a100-0")


def test_a_node_labelled_pre_installed_excuses_its_leaving_driver_pod(tmp_path: Path) -> None:
    # No log at all: the operator's label alone says the DaemonSet no longer wants the pod.
    diag = _run("doctor-driver-preinstalled-label-pod-exits", tmp_path,
                logs=lambda t: t.split("==== START logs for container k8s-driver-manager")[0])
    assert diag.codes == ["ALL_CLEAR"]


def test_the_pre_installed_label_does_not_excuse_a_host_without_a_driver() -> None:
    diag = _run("doctor-driver-preinstalled-label-no-host-driver")
    assert diag.root_cause is not None and diag.root_cause.code == "DRIVER_NOT_READY"


# -- GPUs that vfio-pci holds for VM passthrough -----------------------------------------------

def _drop_container_plugin(items: list[Obj]) -> None:
    items.remove(_find(items, "Pod", "nvdp-nvidia-device-plugin-p9lpd"))


def test_a_node_that_only_serves_vms_needs_no_driver(tmp_path: Path) -> None:
    diag = _run("doctor-vfio-passthrough-container-plugin", tmp_path, _drop_container_plugin)
    assert "DRIVER_NOT_READY" not in diag.codes and "ALL_CLEAR" in diag.codes


def test_a_container_plugin_on_a_vm_node_needs_the_driver_vfio_holds() -> None:
    diag = _run("doctor-vfio-passthrough-container-plugin")
    [f] = _on(diag, "DRIVER_NOT_READY", "gpu-l4-1")
    assert f.severity == Severity.CRITICAL
    assert any("nvidia.com/gpu.workload.config=vm-passthrough" in e for e in f.evidence)
    assert any("nvidia.com/AD104GL_L4: 4" in e for e in f.evidence)
    assert any("nvdp-nvidia-device-plugin-p9lpd" in e for e in f.evidence)
    assert "CONTAINER_RUNTIME_NOT_CONFIGURED" not in diag.codes


def test_the_kernels_vfio_line_in_a_driver_log_is_the_drivers_cause(tmp_path: Path) -> None:
    line = "[ 3641.841149] NVRM: GPU 0000:01:00.0 is already bound to vfio-pci."

    def crash(items: list[Obj]) -> None:
        pod = _find(items, "Pod", "nvidia-driver-daemonset-gpptl")
        cs = pod["status"]["containerStatuses"][0]
        cs.update({"ready": False, "restartCount": 6, "state": {"waiting": {
            "reason": "CrashLoopBackOff", "message": "back-off 5m0s"}}})
        for c in pod["status"]["conditions"]:
            if c["type"] in ("Ready", "ContainersReady"):
                c["status"] = "False"

    diag = _run("doctor_all_clear", tmp_path, crash, logs=lambda t: t + (
        "==== START logs for container nvidia-driver-ctr of pod "
        "gpu-operator/nvidia-driver-daemonset-gpptl ====\n"
        f"Loading NVIDIA driver kernel modules...\n{line}\n"
        "modprobe: ERROR: could not insert 'nvidia': No such device\n"
        "==== END logs for container nvidia-driver-ctr of pod "
        "gpu-operator/nvidia-driver-daemonset-gpptl ====\n"))
    [f] = _on(diag, "DRIVER_NOT_READY", "gpu-a100-0")
    assert any(line in e for e in f.evidence)
    assert "nvidia.com/gpu.workload.config=container" in "\n".join(f.fix.commands)


def test_a_vm_plugin_the_nvidia_hook_fails_is_the_runtimes_fault() -> None:
    diag = _run("doctor-vfio-vm-plugin-nvidia-default-runtime")
    assert diag.root_cause is not None
    assert diag.root_cause.code == "CONTAINER_RUNTIME_NOT_CONFIGURED"
    assert "DRIVER_NOT_READY" not in diag.codes


# -- a plugin that found no devices ------------------------------------------------------------

def test_a_plugin_that_found_no_devices_is_restarted_not_reregistered() -> None:
    diag = _run("doctor-plugin-no-devices-after-reboot")
    assert "KUBELET_REGISTRATION_FAILED" not in diag.codes
    [f] = _on(diag, "GPU_NOT_ADVERTISED", "gpu-l4-1")
    assert any("No devices found. Waiting indefinitely." in e for e in f.evidence)
    assert ObjectRef("Pod", "nvdp-nvidia-device-plugin-p9lpd", "nvidia-device-plugin") in f.objects


def test_a_ready_plugin_that_says_nothing_is_still_unregistered(tmp_path: Path) -> None:
    diag = _run("doctor-plugin-no-devices-after-reboot", tmp_path,
                logs=lambda t: t.replace("No devices found. Waiting indefinitely.",
                                         "Starting GRPC server for 'nvidia.com/gpu'"))
    assert _on(diag, "KUBELET_REGISTRATION_FAILED", "gpu-l4-1")


# -- runtime hints where the runtime serves GPUs ----------------------------------------------

def test_a_plugin_release_that_cannot_find_nvml_is_the_plugins_fault() -> None:
    diag = _run("doctor-plugin-v018-runtime-configured")
    assert diag.root_cause is not None and diag.root_cause.code == "DEVICE_PLUGIN_CRASHLOOP"
    [f] = [f for f in diag.findings if f.code == "DEVICE_PLUGIN_CRASHLOOP"]
    assert any("inference/triton-0" in e for e in f.evidence)
    assert "DEVICE_DISCOVERY_STRATEGY=nvml" in f.fix.summary


def test_gpu_pods_started_after_the_plugin_prove_nothing_about_it(tmp_path: Path) -> None:
    # A containerd reconfigured under a running plugin: the GPU pods are older than the
    # runtime change but younger than the plugin pod, so the hints stand.
    def later(items: list[Obj]) -> None:
        for name in ("triton-0", "triton-1"):
            _find(items, "Pod", name)["status"]["startTime"] = "2024-06-12T10:00:00Z"

    diag = _run("doctor-plugin-v018-runtime-configured", tmp_path, later)
    assert diag.root_cause is not None
    assert diag.root_cause.code == "CONTAINER_RUNTIME_NOT_CONFIGURED"


def test_a_plugin_under_the_nvidia_runtime_class_shows_the_handler(tmp_path: Path) -> None:
    def runtime_class(items: list[Obj]) -> None:
        for name in ("triton-0", "triton-1"):
            items.remove(_find(items, "Pod", name))
        items.append({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
                      "metadata": {"name": "nvidia", "uid": "0b0b0b0b-1111-4222-8333-4444"},
                      "handler": "nvidia"})
        for i in items:
            if i["kind"] == "Pod" and i["metadata"]["name"].startswith("nvdp-"):
                i["spec"]["runtimeClassName"] = "nvidia"

    diag = _run("doctor-plugin-v018-runtime-configured", tmp_path, runtime_class)
    assert "CONTAINER_RUNTIME_NOT_CONFIGURED" not in diag.codes
    assert diag.root_cause is not None and diag.root_cause.code == "DEVICE_PLUGIN_CRASHLOOP"


def test_hami_with_the_same_check_is_not_blamed_on_the_runtime() -> None:
    diag = _run("doctor-hami-plugin-crash-runtime-configured")
    assert diag.root_cause is not None and diag.root_cause.code == "DEVICE_PLUGIN_CRASHLOOP"
    assert not {"CONTAINER_RUNTIME_NOT_CONFIGURED", "KUBELET_REGISTRATION_FAILED"} & set(
        diag.codes)
