"""Driver: the operator's driver pods on the node load the NVIDIA kernel driver.

A driver pod that cannot pull its image is OPERATOR_IMAGE_PULL; one that fails is
DRIVER_NOT_READY with its log's known lines (or its tail), and any other cause those lines
prove. A host-installed driver has no pod here: the later stages' own lines speak for it.
"""

from __future__ import annotations

from handlers.chain.facts import NodeFacts
from handlers.chain.fixtext import Where, logs_cmd, managed, why
from handlers.chain.outcome import Draft, Outcome
from handlers.chain.pods import IMAGE_PULL
from handlers.chain.stage import Before, stage
from handlers.chain.words import Words, words

CODE = "DRIVER_NOT_READY"


@stage("driver", after=("hardware",), check="driver")
def driver(n: NodeFacts, before: Before) -> Outcome:
    out: list[Draft] = []
    for st in n.comp.get("driver", []):
        if not st.failing:
            continue
        if st.kind == IMAGE_PULL:
            out.append(n.image_pull(st, "OPERATOR_IMAGE_PULL"))
            continue
        found, tail = n.logs(st)
        ev = st.state_evidence() + n.log_evidence(st, found, CODE)
        if not any(c == CODE for c, _ in found):
            ev += tail
        out.append(n.draft(CODE, ev, st=st))
        out += n.log_drafts(st, found, skip=(CODE,))[0]
    return Outcome(tuple(out), passed=not any(
        d.code in (CODE, "OPERATOR_IMAGE_PULL") for d in out))


@words(CODE)
def _not_ready(w: Where) -> Words:
    n, ns = w.node, w.namespace
    how = (("GPU operator: a kernel update needs a driver image built for the new kernel; "
            f"rebuild it with kubectl -n {ns} delete pod -l app=nvidia-driver-daemonset "
            f"--field-selector spec.nodeName={n}.")
           if managed(w, "driver") else
           (f"The driver is installed on the host ({why(w, 'driver')}): reinstall it for "
            "the running kernel (modprobe nvidia) or reboot the node."))
    return Words(
        f"The NVIDIA driver is not loaded or not ready on {n}.",
        f"{logs_cmd(w)}   # why the driver did not load\n"
        f"kubectl debug node/{n} -it --image=ubuntu -- chroot /host sh -c "
        "'lsmod | grep nvidia; dmesg | grep -iE \"nvrm|nvidia\" | tail -20'\n" + how)
