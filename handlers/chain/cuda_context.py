"""A "CUDA driver version is insufficient" line, read in context (spec: conventions).

The CUDA runtime prints it both when the node's driver is older than the image's CUDA and
when the container got no driver at all. The versions decide: the image's CUDA against
the node's driver. When the driver is new enough, the container did not get the driver:
a pod without ``runtimeClassName`` on a node whose NVIDIA runtime is not the default is
the runtime (CONTAINER_RUNTIME_NOT_CONFIGURED, fixed by the RuntimeClass); but when other
pods on the same node use the GPU through the same runtime, the runtime is not the cause
and the pod's own GPU setup is (NVML_INIT_FAILED: the container cannot see the libraries).

``read_insufficient`` is pure (it takes what it needs); ``apply`` adapts it to a node chain.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from handlers.chain.outcome import Draft
from handlers.chain.pods import PodState
from handlers.gpu import name_of, ns_of, operator_component, requests_gpu
from handlers.knowledge import cuda
from handlers.knowledge.logs import active
from handlers.kube.commands import kubectl, node_shell
from handlers.kube.workload import spec_owner
from handlers.model import Fix, Patch

if TYPE_CHECKING:
    from handlers.chain.facts import NodeFacts

Obj = dict[str, Any]
INSUFFICIENT_ENTRY = "cuda-driver-insufficient"


@dataclass
class Reading:
    code: str
    summary: str
    evidence: list[str] = field(default_factory=list)
    fix: Fix = field(default_factory=Fix)


def is_insufficient_line(line: str) -> bool:
    return any(e.id == INSUFFICIENT_ENTRY for e in active().matching(line))


def _runtime_class(pod: Mapping[str, Any]) -> str | None:
    rc = (pod.get("spec") or {}).get("runtimeClassName")
    return str(rc) if rc else None


def _uses_gpu(pod: Mapping[str, Any]) -> bool:
    """A running pod that got the driver from the runtime: a GPU workload or DCGM. Not the
    device plugin or GFD: recent versions load NVML from a hostPath mount of the driver
    root, so their running proves nothing about the runtime."""
    return requests_gpu(pod) or operator_component(pod) in ("dcgm-exporter", "dcgm")


def _running(pod: Mapping[str, Any]) -> bool:
    st = pod.get("status") or {}
    if st.get("phase") != "Running":
        return False
    cs = st.get("containerStatuses") or []
    return bool(cs) and all(c.get("ready") for c in cs)


def read_insufficient(
    pod: Mapping[str, Any], node: str, *, driver: tuple[str, str] | None,
    node_cuda: str | None, siblings: Sequence[Mapping[str, Any]],
    runtime_classes: Sequence[Mapping[str, Any]] | None,
) -> Reading | None:
    """What an insufficient-driver line in ``pod`` on ``node`` proves; None when the
    versions cannot be read (the line then stands as CUDA_DRIVER_MISMATCH).

    ``driver`` is (version, where it was read); ``siblings`` the other pods on the node;
    ``runtime_classes`` the cluster's RuntimeClasses, None when they could not be read.
    """
    containers = (pod.get("spec") or {}).get("containers") or []
    found = next((c for c in map(cuda.image_cuda, containers) if c), None)
    if found is None:
        return None
    image_cuda, image_ev = found
    drv = driver[0] if driver else None
    verdict = cuda.driver_verdict(image_cuda, drv, node_cuda)
    if verdict == "unknown":
        return None
    label = f"{ns_of(pod)}/{name_of(pod)}"
    owner = spec_owner(pod)
    node_text = (f"driver {drv} ({driver[1]})" if driver else f"CUDA {node_cuda} (GFD)")
    ev = [f"pod {label} image CUDA {image_cuda} ({image_ev})",
          f"node {node}: {node_text}" + (f", supports CUDA <= {cuda.driver_cuda(drv)}"
                                         if drv and cuda.driver_cuda(drv) else ""),
          cuda.requirement_text(image_cuda)]
    if verdict == "too-old":
        need = cuda.toolkit_driver(image_cuda) or cuda.min_driver(image_cuda) or "?"
        have_cuda = (cuda.driver_cuda(drv) if drv else None) or node_cuda or "?"
        need_major = need.split(".")[0]
        return Reading(
            "CUDA_DRIVER_MISMATCH",
            f"Pod {label} needs CUDA {image_cuda}, newer than the driver on {node} "
            f"supports ({node_text}).",
            ev,
            Fix(f"Use an image built for CUDA <= {have_cuda}, or upgrade the driver on {node} "
                f"to >= {need} (GPU operator: ClusterPolicy spec.driver.version, branch "
                f"{need_major} or newer), or keep the pod on nodes whose driver is new enough "
                + ("(GFD label; the patch)." if need_major.isdigit() else "(GFD label)."),
                patch=Patch(owner.kind, owner.name, f"{owner.path}.affinity", {
                    "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [{
                            "key": "nvidia.com/cuda.driver.major", "operator": "Gt",
                            "values": [str(int(need_major) - 1)]}]}]}}}, owner.namespace)
                if need_major.isdigit() else None,
                docs=("https://docs.nvidia.com/deploy/cuda-compatibility/",)))
    ev.append("the driver is new enough: the container did not get the driver's libraries")
    rc = _runtime_class(pod)
    working = [s for s in siblings if s is not pod and _running(s) and _uses_gpu(s)
               and _runtime_class(s) == rc]
    if working:
        ev.append(f"pod {ns_of(working[0])}/{name_of(working[0])} on {node} uses the GPU "
                  f"with the same runtime ({'runtimeClassName ' + rc if rc else 'default'}): "
                  "the runtime is not the cause")
        return Reading(
            "NVML_INIT_FAILED",
            f"Pod {label} did not get the driver libraries on {node}, although the driver "
            "is new enough and other pods there use the GPU.",
            ev,
            Fix(f"Compare the pod with {ns_of(working[0])}/{name_of(working[0])} and check "
                "what differs: NVIDIA_VISIBLE_DEVICES / NVIDIA_DRIVER_CAPABILITIES set in the "
                "image or pod (void, none, or no 'compute,utility'), a device-list strategy "
                "the toolkit does not accept (device plugin DEVICE_LIST_STRATEGY=envvar with "
                "accept-nvidia-visible-devices-envvar-when-unprivileged=false), or an image "
                "that ships its own libcuda.",
                (kubectl("get", "pod", name_of(pod), "-o", "yaml", namespace=ns_of(pod)),
                 kubectl("get", "pod", name_of(working[0]), "-o", "yaml",
                         namespace=ns_of(working[0])))))
    nvidia_rcs = [r for r in runtime_classes or []
                  if "nvidia" in str(r.get("handler", "")) or "nvidia" in name_of(r)]
    if rc is None:
        ev.append(f"pod {label} has no runtimeClassName")
        if nvidia_rcs:
            ev.append(f"RuntimeClass {name_of(nvidia_rcs[0])} (handler "
                      f"{nvidia_rcs[0].get('handler')}) exists: the NVIDIA runtime is "
                      "installed; a pod without it gets the node's default runtime, which "
                      "did not inject the driver")
        name = name_of(nvidia_rcs[0]) if nvidia_rcs else "nvidia"
        return Reading(
            "CONTAINER_RUNTIME_NOT_CONFIGURED",
            f"Pod {label} runs without the NVIDIA runtime on {node}, so it gets no driver.",
            ev,
            Fix("Run the pod with the NVIDIA runtime (the patch), or make nvidia the default "
                "runtime on the node (GPU operator: toolkit env CONTAINERD_SET_AS_DEFAULT=true).",
                (node_shell(node, "nvidia-ctk runtime configure --runtime=containerd "
                                  "--set-as-default && systemctl restart containerd",
                            note="or: nvidia as the node's default runtime"),),
                Patch(owner.kind, owner.name, owner.path, {"runtimeClassName": name},
                      owner.namespace)))
    ev.append(f"pod {label} runs with runtimeClassName {rc}")
    return Reading(
        "CONTAINER_RUNTIME_NOT_CONFIGURED",
        f"The runtime {rc} on {node} did not give pod {label} the driver.",
        ev,
        Fix(f"The handler RuntimeClass {rc} names must be the NVIDIA runtime, and the "
            f"containerd or CRI-O handler of that name on {node} must run "
            "nvidia-container-runtime.",
            (kubectl("get", "runtimeclass", rc, "-o", "yaml"),
             node_shell(node, "nvidia-ctk runtime configure --runtime=containerd && "
                              "systemctl restart containerd"))))


def node_driver(run: NodeFacts) -> tuple[str, str] | None:
    """The node's driver version and where it was read: GFD labels, else the driver pod's
    image tag."""
    if run.where.driver:
        return run.where.driver, "GFD nvidia.com/cuda.driver labels"
    for st in run.comp.get("driver", []):
        for c in (st.pod.get("spec") or {}).get("containers") or []:
            v = cuda.driver_from_image(str(c.get("image", "")))
            if v:
                return v, f"driver pod image {c.get('image')}"
    return None


def apply(run: NodeFacts, st: PodState, found: list[tuple[str, str]]
          ) -> tuple[list[tuple[str, str]], list[Draft]]:
    """The insufficient-driver lines of ``st`` read in their context, and the lines still
    to report as they are."""
    lines = [ln for c, ln in found if c == "CUDA_DRIVER_MISMATCH" and is_insufficient_line(ln)]
    if not lines:
        return found, []
    reader = run.ctx.reader
    rcs: list[Obj] | None = None
    listed = reader.list("RuntimeClass")
    if listed or reader.readable("RuntimeClass"):
        rcs = listed
    siblings = reader.pods_on([run.name]).get(run.name, [])
    reading = read_insufficient(st.pod, run.name, driver=node_driver(run),
                                node_cuda=run.where.cuda or None, siblings=siblings,
                                runtime_classes=rcs)
    if reading is None:
        return found, []
    evidence = [f"pod {st.label} {ln}" for ln in lines[:2]] + reading.evidence
    said = Draft(reading.code, reading.summary, reading.fix, (run.ref, st.ref), tuple(evidence))
    return [(c, ln) for c, ln in found if not (c == "CUDA_DRIVER_MISMATCH" and ln in lines)], [
        said]
