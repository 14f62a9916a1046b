"""The GPU discovery chain (handlers/chain) and `doctor`, over the doctor_* scenarios.

Assertions are on codes, objects, evidence and actions, never on prose.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.snapshot import load_snapshot
from handlers import doctor
from handlers.chain import check_chain
from handlers.chain.model import DAEMONSET_CHECKS
from handlers.chain.runner import default_plan
from handlers.codes import CODES
from handlers.errors import TargetNotFound
from handlers.logpatterns import classify_log
from handlers.model import Diagnosis, Finding, ObjectRef
from handlers.view import Reader
from tests.findings import commands

SCENARIOS = Path(__file__).parent / "scenarios"
DOCTOR = sorted(p for p in SCENARIOS.glob("doctor_*") if (p / "scenario.yaml").exists())
# Causes reported once per DaemonSet / ConfigMap rather than per node.
CLUSTER_LEVEL = {"RUNTIMECLASS_MISSING", "POD_SECURITY_BLOCKS_OPERATOR",
                 "DEVICE_PLUGIN_NOT_PRIVILEGED", "TIMESLICING_CONFIG_INVALID",
                 "OPERATOR_COMPONENT_FAILING", "OPERATOR_IMAGE_PULL"}


def _scenario(name: str) -> dict[str, Any]:
    data = yaml.safe_load((SCENARIOS / name / "scenario.yaml").read_text())
    assert isinstance(data, dict)
    return data


def _reader(name: str) -> Reader:
    sc = _scenario(name)
    return Reader(load_snapshot((SCENARIOS / name / sc.get("snapshot", "cluster.yaml")).resolve()))


def _run(name: str) -> Diagnosis:
    return doctor.run(_reader(name), _scenario(name).get("target"))


def _one(diag: Diagnosis, code: str, node: str | None = None) -> Finding:
    hits = [f for f in diag.findings if f.code == code
            and (node is None or ObjectRef("Node", node) in f.objects)]
    assert len(hits) == 1, f"{code} on {node}: {[f.objects for f in hits]} in {diag.codes}"
    return hits[0]


def _has(evidence: tuple[str, ...], text: str) -> bool:
    return any(text in e for e in evidence)


# -- every doctor scenario ---------------------------------------------------------------------

@pytest.mark.parametrize("path", DOCTOR, ids=[p.name for p in DOCTOR])
def test_doctor_scenario(path: Path) -> None:
    sc = _scenario(path.name)
    assert sc["command"] == "doctor"
    diag = _run(path.name)
    codes = diag.codes
    for code in sc.get("expect", []) + sc.get("forbid", []):
        assert code in CODES
    assert not [c for c in sc.get("expect", []) if c not in codes], codes
    assert not [c for c in sc.get("forbid", []) if c in codes], codes
    if sc.get("first"):
        assert codes[0] == sc["first"], codes
    for f in diag.problems:
        assert f.evidence and f.fix and f.summary, f.code
        if f.code not in CLUSTER_LEVEL:
            assert any(o.kind == "Node" for o in f.objects), f"{f.code} names no node"
    assert diag.details["rows"], "doctor always returns its table"
    for row in diag.details["rows"]:
        assert set(row) == {"node", "product", "gpus", "labels", "driver", "toolkit", "plugin",
                            "runtime", "mig", "sharing", "verdict"}


def test_every_chain_code_has_a_doctor_scenario() -> None:
    wanted = {"GPU_HARDWARE_NOT_DETECTED", "DRIVER_NOT_READY", "DEVICE_PLUGIN_MISSING",
              "DEVICE_PLUGIN_CRASHLOOP", "DEVICE_PLUGIN_IMAGE_PULL", "OPERATOR_IMAGE_PULL",
              "CUDA_DRIVER_MISMATCH", "NVML_INIT_FAILED", "CONTAINER_RUNTIME_NOT_CONFIGURED",
              "RUNTIMECLASS_MISSING", "DEVICE_PLUGIN_NOT_PRIVILEGED",
              "POD_SECURITY_BLOCKS_OPERATOR", "KUBELET_REGISTRATION_FAILED", "GPU_UNHEALTHY",
              "DEVICE_ADMISSION_FAILED", "GPU_NOT_ADVERTISED", "OPERATOR_COMPONENT_FAILING",
              "NFD_LABELS_MISSING", "MIG_CONFIG_FAILED", "TIMESLICING_CONFIG_INVALID",
              "ALL_CLEAR"}
    expected = {c for p in DOCTOR for c in _scenario(p.name).get("expect", [])}
    assert sorted(wanted - expected) == []


# -- evidence and objects per cause ------------------------------------------------------------

def test_all_clear_lists_the_checks_and_rows() -> None:
    diag = _run("doctor_all_clear")
    assert diag.codes == ["ALL_CLEAR"]
    clear = diag.findings[0]
    for check in ("driver", "device plugin", "kubelet registration", "RuntimeClass"):
        assert check in clear.evidence
    rows = diag.details["rows"]
    assert [r["node"] for r in rows] == ["gpu-a100-0", "gpu-a100-1", "gpu-l4-0"]
    assert {r["verdict"] for r in rows} == {"ok"}
    assert rows[0]["gpus"] == "8/8" and rows[0]["product"] == "NVIDIA-A100-SXM4-80GB"
    assert rows[0]["driver"] == "550.54.15" and rows[0]["plugin"] == "ready"
    assert not [u for u in diag.unchecked if "RuntimeClass" in u]


def test_all_clear_chain_report_api() -> None:
    report = check_chain(_reader("doctor_all_clear"))
    assert [n.node for n in report.nodes] == ["gpu-a100-0", "gpu-a100-1", "gpu-l4-0"]
    assert report.findings == []
    a100 = report.nodes[0]
    assert a100.findings == []
    for check in ("driver", "container toolkit / runtime", "device plugin",
                  "kubelet registration", "GPU health (allocatable = capacity)", "GFD labels"):
        assert check in a100.passed
    assert set(report.checks) <= {*default_plan().checks, *DAEMONSET_CHECKS}


def test_check_chain_on_given_nodes_only() -> None:
    reader = _reader("doctor_mixed")
    nodes = [n for n in reader.list("Node") if n["metadata"]["name"] == "gpu-a100-1"]
    report = check_chain(reader, nodes)
    assert [n.node for n in report.nodes] == ["gpu-a100-1"]
    assert {f.code for f in report.findings} == {"DRIVER_NOT_READY", "GPU_NOT_ADVERTISED"}
    cpu = [n for n in reader.list("Node") if n["metadata"]["name"] == "cpu-m6i-0"]
    assert check_chain(reader, cpu).nodes[0].row["verdict"] == "not a GPU node"


def test_hardware_not_detected_evidence() -> None:
    node = "aks-gpupool-31415926-vmss000002"
    f = _one(_run("doctor_hardware_not_detected"), "GPU_HARDWARE_NOT_DETECTED", node)
    assert "node.kubernetes.io/instance-type=Standard_NC24ads_A100_v4" in f.evidence
    assert "agentpool=gpupool" in f.evidence
    assert _has(f.evidence, "feature.node.kubernetes.io/pci-10de.present")


def test_driver_not_ready_absorbs_the_pods_waiting_for_it() -> None:
    diag = _run("doctor_driver_not_ready")
    f = _one(diag, "DRIVER_NOT_READY", "gpu-a100-1")
    drv = [o for o in f.objects if o.kind == "Pod"]
    assert drv and drv[0].name.startswith("nvidia-driver-daemonset-")
    assert _has(f.evidence, "log: Could not resolve Linux kernel version")
    assert _has(f.evidence, "CrashLoopBackOff")
    assert _has(f.evidence, "waits in init container driver-validation")
    assert _has(f.evidence, "waits in init container toolkit-validation")
    gna = _one(diag, "GPU_NOT_ADVERTISED", "gpu-a100-1")
    assert "node gpu-a100-1 capacity nvidia.com/gpu: absent" in gna.evidence
    assert "cause: DRIVER_NOT_READY" in gna.evidence
    assert not [f for f in diag.findings if ObjectRef("Node", "gpu-a100-0") in f.objects]


def test_host_driver_line_from_validator() -> None:
    f = _one(_run("doctor_host_driver_not_loaded"), "DRIVER_NOT_READY", "gpu-h100-0")
    assert _has(f.evidence, "NVIDIA-SMI has failed because it couldn't communicate with the "
                            "NVIDIA driver")


def test_plugin_missing_explains_selector_taint_absence() -> None:
    f = _one(_run("doctor_device_plugin_missing_selector"), "DEVICE_PLUGIN_MISSING", "gpu-a100-1")
    assert _has(f.evidence, "nodeSelector nvidia.com/gpu.deploy.device-plugin=true: node has "
                            "nvidia.com/gpu.deploy.device-plugin=false")
    assert "nvidia.com/gpu.deploy.device-plugin=true" in commands(f)
    diag = _run("doctor_device_plugin_missing_taint")
    f = _one(diag, "DEVICE_PLUGIN_MISSING", "gpu-l4-1")
    assert _has(f.evidence, "taint dedicated=gpu-training:NoSchedule not tolerated")
    assert ObjectRef("DaemonSet", "nvdp-nvidia-device-plugin", "nvidia-device-plugin") in f.objects
    assert "dedicated" in commands(f)
    # the cordoned node keeps its plugin: DaemonSets tolerate node.kubernetes.io/unschedulable
    assert [r["verdict"] for r in diag.details["rows"] if r["node"] == "gpu-l4-2"] == ["ok"]
    f = _one(_run("doctor_device_plugin_missing_no_daemonset"), "DEVICE_PLUGIN_MISSING")
    assert _has(f.evidence, "no device-plugin DaemonSet")


def test_plugin_crashloop_with_cuda_mismatch_in_termination_message() -> None:
    diag = _run("doctor_device_plugin_crashloop_cuda")
    crash = _one(diag, "DEVICE_PLUGIN_CRASHLOOP", "gpu-a100-1")
    assert _has(crash.evidence, "restartCount: 14")
    cuda = _one(diag, "CUDA_DRIVER_MISMATCH", "gpu-a100-1")
    assert _has(cuda.evidence, "nvidia-container-cli: requirement error: unsatisfied condition: "
                               "cuda>=12.4, please update your driver")
    assert "12.2" in cuda.fix.summary


def test_workload_cuda_and_nvml_name_the_pod() -> None:
    f = _one(_run("doctor_workload_cuda_mismatch"), "CUDA_DRIVER_MISMATCH", "gpu-t4-1")
    assert ObjectRef("Pod", "bert-finetune-0", "ml-team") in f.objects
    assert _has(f.evidence, "RuntimeError: CUDA error: CUDA driver version is insufficient for "
                            "CUDA runtime version")
    f = _one(_run("doctor_workload_nvml"), "NVML_INIT_FAILED", "gpu-a100-0")
    assert _has(f.evidence, "Failed to initialize NVML: Unknown Error")


def test_image_pull_evidence() -> None:
    f = _one(_run("doctor_device_plugin_image_pull"), "DEVICE_PLUGIN_IMAGE_PULL", "gpu-l4-1")
    assert _has(f.evidence, "ImagePullBackOff: Back-off pulling image "
                            "\"nvcr.io/nvidia/k8s-device-plugin:v0.15.0-ubi8\"")
    diag = _run("doctor_operator_image_pull")
    f = _one(diag, "OPERATOR_IMAGE_PULL", "gpu-a100-1")
    assert _has(f.evidence, "nvcr.io/nvidia/driver:550.54.15-ubuntu24.04: not found")
    assert _has(f.evidence, "osImage: Ubuntu 24.04 LTS")
    assert _has(f.evidence, "waits in init container driver-validation")


def test_nvml_and_runtime_lines_are_exact() -> None:
    diag = _run("doctor_device_plugin_nvml")
    nvml = _one(diag, "NVML_INIT_FAILED", "gpu-l4-1")
    assert _has(nvml.evidence, "E0612 10:24:40.512877       1 factory.go:68] Failed to "
                               "initialize NVML: ERROR_LIBRARY_NOT_FOUND.")
    rt = _one(diag, "CONTAINER_RUNTIME_NOT_CONFIGURED", "gpu-l4-1")
    assert _has(rt.evidence, "did you set the docker default runtime to `nvidia`?")
    rt = _one(_run("doctor_runtime_not_configured"), "CONTAINER_RUNTIME_NOT_CONFIGURED",
              "gpu-l4-1")
    assert _has(rt.evidence, "E0612 09:41:07.118396       1 factory.go:113] If this is a GPU "
                             "node, did you configure the NVIDIA Container Toolkit?")
    rt = _one(_run("doctor_runtime_no_nvidia_handler"), "CONTAINER_RUNTIME_NOT_CONFIGURED",
              "gpu-l4-1")
    assert _has(rt.evidence, 'event: Failed to create pod sandbox: rpc error: code = Unknown '
                             'desc = failed to get sandbox runtime: no runtime for "nvidia" is '
                             'configured')


def test_runtimeclass_missing_and_not_checked() -> None:
    diag = _run("doctor_runtimeclass_missing")
    f = _one(diag, "RUNTIMECLASS_MISSING")
    assert ObjectRef("RuntimeClass", "nvidia") in f.objects
    assert ObjectRef("DaemonSet", "nvdp-nvidia-device-plugin", "nvidia-device-plugin") in f.objects
    assert _has(f.evidence, "runtimeClassName=nvidia")
    assert _has(f.evidence, 'pod rejected: RuntimeClass "nvidia" not found')
    assert f.fix.patch is not None and f.fix.patch.kind == "RuntimeClass"
    miss = _one(diag, "DEVICE_PLUGIN_MISSING", "gpu-l4-0")
    assert _has(miss.evidence, "cause: RUNTIMECLASS_MISSING")
    diag = _run("doctor_runtimeclass_not_read")
    assert "RuntimeClass" not in diag.checks
    assert [u for u in diag.unchecked if u.startswith("RuntimeClass: not checked")]


def test_plugin_not_privileged_names_the_daemonset() -> None:
    diag = _run("doctor_device_plugin_not_privileged")
    f = _one(diag, "DEVICE_PLUGIN_NOT_PRIVILEGED")
    assert ObjectRef("DaemonSet", "nvdp-nvidia-device-plugin", "nvidia-device-plugin") in f.objects
    assert ObjectRef("Node", "gpu-l4-0") in f.objects
    assert _has(f.evidence, "no hostPath volume for /var/lib/kubelet/device-plugins")
    crash = _one(diag, "DEVICE_PLUGIN_CRASHLOOP", "gpu-l4-0")
    assert _has(crash.evidence, "listen unix /var/lib/kubelet/device-plugins/nvidia-gpu.sock: "
                                "bind: no such file or directory")


def test_pod_security_once_per_namespace() -> None:
    diag = _run("doctor_pod_security_blocks_operator")
    f = _one(diag, "POD_SECURITY_BLOCKS_OPERATOR")
    assert ObjectRef("Namespace", "gpu-operator") in f.objects
    assert "namespace gpu-operator: pod-security.kubernetes.io/enforce=baseline" in f.evidence
    assert _has(f.evidence, 'violates PodSecurity "baseline:latest"')
    assert "pod-security.kubernetes.io/enforce=privileged" in commands(f)
    _one(diag, "DEVICE_PLUGIN_MISSING", "gpu-h100-2")


def test_kubelet_registration_ready_plugin_and_crashing_plugin() -> None:
    diag = _run("doctor_kubelet_registration_failed")
    ready = _one(diag, "KUBELET_REGISTRATION_FAILED", "gpu-a100-1")
    assert ("restart-device-plugin", "gpu-a100-1") in ready.actions
    assert "node gpu-a100-1 capacity nvidia.com/gpu: absent" in ready.evidence
    assert not [f for f in diag.findings if f.code == "DEVICE_PLUGIN_CRASHLOOP"
                and ObjectRef("Node", "gpu-a100-1") in f.objects]
    crashing = _one(diag, "KUBELET_REGISTRATION_FAILED", "gpu-a100-2")
    assert _has(crashing.evidence, "Could not register device plugin: rpc error")
    _one(diag, "DEVICE_PLUGIN_CRASHLOOP", "gpu-a100-2")


def test_gpu_unhealthy_numbers_xid_and_hardware_fix() -> None:
    f = _one(_run("doctor_gpu_unhealthy"), "GPU_UNHEALTHY", "gpu-a100-1")
    assert "allocatable nvidia.com/gpu: 6 < capacity 8" in f.evidence
    assert _has(f.evidence, "XidCriticalError: Xid=79")
    # Xid 79 is a hardware fault: restarting the plugin would only hide the GPU's state.
    assert f.actions == ()
    assert "kubectl drain gpu-a100-1" in commands(f) and "delete pod" not in commands(f)
    assert _has(f.evidence, "Xid 79 (GPU has fallen off the bus)")


def test_fewer_gpus_than_labelled_is_not_advertised() -> None:
    f = _one(_run("doctor_gpu_fell_off_bus"), "GPU_NOT_ADVERTISED", "gpu-a100-1")
    assert str(f.severity) == "warning"
    assert "node gpu-a100-1 capacity nvidia.com/gpu: 7 < nvidia.com/gpu.count=8" in f.evidence


def test_no_list_is_read_twice_per_reader() -> None:
    reader = _reader("doctor_mixed")
    calls: list[tuple[Any, ...]] = []
    real = reader.view.list

    def counting(kind: str, namespace: str | None = None, **kw: Any) -> Any:
        calls.append((kind, namespace, tuple(sorted(kw.items()))))
        return real(kind, namespace, **kw)

    reader.view.list = counting  # type: ignore[method-assign]
    nodes = reader.list("Node")
    check_chain(reader, nodes[:1])   # scoped: the pods of one node
    check_chain(reader, nodes[1:])
    doctor.run(reader)               # every pod, once
    doctor.run(reader)
    assert len(calls) == len(set(calls))
    assert len([c for c in calls if c[0] == "Pod" and c[1] is None
                and not any(v for _, v in c[2])]) == 1  # every pod, once


def test_device_admission_failed_names_pods() -> None:
    f = _one(_run("doctor_device_admission_failed"), "DEVICE_ADMISSION_FAILED", "gpu-a100-0")
    pods = [o for o in f.objects if o.kind == "Pod"]
    assert len(pods) == 2 and all(o.namespace == "inference" for o in pods)
    assert _has(f.evidence, "UnexpectedAdmissionError: Pod was rejected: Allocate failed due to "
                            "requested number of devices unavailable for nvidia.com/gpu")


def test_operator_component_failing_is_a_warning() -> None:
    f = _one(_run("doctor_operator_component_failing"), "OPERATOR_COMPONENT_FAILING",
             "gpu-h100-0")
    assert str(f.severity) == "warning"
    assert "component dcgm-exporter" in f.evidence
    assert _has(f.evidence, "The third-party Profiling module returned an unrecoverable error")


def test_nfd_labels_missing_lists_them() -> None:
    f = _one(_run("doctor_nfd_labels_missing"), "NFD_LABELS_MISSING", "gpu-l4-0")
    for label in ("nvidia.com/gpu.product", "nvidia.com/gpu.memory", "nvidia.com/gpu.family",
                  "nvidia.com/gpu.compute.major"):
        assert f"{label}: absent" in f.evidence


def test_mig_config_failed_evidence() -> None:
    f = _one(_run("doctor_mig_config_failed"), "MIG_CONFIG_FAILED", "gpu-a100-1")
    assert "nvidia.com/mig.config=all-1g.10gb" in f.evidence
    assert "nvidia.com/mig.config.state=failed" in f.evidence
    assert _has(f.evidence, "Unable to enable MIG Mode for GPU 00000000:10:1C.0: In use by "
                            "another client")


def test_timeslicing_findings_per_node() -> None:
    diag = _run("doctor_timeslicing_invalid")
    key = _one(diag, "TIMESLICING_CONFIG_INVALID", "gpu-a100-0")
    assert "nvidia.com/device-plugin.config=a100-80gb" in key.evidence
    assert _has(key.evidence, "specified config a100-80gb does not exist")
    assert "nvidia.com/device-plugin.config=" in commands(key)
    bad = _one(diag, "TIMESLICING_CONFIG_INVALID", "gpu-a100-1")
    assert _has(bad.evidence, "key any: mapping values are not allowed here")
    f = _one(_run("doctor_timeslicing_not_applied"), "TIMESLICING_CONFIG_INVALID", "gpu-a100-0")
    assert str(f.severity) == "warning"
    assert _has(f.evidence, "nvidia.com/gpu.replicas=1")
    assert _has(f.evidence, "capacity nvidia.com/gpu: 8 (expected 32")
    diag = _run("doctor_timeslicing_configmap_missing")
    missing = [f for f in diag.findings if f.code == "TIMESLICING_CONFIG_INVALID"
               and "configmap gpu-operator/time-slicing-config: not found" in f.evidence]
    assert missing and ObjectRef("ConfigMap", "time-slicing-config", "gpu-operator") in \
        missing[0].objects


def test_mixed_keeps_healthy_node_clean() -> None:
    diag = _run("doctor_mixed")
    rows = {r["node"]: r for r in diag.details["rows"]}
    assert rows["gpu-a100-0"]["verdict"] == "ok"
    assert rows["gpu-a100-1"]["verdict"] == "DRIVER_NOT_READY"
    assert rows["gpu-l4-0"]["verdict"] == "DEVICE_PLUGIN_IMAGE_PULL"
    assert rows["gpu-a100-2"]["verdict"] == "NotReady"
    assert not [f for f in diag.findings if ObjectRef("Node", "gpu-a100-0") in f.objects]
    _one(diag, "NODE_NOT_READY", "gpu-a100-2")
    assert len([f for f in diag.findings if f.code == "GPU_NOT_ADVERTISED"]) == 2


def test_single_node_doctor() -> None:
    diag = _run("doctor_single_node_healthy")
    assert diag.target == "gpu-a100-0"
    assert [r["node"] for r in diag.details["rows"]] == ["gpu-a100-0"]


def test_doctor_on_a_cpu_node_is_not_all_clear() -> None:
    diag = doctor.run(_reader("doctor_mixed"), "cpu-m6i-0")
    assert diag.codes == []
    assert diag.details["rows"][0]["verdict"] == "not a GPU node"
    assert diag.details["note"].startswith("cpu-m6i-0 is not a GPU node")


def test_unknown_node_suggests_close_names() -> None:
    with pytest.raises(TargetNotFound) as err:
        doctor.run(_reader("doctor_mixed"), "gpu-a100-9")
    assert "gpu-a100-0" in err.value.suggestions


# -- log patterns ------------------------------------------------------------------------------

def test_classify_log_returns_exact_lines_most_specific_code() -> None:
    text = (
        "I0612 10:00:00.000001       1 main.go:279] Retrieving plugins.\n"
        "E0612 10:00:00.000002       1 factory.go:68] Failed to initialize NVML: Driver Not "
        "Loaded.\r\n"
        "E0612 10:00:00.000003       1 factory.go:68] Failed to initialize NVML: "
        "ERROR_LIBRARY_NOT_FOUND.\n"
        "I0612 10:00:00.000004       1 factory.go:104] Detected non-NVML platform: could not "
        "load NVML library: libnvidia-ml.so.1: cannot open shared object file\n"
        "E0612 10:00:05.000002       1 factory.go:68] Failed to initialize NVML: Driver Not "
        "Loaded.\n"
    )
    assert classify_log(text) == [
        ("DRIVER_NOT_READY", "E0612 10:00:00.000002       1 factory.go:68] Failed to initialize "
                             "NVML: Driver Not Loaded."),
        ("NVML_INIT_FAILED", "E0612 10:00:00.000003       1 factory.go:68] Failed to initialize "
                             "NVML: ERROR_LIBRARY_NOT_FOUND."),
    ]
    assert classify_log(None) == [] and classify_log("all good\n") == []


@pytest.mark.parametrize("line,code", [
    ("RuntimeError: CUDA error: CUDA driver version is insufficient for CUDA runtime version",
     "CUDA_DRIVER_MISMATCH"),
    ("nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.4, please update "
     "your driver to a newer version, or use an earlier cuda container: unknown",
     "CUDA_DRIVER_MISMATCH"),
    ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure "
     "that the latest NVIDIA driver is installed and running.", "DRIVER_NOT_READY"),
    ("nvidia-container-cli: initialization error: nvml error: driver not loaded: unknown",
     "DRIVER_NOT_READY"),
    ("2022/05/13 23:09:23 Failed to initialize NVML: could not load NVML library.",
     "NVML_INIT_FAILED"),
    ("2022/05/13 23:09:23 If this is a GPU node, did you set the docker default runtime to "
     "`nvidia`?", "CONTAINER_RUNTIME_NOT_CONFIGURED"),
    ('Warning  FailedCreatePodSandBox  kubelet  Failed to create pod sandbox: rpc error: code = '
     'Unknown desc = failed to get sandbox runtime: no runtime for "nvidia" is configured',
     "CONTAINER_RUNTIME_NOT_CONFIGURED"),
    ("E0612 server.go:155] Could not register device plugin: rpc error: code = Unavailable",
     "KUBELET_REGISTRATION_FAILED"),
    ("RegisterPlugin error -- plugin registration failed with err: failed to dial device plugin "
     "with socketPath /var/lib/kubelet/plugins_registry/x.sock", "KUBELET_REGISTRATION_FAILED"),
    ("listen unix /var/lib/kubelet/device-plugins/nvidia-gpu.sock: bind: permission denied",
     "DEVICE_PLUGIN_NOT_PRIVILEGED"),
    ("I0612 health.go:185] XidCriticalError: Xid=79 on Device=GPU-8f6e; marking device as "
     "unhealthy.", "GPU_UNHEALTHY"),
    ("E0612 main.go:126] specified config a100-80gb does not exist",
     "TIMESLICING_CONFIG_INVALID"),
    ("Unable to enable MIG Mode for GPU 00000000:10:1C.0: In use by another client",
     "MIG_CONFIG_FAILED"),
    ("Allocate failed due to requested number of devices unavailable for nvidia.com/gpu. "
     "Requested: 4, Available: 2, which is unexpected", "DEVICE_ADMISSION_FAILED"),
])
def test_classify_line(line: str, code: str) -> None:
    assert classify_log(line) == [(code, line)]


# -- scale (speed is measured in bench/, not here) -------------------------------------------

def _big_cluster(tmp: Path, nodes: int = 200, pods_per_node: int = 10) -> Path:
    """Many copies of one healthy and one broken node, written as a kubectl List."""
    base = load_snapshot(SCENARIOS / "doctor_driver_not_ready" / "snapshot")
    src = {k: base.list(k) for k in ("Node", "Pod", "DaemonSet", "Namespace", "ClusterPolicy",
                                     "RuntimeClass")}
    healthy = next(n for n in src["Node"] if n["metadata"]["name"] == "gpu-a100-0")
    broken = next(n for n in src["Node"] if n["metadata"]["name"] == "gpu-a100-1")
    objs: dict[str, list[dict[str, Any]]] = {k: list(v) for k, v in src.items()
                                             if k not in ("Node", "Pod")}
    objs["Node"], objs["Pod"] = [], []
    for i in range(nodes):
        tmpl_node = broken if i % 100 == 0 else healthy
        name = f"gpu-{i:04d}"
        node = copy.deepcopy(tmpl_node)
        node["metadata"]["name"] = name
        objs["Node"].append(node)
        on_node = [p for p in src["Pod"] if p["spec"].get("nodeName")
                   == tmpl_node["metadata"]["name"]]
        for p in on_node:
            q = copy.deepcopy(p)
            q["metadata"]["name"] = f"{p['metadata']['name']}-{i}"
            q["spec"]["nodeName"] = name
            objs["Pod"].append(q)
        # A GPU pod that runs Ready proves the node has GPUs (knowledge/consistency.yaml):
        # the broken nodes' other pods ask for no GPU.
        gpus = {"limits": {"nvidia.com/gpu": "1"}} if tmpl_node is healthy else {}
        for j in range(pods_per_node - len(on_node)):
            objs["Pod"].append({
                "kind": "Pod",
                "metadata": {"name": f"work-{i}-{j}", "namespace": "ml",
                             "labels": {"app": "trainer"}},
                "spec": {"nodeName": name, "containers": [{"name": "c", "resources": gpus}]},
                "status": {"phase": "Running", "containerStatuses": [
                    {"name": "c", "ready": True, "restartCount": 0,
                     "state": {"running": {"startedAt": "2024-06-12T09:00:00Z"}}}]}})
    items = [o for v in objs.values() for o in v]
    path = tmp / "big.json"
    path.write_text(json.dumps({"kind": "List", "apiVersion": "v1", "items": items}))
    return path


def test_doctor_on_many_nodes_finds_each_broken_one(tmp_path: Path) -> None:
    view = load_snapshot(_big_cluster(tmp_path))
    assert len(view.list("Pod")) == 2000
    diag = doctor.run(Reader(view))
    assert len(diag.details["rows"]) == 200
    broken = sorted(o.name for f in diag.findings if f.code == "DRIVER_NOT_READY"
                    for o in f.objects if o.kind == "Node")
    assert broken == ["gpu-0000", "gpu-0100"]
