"""Device admission: the kubelet admits the pods placed on the node with the GPUs it
allocates. Pods it refused show a plugin and kubelet that disagree about the healthy devices
(UnexpectedAdmissionError, "Allocate failed"), or a Topology Manager that could not give a
pod its GPUs from one NUMA node (TopologyAffinityError): no plugin restart helps that one,
the fix is the pod's GPU count, another node, or the kubelet's policy
(``handlers/topology.py``)."""

from __future__ import annotations

from dataclasses import replace

from handlers import topology
from handlers.chain.facts import NodeFacts
from handlers.chain.fixtext import Where, restart_plugin, restart_pod
from handlers.chain.outcome import Draft, Outcome
from handlers.chain.stage import Before, stage
from handlers.chain.words import Words, words
from handlers.gpu import name_of, ns_of
from handlers.kube.admission import DEVICE, RESOURCE, Refusal, refusal
from handlers.model import Fix, ObjectRef
from handlers.view import Obj

CODE = "DEVICE_ADMISSION_FAILED"
_MAX_PODS = 5


@stage("admission", after=("health",), check="device admission", always=True)
def admission(n: NodeFacts, before: Before) -> Outcome:
    pods = n.ctx.inv.admission_failed.get(n.name, [])
    if not pods:
        return Outcome(passed=True)
    refused = [(p, r) for p in pods if (r := refusal(p)) is not None]
    ev = [f"pod {ns_of(p)}/{name_of(p)}: {r.reason}: {r.said}" for p, r in refused[:_MAX_PODS]]
    if len(pods) > _MAX_PODS:
        ev.append(f"... and {len(pods) - _MAX_PODS} more pods")
    objects = [ObjectRef("Pod", name_of(p), ns_of(p)) for p in pods[:_MAX_PODS]]
    if refused and all(r.topology for _, r in refused):
        return Outcome((_topology(n, refused[0], ev, objects),))
    first = pods[0]
    # A plugin restart helps the device manager, not the CPU or memory manager.
    device = any(r.part in (DEVICE, RESOURCE) for _, r in refused)
    return Outcome((n.draft(CODE, ev, where=replace(n.where, namespace=ns_of(first),
                                                    pod=name_of(first)),
                            objects=objects,
                            actions=[("restart-device-plugin", n.name)] if device else []),))


def _topology(n: NodeFacts, first: tuple[Obj, Refusal], ev: list[str],
              objects: list[ObjectRef]) -> Draft:
    """Every refusal is the Topology Manager's: said as the first refused pod shows it."""
    pod, refused = first
    told = topology.explain(n.ctx.reader, pod, n.node, refused)
    n.ctx.unchecked.extend(u for u in told.not_checked if u not in n.ctx.unchecked)
    count = len(n.ctx.inv.admission_failed.get(n.name, []))
    what = "GPUs" if told.gpus_must_align else "resources"
    summary = (f"The kubelet on {n.name} refused pod {ns_of(pod)}/{name_of(pod)}: its Topology "
               f"Manager could not give it its {what} from one NUMA node." if count == 1 else
               f"The kubelet on {n.name} refused {count} pods: its Topology Manager could not "
               f"give them their {what} from one NUMA node.")
    return Draft(CODE, summary, told.fix, (n.ref, *objects),
                 tuple(ev + told.evidence[1:] + told.gpu_evidence))


@words(CODE)
def _refused(w: Where) -> Words:
    return Words(
        f"The kubelet on {w.node} rejected pods' GPU allocation.",
        Fix("Delete the pod: its controller creates a new one. If it happens again, restart "
            "the device plugin so that kubelet and plugin agree on the healthy devices.",
            (*restart_pod(w, "its controller creates a new one"), *restart_plugin(w))))
