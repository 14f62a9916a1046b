"""GFD labels: a node that advertises GPUs carries GPU Feature Discovery's labels
(``nvidia.com/gpu.product``, ``.memory``, ``.family``, ...), which selectors and the fixes
of other findings read.

Missing labels are a problem only where GFD is deployed (and fails on the node), or where a
pending workload's selector needs them: a cluster that never ran GFD and whose workloads do
not select on its labels has no problem here (shared/spec/finding-codes.md).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from handlers.chain.facts import NodeFacts
from handlers.chain.fixtext import Where, chart_upgrade, has_operator, policy_of
from handlers.chain.outcome import Outcome
from handlers.chain.stage import Before, stage
from handlers.chain.words import Words, words
from handlers.gpu import GFD_LABELS, name_of, ns_of
from handlers.kube.commands import kubectl, merge_patch, pods_on_node
from handlers.model import Fix

CODE = "NFD_LABELS_MISSING"
_CLOUD_ACCEL = ("cloud.google.com/gke-accelerator", "k8s.amazonaws.com/accelerator")


@stage("labels", after=("registration",), check="GFD labels")
def labels(n: NodeFacts, before: Before) -> Outcome:
    if not n.advertised:
        return Outcome()
    missing = [k for k in GFD_LABELS if not n.lab.get(k)]
    if not missing:
        return Outcome(passed=True)
    gfd_anywhere = any(c == "gfd" for c, _ in n.ctx.inv.component_daemonsets) or any(
        "gfd" in comps for comps in n.ctx.inv.component_pods.values())
    wanting = [] if gfd_anywhere else _selecting(n, missing)
    if not gfd_anywhere and not wanting:
        return Outcome()  # no GFD, and nothing asks for its labels: nothing to check
    present = [f"{k}={n.lab[k]}" for k in GFD_LABELS if n.lab.get(k)]
    ev = [f"{k}: absent" for k in missing] + present
    gfd = n.comp.get("gfd", [])
    if any(s.failing for s in gfd):
        ev.append("gpu-feature-discovery pod on the node is not ready: "
                  + "; ".join(gfd[0].state_evidence()[:1]))
    elif not gfd:
        ev.append("no gpu-feature-discovery pod runs on the node")
    ev += wanting
    cloud = [k for k in _CLOUD_ACCEL if n.lab.get(k)]
    cond: frozenset[str] = frozenset()
    if cloud and not gfd_anywhere:
        # GKE/EKS accelerator labels stand in for GFD's: selectors usually use those.
        cond = frozenset({"cloud-labels"})
        ev.append(f"{cloud[0]}={n.lab[cloud[0]]} (cloud accelerator label)")
    return Outcome((n.draft(CODE, ev, conditions=cond,
                            where=replace(n.where, namespace=n.ns)),))


def _selecting(n: NodeFacts, missing: list[str]) -> list[str]:
    """Pending pods whose node selector or required node affinity names a missing label."""
    memo = n.ctx.reader.memo
    if "gfd-selectors" not in memo:  # one list of pending pods for every node
        memo["gfd-selectors"] = [
            (f"{ns_of(p)}/{name_of(p)}", key) for p in n.ctx.reader.list(
                "Pod", field_selector="status.phase=Pending")
            for key in sorted(_selector_keys(p) & set(GFD_LABELS))]
    wanted: list[tuple[str, str]] = memo["gfd-selectors"]
    return [f"pending pod {pod} selects on {key}" for pod, key in wanted if key in missing][:3]


def _selector_keys(pod: dict[str, Any]) -> set[str]:
    spec = pod.get("spec") or {}
    keys = set(spec.get("nodeSelector") or {})
    required = ((((spec.get("affinity") or {}).get("nodeAffinity") or {})
                 .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
                .get("nodeSelectorTerms") or [])
    keys |= {str(e.get("key")) for t in required for e in t.get("matchExpressions") or []}
    return keys


@words(CODE)
def _missing(w: Where) -> Words:
    enable: tuple[str, ...] = ()
    if has_operator(w):
        enable += (merge_patch("clusterpolicy", policy_of(w),
                               {"spec": {"gfd": {"enabled": True}}}),)
    enable += chart_upgrade(w, "gfd.enabled=true")
    return Words(
        f"GPU feature labels are missing on {w.node}.",
        Fix("GPU Feature Discovery sets these labels: see its pod on the node, and enable it "
            "(in the GPU operator's ClusterPolicy, or the device-plugin chart's gfd.enabled).",
            (kubectl("get", "pods", "-o", "wide", "--field-selector", pods_on_node(w.node),
                     namespace=w.namespace), *enable),
            docs=("https://github.com/NVIDIA/gpu-feature-discovery",)))
