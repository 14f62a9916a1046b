"""Container toolkit: the operator's toolkit pod configures the NVIDIA runtime on the node.

A toolkit pod that fails for want of the driver is the driver's failure (its lines say so);
otherwise the runtime is not configured and containers get no GPU libraries.
"""

from __future__ import annotations

from handlers.chain.facts import NodeFacts
from handlers.chain.fixtext import Where, logs_cmd, restart_plugin
from handlers.chain.outcome import Draft, Outcome, Waiting
from handlers.chain.pods import IMAGE_PULL
from handlers.chain.stage import Before, stage
from handlers.chain.words import Words, words
from handlers.kube.commands import node_shell
from handlers.model import Fix

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
    n = w.node
    return Words(
        f"The NVIDIA container runtime is not configured on {n}: containers get no GPU "
        "libraries.",
        Fix("Configure the NVIDIA runtime in the node's container runtime and restart it "
            "(CRI-O: --runtime=crio; Docker: --runtime=docker). With the GPU operator the "
            "toolkit DaemonSet does this, and its log says why it did not. Then restart the "
            "device plugin.",
            (node_shell(n, "nvidia-ctk runtime configure --runtime=containerd "
                           "--set-as-default && systemctl restart containerd"),
             *logs_cmd(w), *restart_plugin(w)),
            docs=("https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/"
                  "install-guide.html#configuring-containerd-for-kubernetes",)))
