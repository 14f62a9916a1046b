"""why-pending: the root cause that keeps a GPU workload from running, with proof and fix.

Target forms, as kubectl takes them: ``POD``, ``NS/POD``, ``KIND/NAME`` (deployment,
statefulset, job, replicaset and their short names) with ``namespace`` beside it. A target
without a namespace is looked up in ``default``.
"""

from __future__ import annotations

import difflib

from handlers import batchjobs
from handlers.chain.inventory import admission_failed
from handlers.errors import TargetNotFound
from handlers.finish import finish
from handlers.gpu import name_of
from handlers.grouping import pools_of
from handlers.kube.commands import kubectl
from handlers.kube.resources import pod_requests
from handlers.kube.selectors import match_label_selector_object
from handlers.model import Diagnosis, Finding, FitChange, Fix, ObjectRef, Rollback
from handlers.pending import checks, fitsif, placement, spec, started
from handlers.pending.context import PendingContext
from handlers.rollout import deployment_rollout
from handlers.runtime import checks as runtime
from handlers.target import Target
from handlers.timefmt import age_text, seconds_since
from handlers.view import Obj, Reader, ViewError

# After the registered checks (handlers/pending/checks.py), every unplaced pod is measured
# against the scheduler's filters.
PLACEMENT_CHECK = "placement: every node through the scheduler's filters"


def _owned_by(obj: Obj, owner: Obj) -> bool:
    uid = owner.get("metadata", {}).get("uid")
    for ref in obj.get("metadata", {}).get("ownerReferences") or []:
        if (uid and ref.get("uid") == uid) or (
            ref.get("kind") == owner.get("kind") and ref.get("name") == name_of(owner)
        ):
            return True
    return False


def _not_found(reader: Reader, t: Target) -> TargetNotFound:
    same_ns = [name_of(o) for o in reader.list(t.kind, t.namespace)]
    close = difflib.get_close_matches(t.name, same_ns, n=3, cutoff=0.5)
    elsewhere = [f"{o.get('metadata', {}).get('namespace')}/{name_of(o)}"
                 for o in reader.list(t.kind, None, field_selector=f"metadata.name={t.name}")]
    return TargetNotFound(f"{t.kind.lower()} {t.name!r} not found in namespace {t.namespace!r}",
                          suggestions=close, elsewhere=elsewhere)


def _resolve(reader: Reader, t: Target) -> tuple[Obj | None, Obj | None, list[Obj]]:
    """(pod, controller, the controller's pods)."""
    obj = reader.get(t.kind, t.name, t.namespace)
    if obj is None and not reader.readable(t.kind):
        # Could not look: say why, not "not found".
        raise ViewError(reader.unchecked[-1], kind=t.kind, namespace=t.namespace)
    if obj is None:
        raise _not_found(reader, t)
    obj.setdefault("kind", t.kind)
    if t.kind == "Pod":
        return obj, _owner(reader, obj), []
    owners = [obj]
    if t.kind == "Deployment":
        owners = [rs for rs in reader.list("ReplicaSet", t.namespace) if _owned_by(rs, obj)]
        owners.sort(key=lambda rs: str(rs.get("metadata", {}).get("creationTimestamp", "")))
    sel = (obj.get("spec") or {}).get("selector")
    candidates = reader.list("Pod", t.namespace)
    mark = batchjobs.pod_label(obj)
    if mark is not None:  # pods of child Jobs / RayClusters: found by their label
        return None, obj, [p for p in candidates if _labels(p).get(mark[0]) == mark[1]]
    pods = [p for p in candidates if any(_owned_by(p, o) for o in owners)
            or (sel and t.kind != "Deployment" and not p.get("metadata", {}).get(
                "ownerReferences") and match_label_selector_object(sel, _labels(p)))]
    return None, obj, pods


def _labels(o: Obj) -> dict[str, str]:
    return o.get("metadata", {}).get("labels") or {}


def _owner(reader: Reader, pod: Obj) -> Obj | None:
    for ref in pod.get("metadata", {}).get("ownerReferences") or []:
        kind = ref.get("kind")
        if kind in ("ReplicaSet", "StatefulSet", "Job", "DaemonSet"):
            owner = reader.get(kind, ref.get("name", ""), pod["metadata"].get("namespace"))
            if owner is not None:
                owner.setdefault("kind", kind)
                return owner
    return None


def template_pod(controller: Obj, namespace: str) -> Obj:
    tmpl = (batchjobs.gpu_template(controller) if controller.get("kind") in batchjobs.KINDS
            else (controller.get("spec") or {}).get("template") or {})
    meta = dict(tmpl.get("metadata") or {})
    meta.setdefault("name", f"{name_of(controller)}-<not created>")
    meta["namespace"] = namespace
    return {"kind": "Pod", "apiVersion": "v1", "metadata": meta,
            "spec": dict(tmpl.get("spec") or {}), "status": {"phase": "Pending"}}


def _controller_events(reader: Reader, controller: Obj | None, ns: str) -> list[Obj]:
    if controller is None:
        return []
    kind = str(controller.get("kind"))
    events = list(reader.events(kind, name_of(controller), ns))
    if kind == "Deployment":
        for rs in reader.list("ReplicaSet", ns):
            if _owned_by(rs, controller):
                events += reader.events("ReplicaSet", name_of(rs), ns)
    return sorted(events, key=_event_time)


def _event_time(e: Obj) -> str:
    return str(e.get("lastTimestamp") or e.get("eventTime") or e.get("firstTimestamp") or "")


def _is_pending(pod: Obj) -> bool:
    return bool(pod.get("status", {}).get("phase", "Pending") == "Pending")


def desired_pods(controller: Obj, *, suspended_too: bool = False) -> int:
    """How many pods the controller wants running now."""
    spec = controller.get("spec") or {}
    if controller.get("kind") == "Job":
        if spec.get("suspend") and not suspended_too:
            return 0
        for c in (controller.get("status") or {}).get("conditions") or []:
            if c.get("type") in ("Complete", "Failed") and c.get("status") == "True":
                return 0
        want = int(spec.get("parallelism", 1) or 0)
        if spec.get("completions") is not None:
            done = int((controller.get("status") or {}).get("succeeded") or 0)
            want = min(want, max(int(spec["completions"]) - done, 0))
        return want
    replicas = spec.get("replicas")
    return 1 if replicas is None else int(replicas)


def _pick_pod(controller: Obj, pods: list[Obj]) -> Obj | None:
    """The pod to diagnose: a pending one; when pods are missing, the newest one a kubelet
    refused after binding (the scheduler would place its template on that node again), else
    None (the controller cannot create them: diagnose its template); else a running one."""
    pending = [p for p in pods if _is_pending(p)]
    if pending:
        return sorted(pending, key=name_of)[0]
    active = [p for p in pods if p.get("status", {}).get("phase") not in ("Succeeded", "Failed")]
    if len(active) < desired_pods(controller, suspended_too=True) or not pods:
        refused = [p for p in pods if admission_failed(p)]
        return max(refused, key=_created) if refused else None
    return sorted(pods, key=name_of)[0]


def _created(pod: Obj) -> tuple[str, str]:
    return str((pod.get("metadata") or {}).get("creationTimestamp") or ""), name_of(pod)


def _revision(rs: Obj) -> tuple[int, str]:
    meta = rs.get("metadata") or {}
    rev = str((meta.get("annotations") or {}).get("deployment.kubernetes.io/revision") or "")
    return (int(rev) if rev.isdigit() else -1, str(meta.get("creationTimestamp") or ""))


def _newest_rs_cannot_create(reader: Reader, deploy: Obj,
                             pods: list[Obj]) -> tuple[bool, Obj | None]:
    """When a Deployment's newest ReplicaSet cannot create its pods (ReplicaFailure,
    FailedCreate), the answer is about its template, not an older ReplicaSet's running pod:
    ``(True, its pending pod or None)``; ``(False, None)`` when it is fine."""
    if deploy.get("kind") != "Deployment":
        return False, None
    ns = str(deploy.get("metadata", {}).get("namespace") or "")
    owned = [rs for rs in reader.list("ReplicaSet", ns) if _owned_by(rs, deploy)]
    if not owned:
        return False, None
    newest = max(owned, key=_revision)
    failing = any(c.get("type") == "ReplicaFailure" and c.get("status") == "True"
                  for c in (newest.get("status") or {}).get("conditions") or [])
    failing = failing or any(e.get("reason") == "FailedCreate" for e in reader.events(
        "ReplicaSet", name_of(newest), ns))
    if not failing:
        return False, None
    pending = sorted((p for p in pods if _owned_by(p, newest) and _is_pending(p)), key=name_of)
    return True, (pending[0] if pending else None)


def run(reader: Reader, target: Target) -> Diagnosis:
    t = target
    pod, controller, pods = _resolve(reader, t)
    if pod is None and controller is not None:
        stuck, stuck_pod = _newest_rs_cannot_create(reader, controller, pods)
        pod = stuck_pod if stuck else _pick_pod(controller, pods)
    diag = Diagnosis("why-pending", str(t))
    ns = t.namespace
    p: placement.Placement | None = None
    if pod is not None:
        ctx = PendingContext(reader, pod, True, ns, controller)
        ctx.events = sorted(reader.events("Pod", name_of(pod), ns), key=_event_time)
        diag.details["pod"] = name_of(pod)
        if controller is not None and t.kind != "Pod":
            diag.details["pods"] = {
                "total": len(pods), "pending": sum(_is_pending(p) for p in pods)}
    else:
        assert controller is not None
        ctx = PendingContext(reader, template_pod(controller, ns), False, ns, controller)
        diag.details["pod"] = None
    ctx.controller_events = _controller_events(reader, controller, ns)
    diag.details["requests"] = placement.resource_summary(pod_requests(ctx.pod))
    diag.details["events"] = [_event_line(e) for e in (ctx.events + ctx.controller_events)[-12:]]

    trouble = started.trouble(ctx) if ctx.pod_exists and not _is_pending(ctx.pod) else None
    if ctx.pod_exists and not _is_pending(ctx.pod) and trouble is None:
        diag.add(_not_pending(reader, ctx))
        diag.add_all(spec.check_gpu_not_requested(ctx))
        diag.can_clear = False
    elif ctx.pod_exists and ctx.pod.get("spec", {}).get("nodeName"):
        # Placed but not running as it should (admission, sandbox/hook, CUDA at start).
        diag.details["trouble"] = trouble
        diag.add_all(started.check(ctx))
        diag.add_all(spec.check_gpu_not_requested(ctx))
        if trouble and not diag.problems:
            diag.can_clear = False
            diag.unchecked.append(f"the pod does not run as it should ({trouble}); no known "
                                  "GPU-stack cause in its events, status, log or node chain")
    else:
        p = _diagnose_unbound(ctx, diag)
    bound = ctx.pod.get("spec", {}).get("nodeName")
    runtime.enrich(reader, diag, nodes=[v.node for v in diag.nodes] or (
        [bound] if bound else None), idle=True, namespace=ns)
    diag.unchecked.extend(u for u in reader.unchecked if u not in diag.unchecked)
    diag.withheld = list(reader.withheld)
    diag.fits_nowhere = p is not None and not any(f.fits for f in p.fits)
    if p is not None and not _gated(ctx):
        _fits_if(ctx, p, diag)
        if diag.fits_nowhere and diag.problems:
            diag.rollback = _rollback(ctx)
    diag.node_pools = pools_of(diag.findings, ctx.nodes_by_name)
    return finish(diag)


def _rollback(ctx: PendingContext) -> Rollback | None:
    """A Deployment's recent rollout whose previous template would fit: the finisher puts
    the rollback at the head of the root cause's fix and among the ways to make it fit."""
    deploy = ctx.controller
    if deploy is not None and deploy.get("kind") == "ReplicaSet":
        ref = next((r for r in deploy.get("metadata", {}).get("ownerReferences") or []
                    if r.get("kind") == "Deployment"), None)
        deploy = ctx.reader.get("Deployment", str(ref.get("name")), ctx.namespace) \
            if ref else None
    if deploy is None:
        return None
    deploy.setdefault("kind", "Deployment")
    ro = deployment_rollout(ctx.reader, deploy, [ctx.pod] if ctx.pod_exists else [])
    if ro is None or ro.previous_template is None:
        return None
    nodes = fitsif.fits_as(ctx, ro.previous_template)
    if not nodes:
        return None
    back = ro.fix()
    return Rollback(ro.evidence(), back, FitChange(
        "other", f"{back.summary.rstrip('.')} (then it fits on {', '.join(nodes[:3])})",
        tuple(nodes[:5]),
        (ObjectRef("Deployment", ro.name, ro.namespace),)))


def _fits_if(ctx: PendingContext, p: placement.Placement, diag: Diagnosis) -> None:
    found = fitsif.find(ctx, p.fits, p.gpu_nodes,
                        lambda n: placement.physical_gpus(p, n), diag.findings)
    diag.fits_if = list(found.changes)
    if found.closest:
        diag.details["fits_if_closest"] = found.closest


def _diagnose_unbound(ctx: PendingContext, diag: Diagnosis) -> placement.Placement | None:
    found, ran = checks.run(ctx)
    for label in (*ran, PLACEMENT_CHECK):
        diag.check(label)
    diag.add_all(found)
    explained = bool(diag.problems)
    gate = _gated(ctx)
    p = None
    if ctx.nodes:
        found, p = placement.check(ctx)
        diag.nodes = placement.verdicts(p)
        if ctx.scope_note:
            diag.unchecked.append(ctx.scope_note)
        if gate:
            # Held before the scheduler: node fit matters only once the gate opens.
            diag.unchecked.append(f"placement findings: {gate}; the per-node table shows "
                                  "where it would fit once released")
        else:
            diag.add_all(f for f in found
                         if not (explained and f.code == "PENDING_NO_EVENTS"))
    elif ctx.reader.readable("Node"):
        diag.unchecked.append("placement: the data holds no Node objects")
    if ctx.details.get("scheduler_disagrees"):
        diag.can_clear = False
    has_fs = any(e.get("reason") == "FailedScheduling" for e in ctx.events)
    if ctx.pod_exists and not has_fs and not diag.problems and not gate \
            and "PENDING_NO_EVENTS" not in diag.codes:
        diag.add(Finding(
            "PENDING_NO_EVENTS", "The pod is Pending and no scheduler event explains it yet.",
            (ObjectRef("Pod", ctx.pod_name, ctx.namespace),),
            (f"events on the pod: {len(ctx.events)}, none with reason FailedScheduling",),
            Fix("Wait for the scheduler's next attempt, and check that it runs (on a managed "
                "control plane its pods are not listed).",
                (kubectl("get", "events", "--field-selector",
                         f"involvedObject.name={ctx.pod_name}", namespace=ctx.namespace),
                 kubectl("get", "pods", "-l", "component=kube-scheduler",
                         namespace="kube-system"))),
        ))
    return p


def _gated(ctx: PendingContext) -> str | None:
    """Why the pod never reaches the scheduler, when something holds it before."""
    gates = ctx.pod.get("spec", {}).get("schedulingGates") or []
    if gates:
        return "the pod has schedulingGates " + ", ".join(str(g.get("name")) for g in gates)
    if ctx.controller is not None and ((ctx.controller.get("spec") or {}).get("suspend")
                                       or batchjobs.suspended(ctx.controller)):
        return f"{str(ctx.controller.get('kind')).lower()} {name_of(ctx.controller)} is suspended"
    return None


def _event_line(e: Obj) -> str:
    count = e.get("count") or (e.get("series") or {}).get("count") or 1
    return (f"{_event_time(e)} {e.get('type', '')} {e.get('reason', '')} "
            f"(x{count}): {e.get('message', '')}")


def _since(pod: Obj) -> str:
    st = pod.get("status", {})
    return str(st.get("startTime") or pod.get("metadata", {}).get("creationTimestamp")
               or "unknown")


def _not_pending(reader: Reader, ctx: PendingContext) -> Finding:
    st = ctx.pod.get("status", {})
    phase = st.get("phase", "?")
    node = ctx.pod.get("spec", {}).get("nodeName") or "no node"
    evidence = [f"status.phase: {phase}", f"spec.nodeName: {node}",
                f"status.startTime: {_since(ctx.pod)}"]
    age = seconds_since(reader.now(), _since(ctx.pod))
    if age is not None:
        evidence.append(f"running for {age_text(age)}")
    return Finding(
        "POD_NOT_PENDING",
        f"The pod is not pending: {phase} on node {node} since {_since(ctx.pod)}.",
        (ObjectRef("Pod", ctx.pod_name, ctx.namespace), ObjectRef("Node", node)),
        tuple(evidence),
        Fix(commands=(kubectl("describe", "pod", ctx.pod_name, namespace=ctx.namespace),)),
    )
