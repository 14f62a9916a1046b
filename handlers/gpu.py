"""What makes a node a GPU node, and which resource names are GPUs.

Conventions from ``shared/spec/finding-codes.md``: a node is a GPU node when it advertises
a GPU resource in capacity, carries GPU labels, or runs a device-plugin pod.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import Any, NamedTuple

from handlers.knowledge.nodes import gpu_label_evidence, plugin_evidence
from handlers.kube.quantity import parse_quantity
from handlers.memo import Memos, Table

Obj = dict[str, Any]

GPU_RESOURCE = "nvidia.com/gpu"
SHARED_GPU_RESOURCE = "nvidia.com/gpu.shared"
MIG_RESOURCE_RE = re.compile(r"^nvidia\.com/mig-\d+g\.\d+gb(\.me)?$")
# Other vendors' GPU resources, so that a typo check knows what a GPU resource looks like.
# Volcano's device plugins count NVIDIA GPUs under their own names: vGPUs
# (volcano.sh/vgpu-number, device-split-count per card:
# https://github.com/Project-HAMi/volcano-vgpu-device-plugin README) and whole cards
# (volcano.sh/gpu-number: https://volcano.sh/en/docs/user-guide/how_to_use_gpu_number/).
# Their siblings volcano.sh/vgpu-memory, vgpu-cores, vgpu-memory-percentage and
# gpu-memory size a share of a card; they are not GPU counts and are left out.
VOLCANO_GPU_RESOURCES = ("volcano.sh/vgpu-number", "volcano.sh/gpu-number")
OTHER_GPU_RESOURCES = ("amd.com/gpu", "gpu.intel.com/i915", "gpu.intel.com/xe",
                       *VOLCANO_GPU_RESOURCES)

NFD_PCI_NVIDIA = "feature.node.kubernetes.io/pci-10de.present"

GFD_LABELS = ("nvidia.com/gpu.product", "nvidia.com/gpu.memory", "nvidia.com/gpu.family",
              "nvidia.com/gpu.compute.major")
MIG_STRATEGY_LABEL = "nvidia.com/mig.strategy"
MIG_CONFIG_STATE_LABEL = "nvidia.com/mig.config.state"
# mig-manager's nvidia.com/mig.config.state values while a node's MIG config is not in place.
MIG_NOT_APPLIED = ("failed", "pending", "rebooting")
DEVICE_PLUGIN_CONFIG_LABEL = "nvidia.com/device-plugin.config"


def is_gpu_resource(name: str) -> bool:
    # Any nvidia.com/ resource counts: gpu, gpu.shared, MIG profiles, renamed shared ones.
    return name.startswith("nvidia.com/") or name in OTHER_GPU_RESOURCES


def labels(obj: Mapping[str, Any]) -> dict[str, str]:
    return obj.get("metadata", {}).get("labels") or {}


def name_of(obj: Mapping[str, Any]) -> str:
    return str(obj.get("metadata", {}).get("name", ""))


def ns_of(obj: Mapping[str, Any]) -> str:
    return str(obj.get("metadata", {}).get("namespace") or "")


def gpu_resources(node: Mapping[str, Any], field: str = "capacity") -> dict[str, float]:
    """GPU-like extended resources of a node (``capacity`` or ``allocatable``)."""
    res = node.get("status", {}).get(field) or {}
    return {k: parse_quantity(v) for k, v in res.items() if is_gpu_resource(k)}


def gpu_count(node: Mapping[str, Any], field: str = "capacity",
              resource: str = GPU_RESOURCE) -> float:
    return parse_quantity((node.get("status", {}).get(field) or {}).get(resource))


def has_gpu_labels(node: Mapping[str, Any]) -> bool:
    """The node is meant to have GPUs: GFD/NFD/cloud/legacy labels, a GPU instance type or
    pool (the rules and their sources: handlers/knowledge/gpu_nodes.yaml)."""
    return bool(gpu_label_evidence(node))


def advertises_gpus(node: Mapping[str, Any]) -> bool:
    return any(v > 0 for v in gpu_resources(node).values())


class GpuTraits(NamedTuple):
    node: Mapping[str, Any]
    name: str
    gpu_like: bool  # advertises GPUs or is labelled for them
    offered: frozenset[str]  # GPU resources listed in allocatable (even at 0)
    driver: str | None  # driver_version
    cuda: str | None  # cuda_version


# node name -> its traits, in each Memos; see gpu_traits
_TRAITS: Table[str, GpuTraits] = Table(50_000)


def gpu_traits(node: Mapping[str, Any], memos: Memos | None = None) -> GpuTraits:
    """What diagnoses ask of every node, remembered in ``memos`` (the diagnosis's when None,
    see handlers/memo.py) for the node object when it carries a uid (API objects are
    replaced, never edited, when they change), as ``pod_facts`` does for pods. A node's
    newer version takes the older one's entry."""
    meta = node.get("metadata") or {}
    name = str(meta.get("name") or "")
    kept = _TRAITS.of(memos)
    hit = kept.get(name) if kept is not None else None
    if hit is not None and hit.node is node:
        return hit
    alloc = (node.get("status") or {}).get("allocatable") or {}
    traits = GpuTraits(node, name, advertises_gpus(node) or has_gpu_labels(node),
                       frozenset(r for r in alloc if is_gpu_resource(r)),
                       driver_version(node), cuda_version(node))
    if kept is not None and meta.get("uid"):
        kept.keep(name, traits)
    return traits


def is_gpu_node(node: Mapping[str, Any], plugin_nodes: Collection[str] = ()) -> bool:
    """Advertises GPUs, is labelled for them, or runs a device plugin."""
    traits = gpu_traits(node)
    return traits.gpu_like or traits.name in plugin_nodes


def seen_gpu_count(node: Mapping[str, Any]) -> int | None:
    """How many GPUs the driver enumerated, as GFD labelled them (``nvidia.com/gpu.count``):
    a GPU that fell off the bus is not among them."""
    try:
        return int(labels(node)["nvidia.com/gpu.count"])
    except (KeyError, ValueError):
        return None


def gpu_product(node: Mapping[str, Any]) -> str:
    lab = labels(node)
    return (lab.get("nvidia.com/gpu.product") or lab.get("cloud.google.com/gke-accelerator")
            or lab.get("k8s.amazonaws.com/accelerator") or "unknown")


def gpu_memory_mib(node: Mapping[str, Any]) -> int | None:
    try:
        return int(labels(node)["nvidia.com/gpu.memory"])
    except (KeyError, ValueError):
        return None


# GPU operator pods, recognised by the labels the operator sets.
OPERATOR_COMPONENTS = {
    "nvidia-driver-daemonset": "driver",
    "nvidia-container-toolkit-daemonset": "toolkit",
    "nvidia-operator-validator": "validator",
    "nvidia-cuda-validator": "validator",
    "nvidia-dcgm-exporter": "dcgm-exporter",
    "nvidia-dcgm": "dcgm",
    "gpu-feature-discovery": "gfd",
    "nvidia-mig-manager": "mig-manager",
    "node-feature-discovery": "nfd",
    "nfd-worker": "nfd",
    "gpu-operator-node-feature-discovery-worker": "nfd",
    # One-shot validation pods the operator validator starts, and GKE's driver installer.
    "nvidia-device-plugin-validator": "validator",
    "nvidia-driver-installer": "driver",
}
def _app(obj: Mapping[str, Any]) -> str:
    lab = labels(obj)
    return (lab.get("app") or lab.get("app.kubernetes.io/name") or lab.get("k8s-app")
            or lab.get("name") or "")


# The NVIDIA DRA driver (NVIDIA/k8s-dra-driver-gpu, deployments/helm): its kubelet plugin
# publishes the node's GPUs as ResourceSlices, the device plugin's place in the chain.
DRA_COMPONENT_LABELS = ("nvidia-dra-driver-gpu-component", "dra-driver-nvidia-gpu-component")


def dra_component(pod: Mapping[str, Any]) -> str | None:
    """"kubelet-plugin" or "controller" for the NVIDIA DRA driver's pods, else None."""
    lab = labels(pod)
    comp = next((lab[k] for k in DRA_COMPONENT_LABELS if lab.get(k)), None)
    if comp is None and "dra-driver" in name_of(pod):
        name = name_of(pod)
        comp = ("kubelet-plugin" if "kubelet-plugin" in name else
                "controller" if "-controller-" in name else None)
    return comp


def is_device_plugin_pod(pod: Mapping[str, Any]) -> bool:
    """The one test for an NVIDIA device-plugin pod (or DaemonSet pod template), in every
    layout: upstream manifest, Helm chart, GPU operator, GKE/AKS managed plugins, HAMi,
    4paradigm and Volcano vGPU; by label, name, image or a GPU-looking pod mounting the
    kubelet's device-plugin directory (handlers/knowledge/device_plugins.yaml). The NVIDIA
    DRA driver's kubelet plugin stands at the same stage of the chain."""
    if dra_component(pod) == "kubelet-plugin":
        return True
    why = plugin_evidence(pod)
    if why is None:
        return False
    # A pod labelled as a plugin is one; otherwise a GPU operator component that shares the
    # plugin's image (GFD, MPS daemon) or mounts its directory is that component.
    return why.startswith("label") or operator_component(pod) is None


def operator_component(pod: Mapping[str, Any]) -> str | None:
    """The GPU operator component a pod belongs to ("driver", "toolkit", ...), or None."""
    app = _app(pod)
    if app in OPERATOR_COMPONENTS:
        return OPERATOR_COMPONENTS[app]
    name = name_of(pod)
    for prefix, comp in OPERATOR_COMPONENTS.items():
        if name.startswith(prefix + "-"):
            return comp
    if app == "node-feature-discovery" or "node-feature-discovery-worker" in name:
        return "nfd"
    if dra_component(pod) == "controller":
        return "dra-controller"
    return None


# --- Discovery-chain helpers (handlers/chain) -------------------------------------------

NFD_PREFIX = "feature.node.kubernetes.io/"
_NFD_PCI_NVIDIA_RE = re.compile(r"^feature\.node\.kubernetes\.io/pci-(?:[0-9a-f]{2,4}_)?10de"
                                r"(?:_[0-9a-f]{4})?\.present$")


def nfd_running(node: Mapping[str, Any]) -> bool:
    """NFD labelled this node (any feature.node.kubernetes.io/ label), so its PCI scan ran."""
    return any(k.startswith(NFD_PREFIX) for k in labels(node))


def nfd_pci_nvidia(node: Mapping[str, Any]) -> str | None:
    """The NFD label saying an NVIDIA (vendor 10de) PCI device is present, as ``key=value``."""
    for k, v in labels(node).items():
        if _NFD_PCI_NVIDIA_RE.match(k) and v not in ("false", ""):
            return f"{k}={v}"
    return None


def gpu_meant_by(node: Mapping[str, Any]) -> list[str]:
    """The labels that say the node is meant to have GPUs, as ``key=value``."""
    return gpu_label_evidence(node)


def driver_version(node: Mapping[str, Any]) -> str | None:
    """The NVIDIA driver version GFD labelled (``550.54.15``), when it did."""
    lab = labels(node)
    full = lab.get("nvidia.com/cuda.driver-version.full")
    if full:
        return full
    parts = [lab.get(f"nvidia.com/cuda.driver.{p}")
             or lab.get(f"nvidia.com/cuda.driver-version.{p}") for p in ("major", "minor", "rev")]
    if parts[0]:
        return ".".join(p for p in parts if p)
    return None


def cuda_version(node: Mapping[str, Any]) -> str | None:
    """The highest CUDA version the node's driver supports (GFD ``cuda.runtime``), e.g. 12.2."""
    lab = labels(node)
    full = lab.get("nvidia.com/cuda.runtime-version.full")
    if full:
        return full
    major = lab.get("nvidia.com/cuda.runtime.major") or lab.get(
        "nvidia.com/cuda.runtime-version.major")
    minor = lab.get("nvidia.com/cuda.runtime.minor") or lab.get(
        "nvidia.com/cuda.runtime-version.minor")
    if major:
        return f"{major}.{minor}" if minor else major
    return None


def is_operator_controller(pod: Mapping[str, Any]) -> bool:
    """The gpu-operator's own controller pod (Deployment gpu-operator)."""
    lab = labels(pod)
    return lab.get("app") == "gpu-operator" or (
        lab.get("app.kubernetes.io/component") == "gpu-operator"
        and "node-feature-discovery" not in name_of(pod))


def requests_gpu(pod: Mapping[str, Any]) -> bool:
    """Any container (or init container) asks for a GPU resource (``is_gpu_resource``)."""
    spec = pod.get("spec") or {}
    for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        res = c.get("resources") or {}
        for part in ("limits", "requests"):
            for k, v in (res.get(part) or {}).items():
                if is_gpu_resource(k) and v not in (0, "0", None, ""):
                    return True
    return False
