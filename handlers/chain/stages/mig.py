"""MIG config: the MIG manager applied the profile the node's ``nvidia.com/mig.config``
label asks for (``nvidia.com/mig.config.state`` is not ``failed``)."""

from __future__ import annotations

from handlers.chain.facts import NodeFacts
from handlers.chain.fixtext import Where, logs_cmd
from handlers.chain.outcome import Outcome
from handlers.chain.stage import Before, stage
from handlers.chain.words import Words, words
from handlers.gpu import MIG_CONFIG_STATE_LABEL, MIG_STRATEGY_LABEL
from handlers.kube.commands import kubectl
from handlers.logpatterns import classify_log, last_lines
from handlers.model import Fix

CODE = "MIG_CONFIG_FAILED"
MIG_CONFIG_LABEL = "nvidia.com/mig.config"


@stage("mig", after=("operator", "registration"), check="MIG config")
def mig(n: NodeFacts, before: Before) -> Outcome:
    if n.lab.get(MIG_CONFIG_STATE_LABEL) != "failed":
        failing_mgr = any(s.failing for s in n.comp.get("mig-manager", []))
        return Outcome(passed=None if before.has(CODE) or failing_mgr else True)
    ev = [f"{MIG_CONFIG_LABEL}={n.lab.get(MIG_CONFIG_LABEL, '<absent>')}",
          f"{MIG_CONFIG_STATE_LABEL}=failed"]
    if n.lab.get(MIG_STRATEGY_LABEL):
        ev.append(f"{MIG_STRATEGY_LABEL}={n.lab[MIG_STRATEGY_LABEL]}")
    mgr = n.comp.get("mig-manager", [])
    st = mgr[0] if mgr else None
    if st is not None:
        text = n.ctx.reader.logs(st.namespace, st.name, None)
        lines = [ln for c, ln in classify_log(text) if c == CODE]
        ev += [f"pod {st.label} log: {ln}" for ln in (lines or last_lines(text, 4))[-4:]]
    else:
        ev.append("no nvidia-mig-manager pod runs on the node")
    return Outcome((n.draft(CODE, ev, st=st, where=n.where_for(st, "nvidia-mig-manager")
                            if st else None),))


@words(CODE)
def _failed(w: Where) -> Words:
    return Words(
        f"MIG reconfiguration failed on {w.node}.",
        Fix("mig-manager's log says what failed. Check that the profile the node's "
            "nvidia.com/mig.config label names exists in the mig-parted config and fits the "
            "GPU; stop the GPU workloads on the node (MIG mode changes need idle GPUs), then "
            "label the node with the profile again.",
            (*logs_cmd(w, previous=False),
             kubectl("get", "node", w.node, "-L", "nvidia.com/mig.config,"
                     "nvidia.com/mig.config.state"),
             kubectl("get", "cm", "default-mig-parted-config", "-o", "yaml",
                     namespace=w.namespace)),
            docs=("https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/"
                  "gpu-operator-mig.html",)))
