"""GPU operator components on the node (validator, GFD, DCGM, dcgm-exporter, NFD worker,
MIG manager): their own failures, and what their logs say about the stages before them.

A component that fails because the driver or runtime is broken is evidence for that stage
(its lines prove the upstream code); one that fails on its own is OPERATOR_COMPONENT_FAILING
(MIG_CONFIG_FAILED for the MIG manager). A validator pod that failed says why in its log.
"""

from __future__ import annotations

from handlers.chain.facts import UPSTREAM, NodeFacts, sourced
from handlers.chain.fixtext import Where, logs_cmd, policy_name, policy_patch
from handlers.chain.outcome import Draft, Outcome, Waiting
from handlers.chain.pods import CREATING, IMAGE_PULL, pod_state
from handlers.chain.stage import Before, stage
from handlers.chain.words import Words, words
from handlers.kube.commands import kubectl
from handlers.model import Fix

CODE = "OPERATOR_COMPONENT_FAILING"
# A component whose own failure has a code of its own.
_OWN_CODE = {"mig-manager": "MIG_CONFIG_FAILED"}


@stage("operator", after=("plugin",), check="GPU operator components")
def operator(n: NodeFacts, before: Before) -> Outcome:
    out: list[Draft] = []
    waiting: list[Waiting] = []
    for comp, states in n.comp.items():
        if comp in ("driver", "toolkit"):
            continue  # their own stages
        for st in states:
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
            if st.kind == CREATING:
                found += [x for m in n.events(st) for x in sourced(m, "event")]
            if any(c in UPSTREAM for c, _ in found):
                out += n.log_drafts(st, found)[0]
                continue
            code = _OWN_CODE.get(comp, CODE)
            own = n.log_evidence(st, found, code)
            out.append(n.draft(code, [f"component {comp}", *st.state_evidence(), *own,
                                      *([] if own else tail)], st=st))
            out += n.log_drafts(st, found, skip=(code,))[0]
    for pod in n.ctx.inv.failed_validators.get(n.name, [])[:2]:
        st = pod_state(pod, n.ctx.now)
        found, _ = n.logs(st)
        if not found:
            found = sourced(n.ctx.reader.logs(st.namespace, st.name), "log")
        out += n.log_drafts(st, found)[0]
    failed = (CODE, "OPERATOR_IMAGE_PULL")
    return Outcome(tuple(out), waiting=tuple(waiting), passed=not before.has(*failed)
                   and all(d.code not in failed for d in out))


@words(CODE)
def _failing(w: Where) -> Words:
    return Words(f"A GPU operator component is not ready on {w.node}.",
                 Fix("Its events and log say why.", _describe(w) + logs_cmd(w)))


def _describe(w: Where, note: str = "") -> tuple[str, ...]:
    return (kubectl("describe", "pod", w.pod, namespace=w.namespace, note=note),) if w.pod \
        else ()


@words("OPERATOR_IMAGE_PULL")
def _image_pull(w: Where) -> Words:
    os_image = f"; this node runs {w.setup.os_image}" if w.setup and w.setup.os_image else ""
    version = w.setup.newer.driver if w.setup and w.setup.newer else ""
    return Words(
        f"A GPU operator image cannot be pulled on {w.node}.",
        Fix("Driver images are published per OS (VERSION-ubuntu22.04, -ubuntu24.04, "
            f"-rhel9.4){os_image}: set a driver version published for it in ClusterPolicy "
            f"{policy_name(w, 'driver')}"
            + (f" ({version} runs on another node)" if version else "")
            + "; for a private registry set spec.<component>.repository and imagePullSecrets.",
            _describe(w, "the registry's answer")
            + ((policy_patch(w, "driver", version),) if version else ()),
            docs=("https://catalog.ngc.nvidia.com/orgs/nvidia/containers/driver/tags",)))
