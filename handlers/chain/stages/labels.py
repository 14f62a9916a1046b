"""GFD labels: a node that advertises GPUs carries GPU Feature Discovery's labels
(``nvidia.com/gpu.product``, ``.memory``, ``.family``, ...), which selectors and the fixes
of other findings read."""

from __future__ import annotations

from handlers.chain.facts import NodeFacts
from handlers.chain.fixtext import Where, has_operator
from handlers.chain.outcome import Outcome
from handlers.chain.stage import Before, stage
from handlers.chain.words import Words, words
from handlers.gpu import GFD_LABELS

CODE = "NFD_LABELS_MISSING"
_CLOUD_ACCEL = ("cloud.google.com/gke-accelerator", "k8s.amazonaws.com/accelerator")


@stage("labels", after=("registration",), check="GFD labels")
def labels(n: NodeFacts, before: Before) -> Outcome:
    if not n.advertised:
        return Outcome()
    missing = [k for k in GFD_LABELS if not n.lab.get(k)]
    if not missing:
        return Outcome(passed=True)
    present = [f"{k}={n.lab[k]}" for k in GFD_LABELS if n.lab.get(k)]
    ev = [f"{k}: absent" for k in missing] + present
    gfd = n.comp.get("gfd", [])
    if any(s.failing for s in gfd):
        ev.append("gpu-feature-discovery pod on the node is not ready: "
                  + "; ".join(gfd[0].state_evidence()[:1]))
    elif not gfd:
        ev.append("no gpu-feature-discovery pod runs on the node")
    gfd_anywhere = any(c == "gfd" for c, _ in n.ctx.inv.component_daemonsets)
    cloud = [k for k in _CLOUD_ACCEL if n.lab.get(k)]
    cond: frozenset[str] = frozenset()
    if cloud and not gfd_anywhere:
        # GKE/EKS accelerator labels stand in for GFD's: selectors usually use those.
        cond = frozenset({"cloud-labels"})
        ev.append(f"{cloud[0]}={n.lab[cloud[0]]} (cloud accelerator label)")
    return Outcome((n.draft(CODE, ev, conditions=cond,
                            where=Where(n.name, n.ns, driver=n.where.driver)),))


@words(CODE)
def _missing(w: Where) -> Words:
    return Words(
        f"GPU feature labels are missing on {w.node}.",
        "GPU Feature Discovery sets these labels: check its pod on the node "
        f"(kubectl -n {w.namespace} get pods -o wide --field-selector spec.nodeName={w.node} | "
        "grep feature-discovery) and enable it ("
        + ("GPU operator: ClusterPolicy spec.gfd.enable: true; " if has_operator(w) else "")
        + "device-plugin chart: helm upgrade nvdp nvidia/nvidia-device-plugin "
        "--set gfd.enabled=true).")
