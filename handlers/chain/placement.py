"""Would a DaemonSet run a pod on this node? And if not, which rule keeps it off.

The DaemonSet controller places a pod where the template's nodeSelector, required node
affinity and tolerations allow. It adds tolerations for the node-lifecycle taints
(not-ready, unreachable, *-pressure, unschedulable, network-unavailable) by itself.
"""

from __future__ import annotations

from typing import Any

from handlers.gpu import labels, name_of

Obj = dict[str, Any]

_DS_AUTO_TOLERATED = frozenset({
    "node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable",
    "node.kubernetes.io/disk-pressure", "node.kubernetes.io/memory-pressure",
    "node.kubernetes.io/pid-pressure", "node.kubernetes.io/unschedulable",
    "node.kubernetes.io/network-unavailable",
})


def _tolerates(tol: Obj, taint: Obj) -> bool:
    effect = tol.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = tol.get("key") or ""
    if key and key != taint.get("key"):
        return False
    if (tol.get("operator") or "Equal") == "Exists":
        return True
    return bool((tol.get("value") or "") == (taint.get("value") or ""))


def _expr_ok(expr: Obj, lab: dict[str, str], node_name: str, field: bool) -> bool:
    key = expr.get("key", "")
    op = expr.get("operator", "")
    vals = [str(v) for v in expr.get("values") or []]
    actual = (node_name if key == "metadata.name" else None) if field else lab.get(key)
    if op == "In":
        return actual is not None and actual in vals
    if op == "NotIn":
        return actual is None or actual not in vals
    if op == "Exists":
        return actual is not None
    if op == "DoesNotExist":
        return actual is None
    if op in ("Gt", "Lt") and actual is not None and vals:
        try:
            a, b = int(actual), int(vals[0])
        except ValueError:
            return False
        return a > b if op == "Gt" else a < b
    return False


def _fmt_expr(expr: Obj, lab: dict[str, str]) -> str:
    key = expr.get("key", "")
    vals = ",".join(str(v) for v in expr.get("values") or [])
    have = f"node has {key}={lab[key]}" if key in lab else f"node has no label {key}"
    return f"{key} {expr.get('operator', '')} ({vals}): {have}" if vals else \
        f"{key} {expr.get('operator', '')}: {have}"


def template_spec(ds: Obj) -> Obj:
    return ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}


def exclusions(ds: Obj, node: Obj) -> list[str]:
    """Why the DaemonSet's pods cannot land on the node; [] when they can."""
    spec = template_spec(ds)
    lab = labels(node)
    out = []
    for k, v in (spec.get("nodeSelector") or {}).items():
        if lab.get(k) != str(v):
            have = f"node has {k}={lab[k]}" if k in lab else f"node has no label {k}"
            out.append(f"nodeSelector {k}={v}: {have}")
    terms = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
             .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get(
        "nodeSelectorTerms") or []
    if terms:
        failed: list[str] = []
        for term in terms:
            bad = [e for e in term.get("matchExpressions") or []
                   if not _expr_ok(e, lab, name_of(node), False)]
            bad += [e for e in term.get("matchFields") or []
                    if not _expr_ok(e, lab, name_of(node), True)]
            if not bad:
                failed = []
                break
            failed.append(_fmt_expr(bad[0], lab))
        out += [f"required node affinity: {f}" for f in failed[:2]]
    tols = spec.get("tolerations") or []
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if taint.get("key") in _DS_AUTO_TOLERATED:
            continue
        if not any(_tolerates(t, taint) for t in tols):
            out.append(f"taint {fmt_taint(taint)} not tolerated")
    return out


def fmt_taint(taint: Obj) -> str:
    value = f"={taint['value']}" if taint.get("value") else ""
    return f"{taint.get('key', '')}{value}:{taint.get('effect', '')}"


def untolerated_taints(ds: Obj, node: Obj) -> list[Obj]:
    tols = template_spec(ds).get("tolerations") or []
    return [t for t in (node.get("spec") or {}).get("taints") or []
            if t.get("effect") in ("NoSchedule", "NoExecute")
            and t.get("key") not in _DS_AUTO_TOLERATED
            and not any(_tolerates(x, t) for x in tols)]


def selects(ds: Obj, node: Obj) -> bool:
    return not exclusions(ds, node)
