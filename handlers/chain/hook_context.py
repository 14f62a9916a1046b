"""The NVIDIA container hook run where no GPU is: the runtime, not the driver.

With the NVIDIA runtime as a node's default runtime, its hook runs for every container whose
image sets ``NVIDIA_VISIBLE_DEVICES`` (every CUDA base image, the device plugin's own image),
whether the pod asked for a GPU or not. On a node without GPUs or driver the hook then fails
("initialization error: nvml error: driver not loaded", "load library failed:
libnvidia-ml.so.1", "cuda error: unknown error" in 2018: NVIDIA/k8s-device-plugin#52). Alone
such a line says the host has no driver (``DRIVER_NOT_READY``); on a node with no GPU
resource and no GPU label, for a pod that asks none, nothing shows a GPU to drive: the hook
was applied where it should not be (kubernetes-sigs/dra-driver-nvidia-gpu#402), a runtime
fault. why-pending (``handlers.pending.hooks``) and the node chain (device-plugin pods) read
it alike.

The same holds for a device plugin that hands GPUs to VMs through vfio-pci (KubeVirt's GPU
device plugin, the GPU operator's sandbox plugin): it needs no NVIDIA driver, by design none
is loaded where vfio-pci holds the GPUs, and the hook runs for it only because the NVIDIA
runtime is the node's default (NVIDIA/kubevirt-gpu-device-plugin#49, kubevirt/kubevirt#9617).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from handlers.chain.outcome import Draft
from handlers.gpu import NFD_PCI_NVIDIA, gpu_traits, labels
from handlers.kube.commands import kubectl, node_shell
from handlers.kube.workload import SpecOwner, spec_owner
from handlers.model import Fix, Patch

if TYPE_CHECKING:
    from handlers.chain.facts import NodeFacts
    from handlers.chain.pods import PodState

CODE = "CONTAINER_RUNTIME_NOT_CONFIGURED"
_HOOKS = ("nvidia-container-cli", "nvidia-container-runtime-hook")
_NFD_PREFIX = "feature.node.kubernetes.io/"
# Device plugins that hand GPUs to VMs through vfio, not to containers: KubeVirt's GPU device
# plugin, which the GPU operator runs as its sandbox device plugin
# (assets/state-sandbox-device-plugin).
VM_PLUGIN_IMAGES = ("kubevirt-gpu-device-plugin",)


def vm_plugin(pod: Mapping[str, Any]) -> str | None:
    """The image of a pod's container that is a VM passthrough device plugin, or None."""
    for c in (pod.get("spec") or {}).get("containers") or []:
        image = str(c.get("image", ""))
        if any(m in image for m in VM_PLUGIN_IMAGES):
            return image
    return None


def hook_driver_line(code: str, line: str) -> bool:
    """A container hook's "no driver on the host" line."""
    return code == "DRIVER_NOT_READY" and any(h in line for h in _HOOKS)


def without_gpus(node: Mapping[str, Any]) -> bool:
    """No GPU resource in capacity and no GPU label (handlers/knowledge/gpu_nodes.yaml)."""
    return not gpu_traits(node).gpu_like


def node_evidence(node: Mapping[str, Any]) -> str:
    name = str((node.get("metadata") or {}).get("name") or "")
    nfd = any(k.startswith(_NFD_PREFIX) for k in labels(node))
    return (f"node {name}: no GPU resource in capacity and no GPU label"
            + (f" ({NFD_PCI_NVIDIA} absent while NFD labels the node)" if nfd else
               " (no NFD labels either: nothing shows an NVIDIA PCI device on it)"))


def summary(node: str) -> str:
    return (f"The NVIDIA container hook runs on {node}, a node without GPUs, and fails for "
            "want of a driver: the NVIDIA runtime is applied where it should not be (the "
            "node's default runtime, for an image that sets NVIDIA_VISIBLE_DEVICES).")


def fix(node: str, patch: Patch | None) -> Fix:
    """``patch``: the pod's opt-out of the hook, or the GPU DaemonSet kept off the node."""
    return Fix(
        f"Keep runc the default runtime on {node} and the other nodes without GPUs: configure "
        "the NVIDIA runtime only on GPU nodes, without --set-as-default, and give GPU pods "
        "runtimeClassName: nvidia. Keep GPU-only DaemonSets off such nodes (nodeSelector "
        "nvidia.com/gpu.present: \"true\"); a pod that needs no GPU can opt out of the hook "
        "(NVIDIA_VISIBLE_DEVICES=void). If the node does have GPUs, its driver is what is "
        "missing: gpubot doctor says why.",
        (node_shell(node, "nvidia-ctk runtime configure --runtime=containerd && "
                          "systemctl restart containerd"),),
        patch,
        ("https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/"
         "install-guide.html#configuring-containerd-for-kubernetes",))


def opt_out(owner: SpecOwner, pod: Mapping[str, Any]) -> Patch:
    """Every container of the pod without the hook: NVIDIA_VISIBLE_DEVICES=void."""
    env = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}]
    return Patch(owner.kind, owner.name, owner.path, {"containers": [
        {"name": str(c.get("name")), "env": env}
        for c in (pod.get("spec") or {}).get("containers") or []]}, owner.namespace)


def gpu_nodes_only(owner: SpecOwner) -> Patch:
    return Patch(owner.kind, owner.name, f"{owner.path}.nodeSelector",
                 {"nvidia.com/gpu.present": "true"}, owner.namespace)


def chain_reading(run: NodeFacts, st: PodState, found: list[tuple[str, str]]
                  ) -> tuple[list[tuple[str, str]], list[Draft]]:
    """A failing device-plugin pod's hook lines on a node that advertises no GPU and
    carries no GPU label, or from a VM passthrough plugin: the runtime finding instead of the
    driver's; ``found`` without them. (The chain makes every finding on a node without GPU
    labels a warning: it may be a GPU node nothing labels.)"""
    hook = [ln for c, ln in found if hook_driver_line(c, ln)]
    image = vm_plugin(st.pod)
    if not hook or not (run.plugin_only or image):
        return found, []
    kept = [(c, ln) for c, ln in found if not hook_driver_line(c, ln)]
    lines = tuple(f"pod {st.label} {ln}" for ln in hook[:2])
    if image is None:
        owner = spec_owner(st.pod)
        return kept, [Draft(CODE, summary(run.name), fix(run.name, gpu_nodes_only(owner)),
                            (run.ref, st.ref),
                            (*lines, node_evidence(run.node)))]
    return kept, [Draft(
        CODE,
        f"The NVIDIA container hook runs for the VM passthrough device plugin on {run.name} "
        "and fails for want of a driver that plugin does not need: the NVIDIA runtime is "
        "the node's default runtime.",
        Fix("Run the VM plugin without the NVIDIA hook (the patch, or a runc RuntimeClass), "
            f"or keep the NVIDIA runtime off the default on {run.name} (configure it without "
            "--set-as-default) and give GPU container pods runtimeClassName: nvidia. Then "
            "restart the plugin.",
            (kubectl("delete", "pod", st.name, namespace=st.namespace),),
            opt_out(spec_owner(st.pod), st.pod)),
        (run.ref, st.ref),
        (*lines, f"pod {st.label} runs {image}: it hands vfio-pci GPUs to VMs and loads no "
                 "NVIDIA driver (none is loaded where vfio-pci holds the GPUs)"))]
