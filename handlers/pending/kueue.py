"""QUEUE_QUOTA_EXHAUSTED for Kueue: the job's Workload is not admitted, and why.

Kueue keeps the job suspended (or the pod gated) until its Workload is admitted: no pod, or
no scheduler event, exists before that. The reasons are read from Kueue's own words on the
Workload (``handlers.kueue.parse_message``) and from the objects: the LocalQueue and
ClusterQueue (missing, stopped, inactive), the ClusterQueue's quota and usage per flavor,
the Workloads that hold it, its cohort, and the Workload's admission checks.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from typing import Any

from handlers import kueue
from handlers.batchjobs import suspended
from handlers.gpu import is_gpu_resource, name_of, ns_of
from handlers.kube.commands import kubectl, merge_patch, payload, pointer
from handlers.kube.quantity import fmt_quantity, parse_quantity
from handlers.kueue import Reason
from handlers.model import Finding, Fix, ObjectRef, Patch
from handlers.pending.context import PendingContext
from handlers.view import Obj
from handlers.words import counted

CODE = "QUEUE_QUOTA_EXHAUSTED"
_ORDER = (kueue.QUEUE_MISSING, kueue.QUEUE_STOPPED, kueue.QUEUE_INACTIVE, kueue.NO_FLAVOR,
          kueue.MAX_CAPACITY, kueue.BORROWING, kueue.COHORT, kueue.QUOTA)


def _owners(ctx: PendingContext) -> list[Obj]:
    out = [ctx.controller] if ctx.controller is not None else []
    if ctx.pod_exists:
        out.append(ctx.pod)
        for ref in (ctx.pod.get("metadata") or {}).get("ownerReferences") or []:
            out.append({"kind": ref.get("kind"), "metadata": {"name": ref.get("name"),
                                                              "uid": ref.get("uid")}})
    return out



def check(ctx: PendingContext) -> list[Finding]:
    queue = kueue.queue_name(ctx.pod) or (
        kueue.queue_name(ctx.controller) if ctx.controller is not None else None)
    if not queue and not _held(ctx):
        return []  # not Kueue's (a job Kueue manages without the label is still suspended)
    wls = kueue.workloads_for(ctx.reader, ctx.namespace, _owners(ctx))
    if not wls and not queue:
        return []
    out = []
    for wl in wls:
        if kueue.is_admitted(wl) or kueue.is_finished(wl):
            continue
        out.append(_diagnose(ctx, wl, kueue.queue_name(wl) or queue or ""))
    if not wls and queue and _held(ctx):
        # Kueue holds it but no Workload was found (not made yet, or not in the data): the
        # queue objects may still say why; else say that Kueue holds it, not "all clear".
        reasons, cq = _queue_reasons(ctx, queue)
        ev = [f"no Workload found for it in {ctx.namespace}"
              + ("" if ctx.reader.readable("Workload") else " (Workloads could not be read)")]
        out.append(_finding(ctx, None, queue, reasons, cq, 0, [], ev))
    return out


def _held(ctx: PendingContext) -> bool:
    """Kueue keeps the target from running: its job is suspended or its pod gated."""
    ctrl = ctx.controller
    if ctrl is not None and ((ctrl.get("spec") or {}).get("suspend") or suspended(ctrl)):
        return True
    gates = (ctx.pod.get("spec") or {}).get("schedulingGates") or []
    return any(str(g.get("name", "")).startswith("kueue.x-k8s.io/") for g in gates)


def _queue_reasons(ctx: PendingContext, queue: str) -> tuple[list[Reason], Obj | None]:
    """Reasons the queue objects show by themselves, and the ClusterQueue."""
    reader = ctx.reader
    reasons: list[Reason] = []
    lq = reader.get("LocalQueue", queue, ctx.namespace)
    if lq is None:
        if reader.readable("LocalQueue"):
            near = difflib.get_close_matches(
                queue, [name_of(q) for q in reader.list("LocalQueue", ctx.namespace)], 1, 0.6)
            reasons.append(Reason(kueue.QUEUE_MISSING, f"LocalQueue {queue} doesn't exist"
                                  + (f" (namespace {ctx.namespace} has {near[0]})" if near
                                     else ""), queue=queue, queue_kind="LocalQueue"))
        return reasons, None
    if kueue.stop_policy(lq):
        reasons.append(Reason(kueue.QUEUE_STOPPED,
                              f"LocalQueue {queue}: spec.stopPolicy: {kueue.stop_policy(lq)}",
                              queue=queue, queue_kind="LocalQueue"))
    cq_name = str((lq.get("spec") or {}).get("clusterQueue") or "")
    cq = reader.get("ClusterQueue", cq_name) if cq_name else None
    if cq is None:
        if cq_name and reader.readable("ClusterQueue"):
            reasons.append(Reason(kueue.QUEUE_MISSING, f"ClusterQueue {cq_name} doesn't exist",
                                  queue=cq_name, queue_kind="ClusterQueue"))
        return reasons, None
    if kueue.stop_policy(cq):
        reasons.append(Reason(kueue.QUEUE_STOPPED,
                              f"ClusterQueue {cq_name}: spec.stopPolicy: {kueue.stop_policy(cq)}",
                              queue=cq_name, queue_kind="ClusterQueue"))
    active = kueue.conditions(cq).get("Active")
    if active is not None and active.get("status") == "False" and not kueue.stop_policy(cq):
        reasons.append(Reason(kueue.QUEUE_INACTIVE,
                              f"ClusterQueue {cq_name} Active=False ({active.get('reason', '')}): "
                              f"{active.get('message', '')}",
                              queue=cq_name, queue_kind="ClusterQueue"))
    return reasons, cq


def _words(ctx: PendingContext, wl: Obj) -> str:
    """Kueue's latest explanation on the Workload: condition, else its last Pending event."""
    conds = kueue.conditions(wl)
    for t in ("QuotaReserved", "Admitted"):
        c = conds.get(t)
        if c and c.get("status") == "False" and c.get("message"):
            return str(c["message"])
    for e in reversed(ctx.reader.events("Workload", name_of(wl), ctx.namespace)):
        if e.get("reason") == "Pending" and e.get("message"):
            return str(e["message"])
    return ""


def _diagnose(ctx: PendingContext, wl: Obj, queue: str) -> Finding:
    words = _words(ctx, wl)
    said, preempting = kueue.parse_message(words)
    seen, cq = _queue_reasons(ctx, queue) if queue else ([], None)
    reasons = [next((r for r in seen if r.kind == s.kind and r.queue == s.queue), s)
               for s in said]
    reasons += [r for r in seen if r not in reasons and not any(
        s.kind == r.kind and s.queue == r.queue for s in said)]
    if not reasons and cq is not None and not kueue.is_true(wl, "QuotaReserved"):
        reasons = _computed_shortfall(wl, cq)
    checks = kueue.pending_checks(wl) if kueue.is_true(wl, "QuotaReserved") else []
    evidence = [f"Workload {name_of(wl)}: queue {queue or '?'}, not admitted"]
    if words:
        evidence.append(f"Kueue: {words}")
    return _finding(ctx, wl, queue, reasons, cq, preempting, checks, evidence)


def _computed_shortfall(wl: Obj, cq: Obj) -> list[Reason]:
    """When Kueue wrote nothing yet: the GPU resources whose every flavor lacks room."""
    out = []
    quotas = kueue.quotas(cq)
    for res, need in kueue.requests_of(wl).items():
        if not is_gpu_resource(res):
            continue
        offered = {f: q for (f, r), q in quotas.items() if r == res}
        if not offered:
            out.append(Reason(kueue.NO_FLAVOR, f"resource {res} unavailable in ClusterQueue "
                              f"{name_of(cq)}", resource=res))
            continue
        if all(q.nominal - q.used < need for q in offered.values()):
            f, q = max(offered.items(), key=lambda kv: kv[1].nominal - kv[1].used)
            more = need - max(q.nominal - q.used, 0.0)
            out.append(Reason(kueue.QUOTA, f"{res} in flavor {f}: {fmt_quantity(more)} more "
                              "needed than the unused nominal quota", resource=res, flavor=f,
                              quantity=fmt_quantity(more)))
    return out


def _finding(ctx: PendingContext, wl: Obj | None, queue: str, reasons: list[Reason],
             cq: Obj | None, preempting: int, checks: Sequence[Mapping[str, Any]],
             evidence: list[str] | None = None) -> Finding:
    ns = ctx.namespace
    ev = list(evidence or [])
    objs = [ctx.target_ref]
    if wl is not None:
        objs.append(ObjectRef("Workload", name_of(wl), ns))
    cq_name = name_of(cq) if cq is not None else ""
    if queue:
        objs.append(ObjectRef("LocalQueue", queue, ns))
    if cq_name:
        objs.append(ObjectRef("ClusterQueue", cq_name))
    reasons = sorted(reasons, key=lambda r: _ORDER.index(r.kind) if r.kind in _ORDER else 99)
    said = " ".join(ev)
    for r in reasons:
        if r.text not in said:  # Kueue's own line already shows what it said
            ev.append(f"reason: {r.text}")
    if preempting:
        ev.append(f"Kueue is preempting {counted(preempting, 'workload')} to make room")
    quota_lines, fix_quota, holders = _quota_detail(ctx, wl, cq, reasons)
    ev += quota_lines
    flavor_lines, fix_flavor = _flavor_detail(ctx, reasons)
    ev += flavor_lines
    for c in checks:
        if c:
            ev.append(f"admission check {c.get('name')}: {c.get('state')}"
                      + (f" ({c.get('message')})" if c.get("message") else ""))
    ctrl = ctx.controller
    if ctrl is not None and ((ctrl.get("spec") or {}).get("suspend") or suspended(ctrl)):
        where = "runPolicy.suspend" if ctrl.get("kind") == "PyTorchJob" else "suspend"
        ev.append(f"{ctrl.get('kind')} {name_of(ctrl)}: spec.{where}: true "
                  "(Kueue releases it on admission)")
    gates = [str(g.get("name")) for g in (ctx.pod.get("spec") or {}).get("schedulingGates") or []]
    if ctx.pod_exists and gates:
        ev.append(f"pod schedulingGates: {', '.join(gates)} (Kueue removes its gate on "
                  "admission)")
    top = reasons[0] if reasons else None
    waiting = False  # Kueue has not decided yet: nothing refused the workload
    wl_name = name_of(wl) if wl is not None else f"for {ctx.target_ref}"
    if top is None and checks:
        names = ", ".join(str(c.get("name")) for c in checks)
        waiting = True
        summary = (f"Kueue reserved quota for workload {wl_name} but admission "
                   f"{'check' if len(checks) == 1 else 'checks'} {names} "
                   f"{'has' if len(checks) == 1 else 'have'} not passed yet.")
        fix = Fix("See the check and its controller (ProvisioningRequest: the provisioning "
                  "requests; MultiKueue: the worker clusters).",
                  (kubectl("get", "admissionchecks", names.split(", ")[0], "-o", "yaml"),
                   kubectl("get", "provisioningrequests", "-A")))
    elif top is None:
        waiting = True
        summary = (f"Kueue has not admitted workload {wl_name} from queue {queue} and has "
                   "not said why yet.")
        look = (kubectl("describe", "workload", name_of(wl), namespace=ns) if wl is not None
                else kubectl("get", "workloads", "-o", "wide", namespace=ns,
                             note="find its Workload, then describe it"))
        fix = Fix("Kueue's conditions on the Workload and the ClusterQueue say what it waits "
                  "for.", (look, *((kubectl("get", "clusterqueue", cq_name, "-o", "yaml"),)
                                   if cq_name else ())))
    else:
        summary, fix = _say(top, wl_name, queue, cq_name, ns, preempting, fix_quota,
                            fix_flavor, holders)
    return Finding(CODE, summary, tuple(objs), tuple(ev), fix,
                   conditions=frozenset({"awaiting-admission"} if waiting else ()))


def _quota_detail(ctx: PendingContext, wl: Obj | None, cq: Obj | None,
                  reasons: list[Reason]) -> tuple[list[str], Fix, list[str]]:
    """Usage lines of the (flavor, resource) Kueue named, its holders, the cohort; the
    quota change that would admit the workload; the workloads holding the quota."""
    if cq is None:
        return [], Fix(), []
    lines: list[str] = []
    holders: list[str] = []
    fix = Fix()
    quotas = kueue.quotas(cq)
    me = f"{ns_of(wl)}/{name_of(wl)}" if wl is not None else ""
    need = kueue.requests_of(wl) if wl is not None else {}
    done: set[tuple[str, str]] = set()
    more_by_key: dict[tuple[str, str], float] = {}
    for r in reasons:  # one reason per pod set: their shortfalls add up
        if r.kind in (kueue.QUOTA, kueue.COHORT):
            key = (r.flavor, r.resource)
            more_by_key[key] = more_by_key.get(key, 0.0) + parse_quantity(r.quantity)
    for r in reasons:
        if r.kind not in (kueue.QUOTA, kueue.COHORT, kueue.BORROWING, kueue.MAX_CAPACITY):
            continue
        key = (r.flavor, r.resource)
        if key in done:
            continue
        done.add(key)
        q = quotas.get(key)
        if q is None:
            continue
        cohort = kueue.cohort_of(cq)
        lim = "" if not cohort else ", no borrowing limit" if q.borrowing_limit is None else \
            f", borrowingLimit {fmt_quantity(q.borrowing_limit)}"
        lines.append(f"ClusterQueue {name_of(cq)} flavor {r.flavor} {r.resource}: used "
                     f"{fmt_quantity(q.used)} of nominalQuota {fmt_quantity(q.nominal)}"
                     + (f" (cohort {cohort}, borrowed {fmt_quantity(q.borrowed)}{lim})"
                        if cohort else " (no cohort to borrow from)"))
        held_by = kueue.holders(ctx.reader, name_of(cq), r.flavor, r.resource, exclude=[me])
        for ref, held, prio in held_by[:5]:
            lines.append(f"held by workload {ref}: {fmt_quantity(held)} {r.resource} "
                         f"(priority {prio})")
        if held_by and not holders:
            holders.extend(ref for ref, _, _ in held_by[:3])
        if cohort and r.kind in (kueue.COHORT, kueue.BORROWING, kueue.QUOTA):
            lines += _cohort_lines(ctx, cq, cohort, key)
        want = need.get(r.resource, 0.0)
        more = more_by_key.get(key, 0.0)
        if not fix:
            if r.kind == kueue.BORROWING:
                new = (q.borrowing_limit or 0.0) + max(want, more)
                fix = _set_quota(cq, q, "borrowingLimit", new,
                                 f"raise borrowingLimit of {r.resource} in flavor {r.flavor} "
                                 f"to {fmt_quantity(new)}")
            else:
                new = (max(q.nominal, q.used + want) if r.kind == kueue.MAX_CAPACITY
                       else max(q.used, q.nominal) + more)
                fix = _set_quota(cq, q, "nominalQuota", new,
                                 f"raise nominalQuota of {r.resource} in flavor {r.flavor} "
                                 f"from {fmt_quantity(q.nominal)} to {fmt_quantity(new)}")
    return lines, fix, holders


def _set_quota(cq: Obj, q: kueue.Quota, field: str, value: float, said: str) -> Fix:
    """One quota field of the ClusterQueue set by a JSON patch at its own place (its lists
    leave a merge patch no way to name one resource)."""
    op = "replace" if field == "nominalQuota" or q.borrowing_limit is not None else "add"
    return Fix(said, (kubectl("patch", "clusterqueue", name_of(cq), "--type", "json", "-p",
                              payload([{"op": op, "path": f"{pointer(q.path)}/{field}",
                                        "value": fmt_quantity(value)}])),),
               Patch("ClusterQueue", name_of(cq), q.path, {field: fmt_quantity(value)}))


def _flavor_detail(ctx: PendingContext, reasons: list[Reason]) -> tuple[list[str], Fix]:
    """What the ResourceFlavors Kueue named demand of the pod (labels, taints), and the
    toleration that would let an untolerated flavor fit."""
    lines: list[str] = []
    fix = Fix()
    for r in reasons:
        if r.kind != kueue.NO_FLAVOR or not r.flavor:
            continue
        rf = ctx.reader.get("ResourceFlavor", r.flavor)
        if rf is None:
            if ctx.reader.readable("ResourceFlavor"):
                lines.append(f"ResourceFlavor {r.flavor}: not found")
            continue
        spec = rf.get("spec") or {}
        labels_ = ", ".join(f"{k}={v}" for k, v in (spec.get("nodeLabels") or {}).items())
        taints = [f"{t.get('key')}" + (f"={t.get('value')}" if t.get("value") else "")
                  + f":{t.get('effect')}" for t in spec.get("nodeTaints") or []]
        lines.append(f"ResourceFlavor {r.flavor}: nodeLabels {labels_ or '(none)'}; "
                     f"nodeTaints {', '.join(taints) or '(none)'}")
        if "untolerated taint" in r.text and spec.get("nodeTaints") and not fix:
            t = (spec.get("nodeTaints") or [])[0]
            tol = {"key": str(t.get("key")), "operator": "Exists", "effect": str(t.get("effect"))}
            fix = Fix(f"Let the pods tolerate flavor {r.flavor}'s taint (the patch).",
                      (ctx.add_to_spec("tolerations", [tol]),),
                      ctx.pod_patch([tol], "tolerations"))
    return lines, fix


def _cohort_lines(ctx: PendingContext, cq: Obj, cohort: str,
                  key: tuple[str, str]) -> list[str]:
    lines = []
    for other in ctx.reader.list("ClusterQueue"):
        if name_of(other) == name_of(cq) or kueue.cohort_of(other) != cohort:
            continue
        q = kueue.quotas(other).get(key)
        if q is not None:
            lines.append(f"cohort {cohort}: ClusterQueue {name_of(other)} uses "
                         f"{fmt_quantity(q.used)} of {fmt_quantity(q.nominal)} {key[1]} in "
                         f"flavor {key[0]}")
    return lines[:4]


def _say(r: Reason, wl: str, queue: str, cq: str, ns: str, preempting: int,
         quota: Fix, flavor: Fix, holders: list[str]) -> tuple[str, Fix]:
    cq_ref = cq or "(its ClusterQueue)"
    edit = quota or (Fix(commands=(kubectl("edit", "clusterqueue", cq),)) if cq else Fix())
    if r.kind == kueue.QUEUE_MISSING:
        kind = r.queue_kind or "LocalQueue"
        if kind == "LocalQueue":
            near = re.search(r"has (\S+)\)$", r.text)
            name = r.queue or queue
            first = (f"Set the job's kueue.x-k8s.io/queue-name label to {near.group(1)}, or "
                     "create the queue" if near else
                     "Create the queue (or fix the job's kueue.x-k8s.io/queue-name label)")
            return (f"Kueue cannot admit workload {wl}: LocalQueue {name} does not "
                    f"exist in namespace {ns}.",
                    Fix(first + (f" (the patch: the whole object, on ClusterQueue {cq})." if cq
                                 else ", on one of the ClusterQueues."),
                        (kubectl("get", "clusterqueues"),),
                        Patch("LocalQueue", name, "", {
                            "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
                            "metadata": {"name": name, "namespace": ns},
                            "spec": {"clusterQueue": cq}}, ns) if cq else None))
        return (f"Kueue cannot admit workload {wl}: ClusterQueue {r.queue} does not exist.",
                Fix(f"Create ClusterQueue {r.queue}, or point LocalQueue {queue} at an existing "
                    "one.", (kubectl("get", "clusterqueues"),
                             kubectl("edit", "localqueue", queue, namespace=ns))))
    if r.kind == kueue.QUEUE_STOPPED:
        kind = r.queue_kind or "ClusterQueue"
        return (f"Kueue admits nothing from {kind} {r.queue}: it is stopped (stopPolicy), so "
                f"workload {wl} waits.",
                Fix(f"Start {kind} {r.queue} again.", (
                    merge_patch(kind.lower(), r.queue, {"spec": {"stopPolicy": "None"}},
                                namespace=ns if kind == "LocalQueue" else None),)))
    if r.kind == kueue.QUEUE_INACTIVE:
        return (f"ClusterQueue {r.queue} is inactive, so workload {wl} cannot be admitted: "
                f"{r.text}",
                Fix("Create what its Active condition names as missing.", (
                    kubectl("get", "clusterqueue", r.queue, "-o", "yaml"),
                    kubectl("get", "resourceflavors,admissionchecks"))))
    if r.kind == kueue.NO_FLAVOR:
        what = f"resource {r.resource}" if r.resource else f"flavor {r.flavor}"
        said = f"No flavor of ClusterQueue {cq_ref} fits workload {wl}: {r.text}."
        if flavor:
            return said, flavor
        return said, Fix(
            f"Give ClusterQueue {cq_ref} a flavor that offers the request ({what}), or make "
            f"the pod tolerate or select what flavor {r.flavor or 'it names'} needs.",
            (*((kubectl("edit", "clusterqueue", cq),) if cq else ()),
             *((kubectl("get", "resourceflavor", r.flavor, "-o", "yaml"),) if r.flavor
               else ())))
    if r.kind == kueue.MAX_CAPACITY:
        return (f"Workload {wl} asks more {r.resource} than ClusterQueue {cq_ref} can ever "
                f"have in flavor {r.flavor} (maximum capacity {r.quantity}).",
                edit.then(Fix("Or shrink the job's request.")))
    if r.kind == kueue.BORROWING:
        return (f"ClusterQueue {cq_ref} has used its nominal {r.resource} quota in flavor "
                f"{r.flavor} and reached its borrowing limit, so workload {wl} waits.",
                Fix("Wait for the queue's admitted workloads, or:").then(edit))
    wait = (f"Kueue is preempting {counted(preempting, 'workload')} to admit it: wait for them to "
            "terminate. Otherwise: " if preempting else "")
    where = "its cohort's unused quota" if r.kind == kueue.COHORT else "the nominal quota"
    return (f"Kueue keeps workload {wl} waiting: ClusterQueue {cq_ref} has {where} for "
            f"{r.resource} in flavor {r.flavor} used up ({r.quantity} more needed).",
            Fix(f"{wait}Wait for the workloads holding the quota to finish"
                + (f" ({', '.join(holders)})" if holders else "") + ", or change the quota:"
                ).then(edit).then(Fix(
                    "Or give the job a higher WorkloadPriorityClass if the ClusterQueue "
                    "preempts (spec.preemption.withinClusterQueue: LowerPriority).")))
