"""Container toolkit: the operator's toolkit pod configures the NVIDIA runtime on the node.

A toolkit pod that fails for want of the driver is the driver's failure (its lines say so);
otherwise the runtime is not configured and containers get no GPU libraries.
"""

from __future__ import annotations

from handlers.chain.facts import NodeFacts
from handlers.chain.fixtext import Where
from handlers.chain.outcome import Draft, Outcome, Waiting
from handlers.chain.pods import IMAGE_PULL
from handlers.chain.stage import Before, stage
from handlers.chain.words import Words, words

CODE = "CONTAINER_RUNTIME_NOT_CONFIGURED"


@stage("toolkit", after=("driver",), check="container toolkit / runtime")
def toolkit(n: NodeFacts, before: Before) -> Outcome:
    out: list[Draft] = []
    waiting: list[Waiting] = []
    for st in n.comp.get("toolkit", []):
        if not st.failing:
            continue
        if st.kind == IMAGE_PULL:
            out.append(n.image_pull(st, "OPERATOR_IMAGE_PULL"))
            continue
        w = n.waiting(st)
        if w is not None:
            waiting.append(w)
            continue
        found, tail = n.logs(st)
        if any(c == "DRIVER_NOT_READY" for c, _ in found):
            out += n.log_drafts(st, found)[0]
            continue
        ev = st.state_evidence() + n.log_evidence(st, found, CODE)
        out.append(n.draft(CODE, ev + ([] if len(ev) > len(st.state_evidence()) else tail),
                           st=st))
        out += n.log_drafts(st, found, skip=(CODE,))[0]
    return Outcome(tuple(out), passed=not before.has(CODE) and all(d.code != CODE for d in out),
                   waiting=tuple(waiting))


@words(CODE)
def _not_configured(w: Where) -> Words:
    n, ns, pod = w.node, w.namespace, w.pod
    return Words(
        f"The NVIDIA container runtime is not configured on {n}: containers get no GPU "
        "libraries.",
        "Configure the NVIDIA runtime in the node's container runtime and restart it:\n"
        f"kubectl debug node/{n} -it --image=ubuntu -- chroot /host sh -c "
        "'nvidia-ctk runtime configure --runtime=containerd --set-as-default && "
        "systemctl restart containerd'\n"
        "(CRI-O: --runtime=crio; Docker: --runtime=docker). With the GPU operator the "
        f"toolkit DaemonSet does this: kubectl -n {ns} logs -l "
        f"app=nvidia-container-toolkit-daemonset --field-selector spec.nodeName={n}. "
        f"Then restart the device plugin: kubectl -n {ns} delete pod {pod}")
