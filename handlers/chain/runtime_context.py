"""The device plugin's "did you set the docker default runtime?" hints, read in context.

The plugin prints those hints whenever NVML cannot be loaded, whatever the reason (a driver
not installed yet prints them too). When the same plugin image, under the same
runtimeClassName and the same container runtime, runs Ready on a twin node, and this node's
runtime is configured the same way (the GPU operator's toolkit pod is Ready here), the
runtime setup is shown to work and the hints prove nothing: they are dropped, and the twin
is named as evidence. Without the toolkit pod a twin proves little: a re-imaged node can
lose its containerd config while its twin keeps it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from handlers.chain.pods import PodState
from handlers.gpu import name_of
from handlers.knowledge.logs import active

if TYPE_CHECKING:
    from handlers.chain.facts import NodeFacts

Obj = dict[str, Any]
HINT_ENTRY = "plugin-runtime-hint"


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


def drop_hints(run: NodeFacts, st: PodState, found: list[tuple[str, str]],
               ) -> tuple[list[tuple[str, str]], list[str]]:
    """``found`` without the runtime hints when a twin node shows the runtime works, and
    the evidence that says so."""
    hints = [ln for c, ln in found if c == "CONTAINER_RUNTIME_NOT_CONFIGURED"
             and any(e.id == HINT_ENTRY for e in active().matching(ln))]
    others = [ln for c, ln in found if c == "CONTAINER_RUNTIME_NOT_CONFIGURED"
              and ln not in hints]
    toolkit = [t for t in run.comp.get("toolkit", []) if t.ready]
    if not hints or others or not toolkit:
        return found, []
    t = twin(run, st)
    if t is None:
        return found, []
    kept = [(c, ln) for c, ln in found if ln not in hints]
    return kept, [f"pod {st.label}: the same plugin image and runtime run Ready on {t[0]} "
                  f"(pod {t[1]}), and the toolkit pod {toolkit[0].label} is Ready here: the "
                  "container runtime is not the cause"]
