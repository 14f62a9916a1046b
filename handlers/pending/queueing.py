"""Queueing checks: who decides when the pod runs, besides node capacity.

- SCHEDULER_NOT_FOUND: ``spec.schedulerName`` names a scheduler no running pod serves.
- GANG_INCOMPLETE: a Volcano PodGroup cannot place ``minMember`` pods.
- QUEUE_QUOTA_EXHAUSTED: a Volcano Queue is closed or full (``handlers.pending.volcano``).
- QUEUE_QUOTA_EXHAUSTED: a Kueue Workload is not admitted (``handlers.pending.kueue``).
- PREEMPTION_BLOCKED: the GPUs the pod needs are held by pods it may not preempt (higher
  priority), or its own ``preemptionPolicy: Never`` keeps it from evicting lower ones. Found
  only when priority decides, so its card makes it INSUFFICIENT_GPU's cause; the scheduler's
  own verdict in the event (1.24+) is workload evidence.
- AUTOSCALER_NO_SCALE_UP: cluster-autoscaler / Karpenter said they will not add a node.

``PENDING_NO_EVENTS`` is not decided here (why_pending emits it).
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from handlers.gpu import labels, name_of, ns_of
from handlers.kube.commands import kubectl
from handlers.kube.quantity import fmt_quantity
from handlers.kube.resources import pod_requests
from handlers.model import Finding, Fix, ObjectRef
from handlers.pending import kueue, volcano
from handlers.pending.checks import pending_check
from handlers.pending.context import PendingContext, main_gpu_request
from handlers.scheduler.filters import NodeFit, simulate
from handlers.scheduler.messages import parse_scheduling_message
from handlers.scheduler.nodeinfo import NodeInfo, node_info
from handlers.view import Obj
from handlers.words import counted

DEFAULT_SCHEDULER = "default-scheduler"
# Schedulers whose pods are not named after spec.schedulerName (docs/design.md).
SCHEDULER_POD_PREFIX = {"volcano": "volcano-scheduler", "yunikorn": "yunikorn-scheduler",
                        "kai-scheduler": "kai-scheduler", "koord-scheduler": "koord-scheduler",
                        "stork": "stork-scheduler"}
VOLCANO_GROUP_ANNOTATIONS = ("scheduling.k8s.io/group-name", "scheduling.volcano.sh/group-name")
PREEMPT_NEVER = "Never"
KARPENTER_RE = re.compile(r"incompatible with nodepool|exceed limits for nodepool|"
                          r"no instance type (?:satisfied|has enough|met)|"
                          r"did not tolerate|all available instance types", re.IGNORECASE)
NODEPOOL_LIMIT_RE = re.compile(r'exceed limits for nodepool "?(?P<pool>[\w.-]+)"?', re.IGNORECASE)



def _event_time(e: Obj) -> str:
    series = e.get("series") or {}
    return str(series.get("lastObservedTime") or e.get("lastTimestamp") or e.get("eventTime")
               or e.get("firstTimestamp") or "")


def _source(e: Obj) -> str:
    return str(e.get("reportingComponent") or (e.get("source") or {}).get("component") or "")


def _ready(pod: Obj) -> bool:
    st = pod.get("status") or {}
    if st.get("phase") != "Running":
        return False
    statuses = st.get("containerStatuses") or []
    return all(c.get("ready") for c in statuses)


# ------------------------------------------------------------------------ scheduler
def check_scheduler(ctx: PendingContext) -> list[Finding]:
    sched = (ctx.pod.get("spec") or {}).get("schedulerName") or DEFAULT_SCHEDULER
    if sched == DEFAULT_SCHEDULER or not ctx.reader.readable("Pod"):
        return []
    prefix = SCHEDULER_POD_PREFIX.get(sched, sched)
    candidates = []
    for p in ctx.reader.list("Pod"):
        lab = labels(p)
        named = name_of(p).startswith(prefix + "-") or name_of(p) == prefix
        labelled = sched in (lab.get("app"), lab.get("component"),
                             lab.get("app.kubernetes.io/name")) or prefix in (
            lab.get("app"), lab.get("component"), lab.get("app.kubernetes.io/name"))
        if named or labelled:
            candidates.append(p)
    if any(_ready(p) for p in candidates):
        return []
    if any(_source(e) in (sched, prefix) for e in ctx.events):
        return []  # the scheduler spoke about this pod: it runs somewhere we cannot see
    evidence = [f"spec.schedulerName: {sched}"]
    if candidates:
        for p in candidates[:3]:
            evidence.append(f"{ns_of(p)}/{name_of(p)}: {_pod_state(p)}")
    else:
        evidence.append(f"no pod named {prefix}-* or labelled app={sched} in any namespace")
    evidence.append(f"events on the pod: {len(ctx.events)}, none from {sched}")
    look = (kubectl("get", "pods,deploy", namespace=ns_of(candidates[0])) if candidates
            else kubectl("get", "pods", "-A")) + f" | grep {shlex.quote(prefix)}"
    return [Finding(
        "SCHEDULER_NOT_FOUND",
        f"The pod waits for scheduler {sched!r}, which is not running; no scheduler will ever "
        "look at it or write an event.",
        (ctx.target_ref,), tuple(evidence),
        Fix("Start the scheduler, or use the default one: remove spec.schedulerName (or set it "
            "to default-scheduler).", (look,)),
    )]


def _pod_state(p: Obj) -> str:
    st = p.get("status") or {}
    phase = str(st.get("phase", "?"))
    for cs in st.get("containerStatuses") or []:
        state = cs.get("state") or {}
        for key in ("waiting", "terminated"):
            if key in state:
                return f"{phase} ({state[key].get('reason', key)})"
        if not cs.get("ready"):
            return f"{phase} (not ready)"
    return phase


# ------------------------------------------------------------------------ gang
def check_gang(ctx: PendingContext) -> list[Finding]:
    return _volcano(ctx) + volcano.check(ctx) + kueue.check(ctx)


def _volcano(ctx: PendingContext) -> list[Finding]:
    ann = (ctx.pod.get("metadata") or {}).get("annotations") or {}
    group = next((ann[a] for a in VOLCANO_GROUP_ANNOTATIONS if ann.get(a)), None)
    if not group:
        return []
    pg = ctx.reader.get("PodGroup", group, ctx.namespace)
    if pg is None:
        return []
    spec, st = pg.get("spec") or {}, pg.get("status") or {}
    min_member = int(spec.get("minMember") or 1)
    phase = str(st.get("phase") or "Pending")
    if phase in ("Running", "Completed"):
        return []
    unsched = [c for c in st.get("conditions") or []
               if c.get("type") == "Unschedulable" and c.get("status") == "True"]
    pg_events = [e for e in ctx.reader.events("PodGroup", group, ctx.namespace)
                 if e.get("reason") == "Unschedulable"]
    if any(volcano.is_queue_refusal(str(x.get("message", ""))) for x in unsched + pg_events):
        return []  # the queue holds it back, not the gang: volcano.check says why
    members = [p for p in ctx.reader.list("Pod", ctx.namespace)
               if any(((p.get("metadata") or {}).get("annotations") or {}).get(a) == group
                      for a in VOLCANO_GROUP_ANNOTATIONS)]
    running = [p for p in members if (p.get("spec") or {}).get("nodeName")]
    waiting = [p for p in members if not (p.get("spec") or {}).get("nodeName")]
    room, room_lines = _room(ctx, waiting[0] if waiting else ctx.pod)
    placeable = len(running) + min(room, len(waiting))
    short = placeable < min_member
    if not short and not unsched:
        return []  # Volcano has not refused the gang and the members fit: nothing to say
    evidence = [f"PodGroup {group}: minMember {min_member}, phase {phase}",
                f"members: {len(running)} placed, {len(waiting)} waiting"]
    evidence += [f"condition Unschedulable: {c.get('message', '')}" for c in unsched[:1]]
    if pg_events and not unsched:
        evidence.append(f"event {pg_events[-1].get('reason')}: {pg_events[-1].get('message')}")
    evidence += room_lines
    evidence.append(f"placeable now: {placeable} of minMember {min_member}")
    return [Finding(
        "GANG_INCOMPLETE",
        f"Gang {group} needs {min_member} members placed at once; only {placeable} fit now, so "
        "none starts.",
        (ctx.target_ref, ObjectRef("PodGroup", group, ctx.namespace)), tuple(evidence),
        Fix(f"Free capacity for all {min_member} members, or lower minAvailable of the Volcano "
            "job.", (kubectl("get", "podgroup", group, "-o", "yaml", namespace=ctx.namespace),
                     *_edit_owner(pg, ctx.namespace))),
    )]


def _room(ctx: PendingContext, member: Obj) -> tuple[int, list[str]]:
    """How many more pods like ``member`` fit on the nodes now (greedy, per node)."""
    need = {r: v for r, v in pod_requests(member).items() if v > 0}
    if not need or not ctx.nodes:
        return 0, []
    gres, gneed = main_gpu_request(member)
    fits = simulate(member, ctx.nodes, ctx.pods_by_node, gpu_resource=gres)
    total = 0
    lines = []
    for f in fits:
        if not f.feasible:
            continue
        n = min((math.floor(f.free.get(r, 0.0) / v + 1e-9) for r, v in need.items()), default=0)
        n = max(0, n)
        total += n
        if gres:
            lines.append(f"node {f.node}: {fmt_quantity(f.free.get(gres, 0.0))} {gres} free "
                         f"-> room for {n}")
    if gres and lines:
        lines.insert(0, f"each member asks {fmt_quantity(gneed)} {gres}")
    return total, lines[:8]


# ------------------------------------------------------------------------ preemption
def priority_of(ctx: PendingContext, pod: Mapping[str, Any]) -> tuple[int, str, str]:
    """(priority, class name, preemptionPolicy) as admission resolves them."""
    spec = pod.get("spec") or {}
    cls = str(spec.get("priorityClassName") or "")
    prio = spec.get("priority")
    policy = spec.get("preemptionPolicy")
    pc = ctx.reader.get("PriorityClass", cls) if cls else None
    if pc is not None:
        if prio is None:
            prio = pc.get("value")
        policy = policy or pc.get("preemptionPolicy")
    return int(prio or 0), cls, str(policy or "PreemptLowerPriority")


def check_preemption(ctx: PendingContext) -> list[Finding]:
    gres, need = main_gpu_request(ctx.pod)
    if not gres or not ctx.nodes or (ctx.pod.get("spec") or {}).get("nodeName"):
        return []
    prio, cls, policy = priority_of(ctx, ctx.pod)
    fits = ctx.node_fits
    if any(f.fits for f in fits):
        return []
    blocked = [f for f in fits if f.allocatable.get(gres, 0.0) >= need
               and f.free.get(gres, 0.0) < need and f.feasible]
    if not blocked:
        return []
    # Per node: free + what lower-priority pods hold, and what higher-priority ones hold.
    room: dict[str, tuple[float, float]] = {}
    for f in blocked:
        info = node_info(ctx.nodes_by_name[f.node], ctx.pods_by_node.get(f.node, []))
        below, above = _held_around(ctx, info, gres, prio)
        room[f.node] = (f.free.get(gres, 0.0) + below, above)
    lower_frees = [f for f in blocked if room[f.node][0] >= need]
    higher_blocks = [f for f in blocked if room[f.node][0] < need <= sum(room[f.node])]
    if not (policy == PREEMPT_NEVER and lower_frees) and (lower_frees or not higher_blocks):
        return []
    prio_of: dict[str, tuple[int, str, str]] = {}  # of the holders where the finding looks
    for f in lower_frees or higher_blocks:
        held = {h for h, _ in f.holders}
        info = node_info(ctx.nodes_by_name[f.node], ctx.pods_by_node.get(f.node, []))
        for facts in info.extended:
            if facts.ref in held:
                prio_of[facts.ref] = priority_of(ctx, facts.pod)

    def lower(x: int) -> bool:
        return x < prio

    def higher(x: int) -> bool:
        return x > prio

    who = f"priority {prio}" + (f" (PriorityClass {cls})" if cls else " (no priorityClassName)")
    last = next((e for e in reversed(ctx.events) if e.get("reason") == "FailedScheduling"), None)
    sched_line: list[str] = []
    # The scheduler's own preemption verdict (1.24+ prints it after "preemption:").
    said_never = said_no_victims = False
    if last is not None:
        msg = parse_scheduling_message(str(last.get("message", "")))
        if msg.preemption_summary or msg.preemption:
            sched_line = [f"scheduler: {last.get('message')}"]
            said_never = "preemptionPolicy=Never" in (msg.preemption_summary or "")
            said_no_victims = any(r.category == "no_preemption_victims" for r in msg.preemption)
    if policy == PREEMPT_NEVER and lower_frees:
        evidence = [f"pod {who}, preemptionPolicy: Never", *sched_line]
        evidence += _holder_lines(lower_frees, prio_of, gres, lower)
        return [Finding(
            "PREEMPTION_BLOCKED",
            f"The pod could take GPUs from lower-priority pods on "
            f"{counted(len(lower_frees), 'node')}, but its preemptionPolicy is Never, so it "
            "waits for them to finish.",
            (ctx.target_ref,) + ((ObjectRef("PriorityClass", cls),) if cls else ()),
            tuple(evidence),
            _preempting(ctx, cls, prio),
            conditions=_confirmed(said_never),
        )]
    evidence = [f"pod {who}, preemptionPolicy: {policy}", *sched_line]
    evidence += _holder_lines(higher_blocks, prio_of, gres, higher)
    top = max((prio_of[h][0] for f in higher_blocks for h, g in f.holders
               if g > 0 and h in prio_of and prio_of[h][0] > prio), default=prio)
    return [Finding(
        "PREEMPTION_BLOCKED",
        f"The GPUs the pod needs are held by higher-priority pods (up to {top}); at {who} it "
        "cannot preempt them and waits until they finish.",
        (ctx.target_ref,), tuple(evidence),
        Fix("Wait for the holders, or run the pod at a PriorityClass whose value is above "
            f"{top} (only if it should evict them): spec.priorityClassName.",
            (kubectl("get", "priorityclasses"),)),
        conditions=_confirmed(said_no_victims),
    )]


def _confirmed(scheduler_says_so: bool) -> frozenset[str]:
    """The pod's own FailedScheduling event names the same preemption verdict: what keeps
    this workload from running, in the scheduler's words."""
    return frozenset({"workload-evidence"}) if scheduler_says_so else frozenset()


def _held_around(ctx: PendingContext, info: NodeInfo, gres: str,
                 prio: int) -> tuple[float, float]:
    """The ``gres`` that pods of lower and of higher priority than ``prio`` hold on the
    node. Kept with the NodeInfo (so only nodes whose pods changed are summed again) when
    every holder has its priority in its spec, as admission sets it."""
    key = ("held around", gres, prio)
    kept: tuple[float, float] | None = info.verdicts.get(key)
    if kept is not None:
        return kept
    lower = higher = 0.0
    settled = True
    for facts in info.extended:
        gpus = facts.requests.get(gres)
        if not gpus:
            continue
        their = (facts.pod.get("spec") or {}).get("priority")
        if type(their) is not int:  # resolved from its PriorityClass, which may change
            settled = False
            their = priority_of(ctx, facts.pod)[0]
        if their < prio:
            lower += gpus
        elif their > prio:
            higher += gpus
    if settled:
        info.remember(key, (lower, higher))
    return lower, higher


def _holder_lines(fits: Iterable[NodeFit], prio_of: dict[str, tuple[int, str, str]], gres: str,
                  cond: Callable[[int], bool], limit: int = 6) -> list[str]:
    lines = []
    for f in fits:
        for p, g in sorted(f.holders, key=lambda h: -h[1]):
            if p in prio_of and cond(prio_of[p][0]):
                pr, cls, _ = prio_of[p]
                lines.append(f"node {f.node}: {p} holds {fmt_quantity(g)} {gres}, priority {pr}"
                             + (f" ({cls})" if cls else ""))
    return lines[:limit]


# ------------------------------------------------------------------------ autoscaler
def check_autoscaler(ctx: PendingContext) -> list[Finding]:
    events = sorted(ctx.events, key=_event_time)
    ca = [e for e in events if e.get("reason") in ("NotTriggerScaleUp", "TriggeredScaleUp")
          or (_source(e) == "cluster-autoscaler" and e.get("reason") == "FailedScaleUp")]
    karp = [e for e in events if "karpenter" in _source(e).lower()
            and KARPENTER_RE.search(str(e.get("message", "")))]
    out = []
    if ca and ca[-1].get("reason") != "TriggeredScaleUp":
        e = ca[-1]
        msg = str(e.get("message", ""))
        out.append(Finding(
            "AUTOSCALER_NO_SCALE_UP",
            "cluster-autoscaler will not add a node for this pod: " + msg.split(":", 1)[-1].strip(),
            (ctx.target_ref,), (f"{e.get('reason')} ({_source(e) or 'cluster-autoscaler'}, "
                           f"{_event_time(e)}): {msg}",),
            Fix("Raise the GPU node group's max size (its cloud's node group, ASG or MIG "
                "settings), or fix the pod's selectors/tolerations so that a group matches; the "
                "autoscaler's status says which groups it considered.",
                (kubectl("get", "configmap", "cluster-autoscaler-status", "-o", "yaml",
                         namespace="kube-system"),)),
        ))
    if karp:
        e = karp[-1]
        msg = str(e.get("message", ""))
        pool = NODEPOOL_LIMIT_RE.search(msg)
        fix = (Fix("Raise the NodePool's spec.limits (nvidia.com/gpu, and the cpu and memory "
                   "its GPU instances bring).",
                   (kubectl("get", "nodepool", pool["pool"], "-o", "jsonpath={.spec.limits}"),
                    kubectl("edit", "nodepool", pool["pool"]))) if pool else
               Fix("Add a NodePool whose requirements and taints admit this pod and offer GPU "
                   "instance types.", (kubectl("get", "nodepools", "-o", "yaml"),)))
        out.append(Finding(
            "AUTOSCALER_NO_SCALE_UP", "Karpenter will not launch a node for this pod"
            + (f": NodePool {pool['pool']} is at its limits." if pool else "."),
            (ctx.target_ref,) + ((ObjectRef("NodePool", pool["pool"]),) if pool else ()),
            (f"{e.get('reason')} ({_source(e)}, {_event_time(e)}): {msg}",), fix,
        ))
    return out


def _edit_owner(obj: Obj, namespace: str) -> tuple[str, ...]:
    """``kubectl edit`` of the object's controller (a Volcano Job behind its PodGroup)."""
    ref = next((r for r in (obj.get("metadata") or {}).get("ownerReferences") or []
                if r.get("controller", True) and r.get("name")), None)
    if ref is None:
        return ()
    group = str(ref.get("apiVersion", "")).split("/")[0]
    kind = str(ref.get("kind", "")).lower() + "s" + (f".{group}" if "." in group else "")
    return (kubectl("edit", kind, str(ref["name"]), namespace=namespace),)


def _preempting(ctx: PendingContext, cls: str | None, prio: int) -> Fix:
    """A PriorityClass of the same value that may preempt, and the pod on it."""
    name = f"{cls or 'gpu-high'}-preempting"
    return Fix("Give the pod a PriorityClass of the same value that may preempt (the patch "
               "names it).",
               (kubectl("create", "priorityclass", name, f"--value={prio}",
                        "--preemption-policy=PreemptLowerPriority"),),
               ctx.pod_patch({"priorityClassName": name}))


CHECKS = (check_scheduler, check_gang, check_preemption, check_autoscaler)


@pending_check("queueing", label="scheduler and gang: schedulerName, PodGroup/Workload, "
               "priority and preemption")
def check(ctx: PendingContext, before: Sequence[Finding] = ()) -> list[Finding]:
    out: list[Finding] = []
    for c in CHECKS:
        out.extend(c(ctx))
    return out
