"""The device plugin's "did you configure the NVIDIA Container Toolkit?" hints, read in
context.

The plugin prints those hints whenever it cannot load NVML, whatever the reason: a driver
not installed yet prints them, and so does a plugin release that looks for NVML in the wrong
place (k8s-device-plugin v0.18.0 resolved the platform without the driver root and failed
with "Incompatible strategy detected auto" on nodes whose runtime was configured:
NVIDIA/k8s-device-plugin#1469, #1470, fixed in v0.18.1; HAMi's plugin carries the same
check). The hints are dropped, and what explains them instead is named as evidence, when the
node shows:

- the driver is not ready (an earlier stage's DRIVER_NOT_READY): no driver, no NVML, runtime
  or not;
- the runtime gives containers their GPUs here: a pod holding GPUs runs on the node under the
  plugin's own runtime (class), started before this plugin pod was created, so what changed
  since is the plugin; or the plugin runs under a RuntimeClass whose NVIDIA handler the node
  has (its container started); or the GPU operator's toolkit pod is Ready here and the same
  plugin image, RuntimeClass and container runtime run Ready on a twin node.

Without such evidence the hints stand: a re-imaged node can lose its containerd config while
its twin keeps it, and running pods only prove the runtime of their own class.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from handlers.chain.pods import PodState
from handlers.gpu import is_device_plugin_pod, is_gpu_resource, name_of, ns_of, requests_gpu
from handlers.knowledge.logs import active
from handlers.timefmt import parse_time

if TYPE_CHECKING:
    from handlers.chain.facts import NodeFacts
    from handlers.chain.stage import Before

Obj = dict[str, Any]
HINT_ENTRY = "plugin-runtime-hint"
RUNTIME = "CONTAINER_RUNTIME_NOT_CONFIGURED"


@dataclass
class Reading:
    """A failing plugin's lines with the hints dropped where the node explains them."""

    found: list[tuple[str, str]]
    evidence: list[str] = field(default_factory=list)
    # The node's runtime is shown to serve GPUs: the plugin itself is at fault.
    runtime_works: bool = False


def _signature(run: NodeFacts, pod: Obj, node: str) -> tuple[Any, ...] | None:
    spec = pod.get("spec") or {}
    n = run.ctx.reader.get("Node", node) if node != run.name else run.node
    if n is None:
        return None
    runtime = ((n.get("status") or {}).get("nodeInfo") or {}).get("containerRuntimeVersion")
    images = tuple(sorted(str(c.get("image")) for c in spec.get("containers") or []))
    return images, spec.get("runtimeClassName"), runtime


def twin(run: NodeFacts, st: PodState) -> tuple[str, str] | None:
    """(node, pod) of a Ready plugin pod with the same images, RuntimeClass and container
    runtime on another node, or None."""
    mine = _signature(run, st.pod, run.name)
    if mine is None:
        return None
    for node, pods in sorted(run.ctx.inv.plugin_pods.items()):
        if node == run.name:
            continue
        for pod in pods:
            statuses = (pod.get("status") or {}).get("containerStatuses") or []
            if statuses and all(c.get("ready") for c in statuses) and \
                    _signature(run, pod, node) == mine:
                return node, name_of(pod)
    return None


def _gpu_pods_before(run: NodeFacts, st: PodState) -> list[str]:
    """Pods holding GPUs on the node under the plugin's runtime class, started before the
    plugin pod was created: the runtime gave them their GPUs."""
    created = parse_time((st.pod.get("metadata") or {}).get("creationTimestamp"))
    if created is None:
        return []
    rc = (st.pod.get("spec") or {}).get("runtimeClassName")
    out = []
    for pod in run.ctx.reader.pods_on([run.name]).get(run.name, []):
        status = pod.get("status") or {}
        started = parse_time(status.get("startTime"))
        ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                    for c in status.get("conditions") or [])
        if (started is None or started >= created or not ready or not requests_gpu(pod)
                or is_device_plugin_pod(pod)
                or (pod.get("spec") or {}).get("runtimeClassName") != rc):
            continue
        held = ", ".join(sorted({k for c in (pod.get("spec") or {}).get("containers") or []
                                 for k in ((c.get("resources") or {}).get("limits") or {})
                                 if is_gpu_resource(k)}))
        out.append(f"pod {ns_of(pod)}/{name_of(pod)} holds {held or 'GPUs'} on {run.name} since "
                   f"{status.get('startTime')}, under the same runtime as the plugin "
                   f"({'RuntimeClass ' + rc if rc else 'the default runtime'}), started "
                   f"before this plugin pod was created: the NVIDIA runtime gives containers "
                   "their GPUs here")
    return out[:2]


def _handler(run: NodeFacts, st: PodState) -> list[str]:
    """The plugin runs under a RuntimeClass with an NVIDIA handler and its container
    started: the node's container runtime has that handler."""
    rc = (st.pod.get("spec") or {}).get("runtimeClassName")
    if not rc:
        return []
    obj = run.ctx.reader.get("RuntimeClass", str(rc))
    handler = str((obj or {}).get("handler") or "")
    started = any(c.get("restartCount") or (c.get("lastState") or {}).get("terminated")
                  or (c.get("state") or {}).get("running")
                  for c in (st.pod.get("status") or {}).get("containerStatuses") or [])
    if "nvidia" not in handler or not started:
        return []
    return [f"pod {st.label} runs under RuntimeClass {rc} (handler {handler}) and its "
            f"container started: the container runtime on {run.name} has the NVIDIA handler"]


def drop_hints(run: NodeFacts, st: PodState, found: list[tuple[str, str]], before: Before
               ) -> Reading:
    """``found`` without the runtime hints when the node explains them otherwise, and the
    evidence that does."""
    hints = [ln for c, ln in found if c == RUNTIME
             and any(e.id == HINT_ENTRY for e in active().matching(ln))]
    others = [ln for c, ln in found if c == RUNTIME and ln not in hints]
    if not hints or others:
        return Reading(found)
    kept = [(c, ln) for c, ln in found if ln not in hints]
    if before.has("DRIVER_NOT_READY"):
        return Reading(kept, [f"pod {st.label}: the driver is not ready on {run.name}, so "
                              "the plugin finds no NVML whatever the runtime does"])
    shown = _gpu_pods_before(run, st) or _handler(run, st)
    toolkit = [t for t in run.comp.get("toolkit", []) if t.ready]
    t = twin(run, st) if toolkit and not shown else None
    if t is not None:
        shown = [f"pod {st.label}: the same plugin image and runtime run Ready on {t[0]} "
                 f"(pod {t[1]}), and the toolkit pod {toolkit[0].label} is Ready here: the "
                 "container runtime is not the cause"]
    if not shown:
        return Reading(found)
    return Reading(kept, shown, runtime_works=True)
