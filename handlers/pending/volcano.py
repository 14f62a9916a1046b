"""QUEUE_QUOTA_EXHAUSTED for Volcano queues: a Queue closed, or its capability/deserved used.

Volcano's words (volcano-sh/volcano):
- the pod admission webhook refuses pods of a queue that is not Open
  (``pkg/webhooks/admission/pods/validate``): ``can only submit job to queue with state
  `Open`, queue `ml` status is `Closed`;``, seen as the controller's FailedCreate;
- the proportion / capacity plugins refuse to enqueue a PodGroup whose queue has no room
  (``pkg/scheduler/plugins/{proportion,capacity}``): event ``Unschedulable`` on the
  PodGroup, ``queue resource quota insufficient`` (capacity plugin: ``...: insufficient
  nvidia.com/gpu``).
"""

from __future__ import annotations

import re

from handlers.gpu import is_gpu_resource, name_of, ns_of
from handlers.kube.commands import kubectl
from handlers.kube.quantity import fmt_quantity, parse_quantity
from handlers.model import Finding, Fix, ObjectRef, Patch
from handlers.pending.context import PendingContext
from handlers.view import Obj

CODE = "QUEUE_QUOTA_EXHAUSTED"
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
GROUP_ANNOTATIONS = ("scheduling.k8s.io/group-name", "scheduling.volcano.sh/group-name")
CLOSED_RE = re.compile(r"can only submit job to queue with state `Open`, queue `(?P<queue>[^`]+)` "
                       r"status is `(?P<state>[^`]+)`")
QUOTA_WORDS = "queue resource quota insufficient"


def is_queue_refusal(message: str) -> bool:
    return QUOTA_WORDS in message



def _annotations(obj: Obj) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("annotations") or {}


def check(ctx: PendingContext) -> list[Finding]:
    closed = _closed_by_webhook(ctx)
    if closed:
        return [closed]
    ann = _annotations(ctx.pod)
    group = next((ann[a] for a in GROUP_ANNOTATIONS if ann.get(a)), None)
    pg = ctx.reader.get("PodGroup", group, ctx.namespace) if group else None
    queue_name = (ann.get(QUEUE_ANNOTATION)
                  or ((pg.get("spec") or {}).get("queue") if pg is not None else None))
    if not queue_name:
        return []
    queue = ctx.reader.get("Queue", str(queue_name))
    if queue is not None:
        state = str((queue.get("status") or {}).get("state") or "Open")
        if state != "Open":
            return [_closed_finding(ctx, str(queue_name), state, [
                f"Queue {queue_name}: status.state {state}"])]
    if pg is None or str((pg.get("status") or {}).get("phase")) not in ("Pending", ""):
        return []
    words = [str(e.get("message")) for e in ctx.reader.events("PodGroup", name_of(pg),
                                                              ctx.namespace)
             if is_queue_refusal(str(e.get("message", "")))]
    words += [str(c.get("message")) for c in (pg.get("status") or {}).get("conditions") or []
              if is_queue_refusal(str(c.get("message", "")))]
    if not words:
        return []
    return [_quota_finding(ctx, str(queue_name), queue, pg, words[-1])]


def _closed_by_webhook(ctx: PendingContext) -> Finding | None:
    for e in reversed(ctx.controller_events):
        m = CLOSED_RE.search(str(e.get("message", "")))
        if m and e.get("reason") == "FailedCreate":
            return _closed_finding(ctx, m["queue"], m["state"], [
                f"{e.get('reason')}: {e.get('message')}"])
    return None


def _closed_finding(ctx: PendingContext, queue: str, state: str,
                    evidence: list[str]) -> Finding:
    return Finding(
        CODE,
        f"Volcano queue {queue} is {state}: it takes no new work, so the workload waits "
        "(its pods are refused or never enqueued).",
        (ctx.target_ref, ObjectRef("Queue", queue)), tuple(evidence),
        Fix("Open the queue (Volcano's vcctl: queue operate --action open), or submit to an "
            "open queue (annotation scheduling.volcano.sh/queue-name).",
            (kubectl("get", "queues.scheduling.volcano.sh"),)),
    )


def _quota_finding(ctx: PendingContext, queue_name: str, queue: Obj | None, pg: Obj,
                   words: str) -> Finding:
    evidence = [f"PodGroup {name_of(pg)} (queue {queue_name}): {words}"]
    need = {str(r): parse_quantity(v) for r, v in
            ((pg.get("spec") or {}).get("minResources") or {}).items()}
    edit = kubectl("edit", "queues.scheduling.volcano.sh", queue_name)
    fix = Fix("Free the queue's GPUs or raise its capability.", (edit,))
    if queue is not None:
        spec, st = queue.get("spec") or {}, queue.get("status") or {}
        cap = {str(r): parse_quantity(v) for r, v in (spec.get("capability") or {}).items()}
        deserved = {str(r): parse_quantity(v) for r, v in (spec.get("deserved") or {}).items()}
        used = {str(r): parse_quantity(v) for r, v in (st.get("allocated") or {}).items()}
        holders = _holders(ctx, queue_name, name_of(pg))
        if not used:
            for _, res in holders:
                for r, v in res.items():
                    used[r] = used.get(r, 0.0) + v
        for r in sorted(set(cap) | set(deserved)):
            if not is_gpu_resource(r):
                continue
            parts = [f"allocated {fmt_quantity(used.get(r, 0.0))}"]
            if r in cap:
                parts.append(f"capability {fmt_quantity(cap[r])}")
            if r in deserved:
                parts.append(f"deserved {fmt_quantity(deserved[r])}")
            if r in need:
                parts.append(f"this PodGroup needs {fmt_quantity(need[r])}")
            evidence.append(f"Queue {queue_name} {r}: " + ", ".join(parts))
            limit = cap.get(r, deserved.get(r))
            if limit is not None and r in need:
                fix = Fix("Wait for the queue's running PodGroups to finish, or raise the "
                          f"queue's capability for {r} to "
                          f"{fmt_quantity(used.get(r, 0.0) + need[r])}.",
                          (edit,), Patch("Queue", queue_name, "spec.capability", {
                              r: fmt_quantity(used.get(r, 0.0) + need[r])}))
        for ref, res in holders[:5]:
            gpus = ", ".join(f"{fmt_quantity(v)} {r}" for r, v in res.items()
                             if is_gpu_resource(r))
            if gpus:
                evidence.append(f"running in the queue: PodGroup {ref} ({gpus})")
    return Finding(
        CODE,
        f"Volcano will not enqueue PodGroup {name_of(pg)}: queue {queue_name} has no room left "
        "(its capability or deserved share is used).",
        (ctx.target_ref, ObjectRef("PodGroup", name_of(pg), ctx.namespace),
         ObjectRef("Queue", queue_name)), tuple(evidence), fix)


def _holders(ctx: PendingContext, queue: str, me: str) -> list[tuple[str, dict[str, float]]]:
    """Running PodGroups of the queue with their minResources."""
    out = []
    for pg in ctx.reader.list("PodGroup"):
        if name_of(pg) == me or (pg.get("spec") or {}).get("queue", "default") != queue:
            continue
        if (pg.get("status") or {}).get("phase") not in ("Running", "Inqueue"):
            continue
        res = {str(r): parse_quantity(v)
               for r, v in ((pg.get("spec") or {}).get("minResources") or {}).items()}
        out.append((f"{ns_of(pg)}/{name_of(pg)}", res))
    return out
