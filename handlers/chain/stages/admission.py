"""Device admission: the kubelet admits the pods placed on the node with the GPUs it
allocates; pods it refused (UnexpectedAdmissionError, "Allocate failed") show a plugin and
kubelet that disagree about the healthy devices."""

from __future__ import annotations

from handlers.chain.facts import NodeFacts
from handlers.chain.fixtext import Where
from handlers.chain.outcome import Outcome
from handlers.chain.stage import Before, stage
from handlers.chain.words import Words, words
from handlers.gpu import name_of, ns_of
from handlers.model import ObjectRef

CODE = "DEVICE_ADMISSION_FAILED"


@stage("admission", after=("health",), check="device admission", always=True)
def admission(n: NodeFacts, before: Before) -> Outcome:
    pods = n.ctx.inv.admission_failed.get(n.name, [])
    if not pods:
        return Outcome(passed=True)
    ev = []
    for p in pods[:5]:
        s = p.get("status") or {}
        ev.append(f"pod {ns_of(p)}/{name_of(p)}: {s.get('reason', '')}: "
                  f"{s.get('message', '')}".strip())
    if len(pods) > 5:
        ev.append(f"... and {len(pods) - 5} more pods")
    first = pods[0]
    return Outcome((n.draft(CODE, ev, where=Where(n.name, ns_of(first), name_of(first)),
                            objects=[ObjectRef("Pod", name_of(p), ns_of(p)) for p in pods[:5]],
                            actions=[("restart-device-plugin", n.name)]),))


@words(CODE)
def _refused(w: Where) -> Words:
    return Words(
        f"The kubelet on {w.node} rejected pods' GPU allocation.",
        f"kubectl delete pod -n {w.namespace} {w.pod}   # its controller creates a new one\n"
        "If it happens again, restart the device plugin so kubelet and plugin agree on "
        f"the healthy devices: kubectl -n <plugin namespace> delete pod "
        f"<device-plugin pod on {w.node}>")
