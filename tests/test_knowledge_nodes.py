"""GPU nodes and device-plugin pods in every layout (handlers/knowledge/*.yaml)."""

from __future__ import annotations

from typing import Any

import pytest

from handlers.gpu import gpu_meant_by, has_gpu_labels, is_device_plugin_pod
from handlers.knowledge.nodes import node_knowledge, plugin_knowledge


def _pod(name: str, labels: dict[str, str] | None = None, image: str = "busybox",
         hostpath: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": image}]}
    if hostpath:
        spec["volumes"] = [{"name": "dp", "hostPath": {"path": hostpath}}]
    return {"kind": "Pod", "metadata": {"name": name, "labels": labels or {}}, "spec": spec}


DP = "/var/lib/kubelet/device-plugins"
PLUGINS = {
    "static manifest": _pod("nvidia-device-plugin-daemonset-7xq2p",
                            {"name": "nvidia-device-plugin-ds"}),
    "helm chart": _pod("nvdp-x-abcde", {"app.kubernetes.io/name": "nvidia-device-plugin"}),
    "gpu operator": _pod("x-1", {"app": "nvidia-device-plugin-daemonset"}),
    "gke": _pod("nvidia-gpu-device-plugin-small-cos-2jx5s",
                {"k8s-app": "nvidia-gpu-device-plugin"}),
    "hami": _pod("hami-x", {"app.kubernetes.io/component": "hami-device-plugin"}),
    "4paradigm": _pod("vgpu-x", {"app.kubernetes.io/component": "4pd-device-plugin"}),
    "volcano": _pod("v-x", {"name": "volcano-device-plugin"}),
    "openshift 3": _pod("dp-x", {"name": "nvidia-deviceplugin-ds"}),
    "image only": _pod("gpu-plugin-x", {"app": "custom"},
                       "nvcr.io/nvidia/k8s-device-plugin:v0.14.5"),
    "hostpath, nvidia name": _pod("acme-nvidia-plugin-x", {}, "acme/dp:1", DP),
}
NOT_PLUGINS = {
    "sriov plugin mounts the same dir": _pod("kube-sriov-device-plugin-amd64-x",
                                             {"app": "sriovdp"}, "sriov-dp:1", DP),
    "gfd from the plugin image": _pod("nvdp-nvidia-device-plugin-gpu-feature-discovery-x",
                                      {"app.kubernetes.io/name": "nvidia-device-plugin"},
                                      "nvcr.io/nvidia/k8s-device-plugin:v0.15.0"),
    "mps daemon": _pod("nvdp-nvidia-device-plugin-mps-control-daemon-x",
                       {"app.kubernetes.io/name": "nvidia-device-plugin"}),
    "operator validator": _pod("nvidia-device-plugin-validator-x", {"app": "x"}),
    "a workload": _pod("train-0", {"app": "train"}, "nvcr.io/nvidia/pytorch:24.01-py3"),
}


@pytest.mark.parametrize("name", PLUGINS)
def test_every_plugin_layout_is_a_plugin(name: str) -> None:
    assert is_device_plugin_pod(PLUGINS[name])


@pytest.mark.parametrize("name", NOT_PLUGINS)
def test_lookalikes_are_not_plugins(name: str) -> None:
    assert not is_device_plugin_pod(NOT_PLUGINS[name])


def test_each_labelled_layout_is_listed_by_a_selector() -> None:
    from handlers.kube.selectors import match_labels

    sels = plugin_knowledge().selectors()
    for key, value in plugin_knowledge().labels:
        assert any(match_labels(s, {key: value}) for s in sels), (key, value)


def _node(**labels: str) -> dict[str, Any]:
    return {"kind": "Node", "metadata": {"name": "n", "labels": labels}}


GPU_NODES = [
    {"accelerator": "nvidia-tesla-p100"},
    {"accelerator": "nvidia"},
    {"beta.kubernetes.io/instance-type": "p2.xlarge"},
    {"node.kubernetes.io/instance-type": "g4dn.xlarge"},
    {"node.kubernetes.io/instance-type": "Standard_NC6s_v3"},
    {"node.kubernetes.io/instance-type": "BM.GPU.A100-v2.8"},
    {"node.kubernetes.io/instance-type": "a2-highgpu-1g"},
    {"gpu": "on"},
    {"openshift.com/gpu-accelerator": "true"},
    {"kops.k8s.io/instancegroup": "gpu-nodes"},
    {"eks.amazonaws.com/nodegroup": "a100-ng"},
    {"karpenter.k8s.aws/instance-gpu-manufacturer": "nvidia"},
    {"kubernetes.azure.com/accelerator": "nvidia"},
    {"aliyun.accelerator/nvidia_name": "Tesla-V100-SXM2-16GB"},
    {"cloud.google.com/gke-accelerator": "nvidia-l4"},
]
CPU_NODES = [
    {"node.kubernetes.io/instance-type": "g4ad.xlarge"},  # AMD Radeon
    {"node.kubernetes.io/instance-type": "Standard_NV16as_v4"},  # AMD MI25
    {"node.kubernetes.io/instance-type": "m5.large"},
    {"cloud.google.com/gke-nodepool": "default-pool4"},
    {"gpu": "false"},
    {"accelerator": "none"},
    {"nvidia.com/gpu.present": "false"},
]


@pytest.mark.parametrize("labels", GPU_NODES, ids=lambda d: ",".join(d))
def test_gpu_node_labels_of_every_era(labels: dict[str, str]) -> None:
    node = _node(**labels)
    assert has_gpu_labels(node)
    assert gpu_meant_by(node)


@pytest.mark.parametrize("labels", CPU_NODES, ids=lambda d: ",".join(f"{k}={v}" for k, v
                                                                       in d.items()))
def test_not_gpu_nodes(labels: dict[str, str]) -> None:
    assert not has_gpu_labels(_node(**labels))


def test_the_data_names_a_source_for_every_rule() -> None:
    k = node_knowledge()
    assert k.labels and all(r.source.startswith("https://") for r in k.labels)
    assert k.instance_types and k.pool_keys


def test_an_operator_component_mounting_the_plugin_dir_stays_that_component() -> None:
    pod = _pod("nvidia-mig-manager-x", {"app": "nvidia-mig-manager"},
               "nvcr.io/nvidia/cloud-native/k8s-mig-manager:v0.8.0", DP)
    assert not is_device_plugin_pod(pod)


def test_an_operator_component_with_the_plugin_image_stays_that_component() -> None:
    pod = _pod("nvidia-container-toolkit-daemonset-x1",
               {"app": "nvidia-container-toolkit-daemonset"},
               "nvcr.io/nvidia/k8s-device-plugin:v0.15.0", DP)
    assert not is_device_plugin_pod(pod)
