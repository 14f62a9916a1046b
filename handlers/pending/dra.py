"""RESOURCE_CLAIM_UNSATISFIED: the pod's GPUs come through DRA claims that cannot be met.

For each claim the pod names (directly or through a ResourceClaimTemplate), in the order
a user would check them:

1. the claim (or template) exists; a claim already allocated is pinned to nodes: can the
   pod use one of them (its selectors, affinity and taints)?
2. each request's DeviceClass exists, and some driver publishes ResourceSlices for it: when
   none does, the driver's kubelet plugin is not running on the GPU nodes, and why;
3. enough published devices match the class's and the request's CEL selectors
   (``handlers.cel``; a selector it cannot evaluate makes the count "not checked");
4. enough of those are free: the rest are allocated to other claims (and their pods).

The scheduler's own DRA words on the pod (``cannot allocate all claims``, ``resource claim
... is in the process of being allocated``, ``no new claims to deallocate``) are shown as
evidence.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field

from handlers import cel, dra
from handlers.dra import Device, PodClaim, Request
from handlers.gpu import labels, name_of, ns_of
from handlers.kube.affinity import node_matches_pod
from handlers.kube.commands import kubectl
from handlers.kube.quantity import fmt_quantity
from handlers.model import Finding, Fix, ObjectRef
from handlers.pending.checks import pending_check
from handlers.pending.context import PendingContext
from handlers.scheduler.messages import parse_scheduling_message
from handlers.view import Obj
from handlers.words import counted

CODE = "RESOURCE_CLAIM_UNSATISFIED"
PLUGIN_WORDS = ("kubelet-plugin", "kubeletplugin")
DRA_DOCS = "https://kubernetes.io/docs/concepts/scheduling-eviction/dynamic-resource-allocation/"
DRA_DRIVER = "https://github.com/NVIDIA/k8s-dra-driver-gpu"
IN_FLIGHT = "is in the process of being allocated"


@dataclass
class _Verdict:
    reason: str  # what stops the claim, one sentence
    fix: Fix
    evidence: list[str] = field(default_factory=list)
    objects: list[ObjectRef] = field(default_factory=list)


@pending_check("dra", label="DRA: ResourceClaims, DeviceClasses, ResourceSlices and "
               "allocated devices",
               applies=lambda ctx: dra.uses_claims(ctx.pod))
def check(ctx: PendingContext, before: Sequence[Finding] = ()) -> list[Finding]:
    if not dra.uses_claims(ctx.pod):
        return []
    sched_lines = _scheduler_words(ctx)
    out = []
    for pc in dra.pod_claims(ctx.pod):
        v = _claim_verdict(ctx, pc)
        if v is None:
            continue
        ev = v.evidence + [x for x in sched_lines if x not in v.evidence]
        out.append(Finding(
            CODE, v.reason, tuple([ctx.target_ref, *v.objects]), tuple(ev), v.fix))
    if not out and any(IN_FLIGHT in line for line in sched_lines):
        # The scheduler is allocating the claim for another pod right now: transient.
        out.append(Finding(
            CODE,
            "The scheduler was allocating one of the pod's claims when it last tried; the "
            "devices it needs are there and the next attempt should place the pod.",
            (ctx.target_ref,), tuple(sched_lines),
            Fix("Wait a few seconds; if it stays Pending, look at its claims.",
                (kubectl("get", "resourceclaims", "-o", "wide", namespace=ctx.namespace),)),
            conditions=frozenset({"in-flight"})))
    return out



def _scheduler_words(ctx: PendingContext) -> list[str]:
    """The DRA reasons of the pod's latest FailedScheduling event."""
    last = next((e for e in reversed(ctx.events) if e.get("reason") == "FailedScheduling"), None)
    if last is None:
        return []
    msg = parse_scheduling_message(str(last.get("message", "")))
    texts = [r.text if r.count is None else f"{r.count} {r.text}"
             for r in (*msg.reasons, *msg.preemption) if r.category == "dra"]
    raw = str(last.get("message", ""))
    if not texts and "claim" not in raw:
        return []
    return [f"scheduler: {raw}"]


def _claim_obj(ctx: PendingContext, pc: PodClaim) -> tuple[Obj | None, dict[str, object] | None,
                                                            str]:
    """(the claim, the claim spec to judge, what it is called in messages)."""
    ns = ctx.namespace
    if pc.claim:
        claim = ctx.reader.get("ResourceClaim", pc.claim, ns)
        if claim is not None:
            return claim, claim.get("spec") or {}, f"ResourceClaim {pc.claim}"
    if ctx.pod_exists and pc.template:
        # A claim made from a template before the pod status named it: owned by the pod.
        for c in ctx.reader.list("ResourceClaim", ns):
            ann = (c.get("metadata") or {}).get("annotations") or {}
            owners = (c.get("metadata") or {}).get("ownerReferences") or []
            if ann.get(dra.POD_CLAIM_ANNOTATION) == pc.name and any(
                    o.get("kind") == "Pod" and o.get("name") == ctx.pod_name for o in owners):
                return c, c.get("spec") or {}, f"ResourceClaim {name_of(c)}"
    if pc.template:
        tmpl = ctx.reader.get("ResourceClaimTemplate", pc.template, ns)
        if tmpl is not None:
            spec = ((tmpl.get("spec") or {}).get("spec")) or {}
            return None, spec, f"ResourceClaimTemplate {pc.template}"
    return None, None, (f"ResourceClaim {pc.claim}" if pc.claim
                        else f"ResourceClaimTemplate {pc.template}")


def _claim_verdict(ctx: PendingContext, pc: PodClaim) -> _Verdict | None:
    reader = ctx.reader
    ns = ctx.namespace
    claim, spec, called = _claim_obj(ctx, pc)
    if spec is None:
        kind = "ResourceClaim" if pc.claim else "ResourceClaimTemplate"
        if not reader.readable(kind):
            return None  # not checked: the reader lists why
        name = pc.claim or pc.template or pc.name
        return _Verdict(
            f"The pod's claim {pc.name!r} names {called}, which does not exist in {ns}; the "
            "scheduler waits for it.",
            Fix(f"Create {kind} {name} in namespace {ns}, or fix spec.resourceClaims[{pc.name}] "
                "in the pod.", (kubectl("get", f"{kind.lower()}s", namespace=ns),),
                docs=(DRA_DOCS,)),
            [f"spec.resourceClaims: {pc.name} -> {called}: not found"],
            [ObjectRef(kind, name, ns)])
    requests = dra.claim_requests(spec)
    objs = [ObjectRef("ResourceClaim", name_of(claim), ns)] if claim is not None else [
        ObjectRef("ResourceClaimTemplate", str(pc.template), ns)]
    if claim is not None and dra.allocation_results(claim):
        return _allocated_elsewhere(ctx, claim, called, objs)
    for req in requests:
        v = _request_verdict(ctx, req, called, claim)
        if v is not None:
            v.objects = objs + v.objects
            return v
    return None


def _allocated_elsewhere(ctx: PendingContext, claim: Obj, called: str,
                         objs: list[ObjectRef]) -> _Verdict | None:
    """An allocated claim pins the pod to its node(s): can the pod go there?"""
    pinned = dra.allocation_nodes(claim)
    if not pinned or not ctx.nodes:
        return None
    fits = {f.node: f for f in ctx.node_fits}
    usable = [n for n in pinned if n in fits and fits[n].feasible]
    if usable:
        return None
    lines = [f"{called} is allocated on {'node' if len(pinned) == 1 else 'nodes'} "
             f"{', '.join(pinned)} "
             f"(status.allocation.nodeSelector)"]
    for n in pinned:
        f = fits.get(n)
        if f is None:
            lines.append(f"node {n}: not in the cluster any more")
        else:
            lines += [f"node {n}: {r.filter}: {r.reason}" for r in f.rejections[:2]]
    users = [u for u in dra.reserved_for(claim) if u != ctx.pod_name]
    if users:
        lines.append(f"reserved for {'pod' if len(users) == 1 else 'pods'}: {', '.join(users)}")
        fix = Fix(f"The claim is shared with {', '.join(users)} on {', '.join(pinned)}: let "
                  "this pod run there (fix its nodeSelector/affinity/tolerations), or give it "
                  "a claim of its own (spec.resourceClaims[].resourceClaimTemplateName).")
    else:
        fix = Fix("Let the pod run where its claim is (fix its nodeSelector/affinity/"
                  "tolerations), or free the claim: delete it and create it again (it is "
                  "allocated afresh).",
                  (kubectl("get", "resourceclaim", name_of(claim), "-o", "yaml",
                           namespace=ns_of(claim)),
                   kubectl("delete", "resourceclaim", name_of(claim), namespace=ns_of(claim),
                           note="or: free it, then create it again from the YAML")))
    return _Verdict(
        f"{called} is already allocated on {', '.join(pinned)}, a node this pod cannot use, "
        "so the pod cannot be scheduled anywhere.", fix, lines,
        objs + [ObjectRef("Node", n) for n in pinned])


def _request_verdict(ctx: PendingContext, req: Request, called: str,
                     claim: Obj | None) -> _Verdict | None:
    alts = req.alternatives or (req,)
    verdicts = [_one_request(ctx, r, called, claim) for r in alts]
    if any(v is None for v in verdicts):
        return None  # some alternative can be met
    return verdicts[0]


def _one_request(ctx: PendingContext, req: Request, called: str,
                 claim: Obj | None) -> _Verdict | None:
    reader = ctx.reader
    dc = reader.get("DeviceClass", req.device_class) if req.device_class else None
    if dc is None:
        if not reader.readable("DeviceClass"):
            return None
        return _Verdict(
            f"{called} asks for DeviceClass {req.device_class!r}, which does not exist.",
            Fix("Use an existing class, or install the DRA driver that provides it (NVIDIA's "
                f"driver creates {dra.NVIDIA_GPU_DRIVER}).", (kubectl("get", "deviceclasses"),),
                docs=(DRA_DRIVER,)),
            [f"request {req.name}: deviceClassName {req.device_class}: not found"],
            [ObjectRef("DeviceClass", req.device_class)])
    driver = dra.class_driver(dc, req.device_class)
    if not reader.readable("ResourceSlice"):
        return None
    published = dra.devices(reader, driver) if driver else dra.devices(reader)
    class_ev = [f"DeviceClass {req.device_class}: driver {driver or '(not named in its CEL)'}"]
    if driver and not published:
        return _no_slices(ctx, req, called, driver, class_ev)
    usable_nodes = {f.node for f in ctx.node_fits if f.feasible} if ctx.nodes else None
    selectors = (*dra.class_selectors(dc), *req.selectors)
    matching: list[Device] = []
    unknown = ""
    for d in published:
        if d.node and usable_nodes is not None and d.node not in usable_nodes:
            continue
        ok, why = cel.matches(selectors, d)
        if ok is None:
            unknown = unknown or why
        elif ok:
            matching.append(d)
    if unknown:
        line = f"DRA devices for {called} request {req.name}: selector not evaluated: {unknown}"
        if line not in ctx.reader.unchecked:
            ctx.reader.unchecked.append(line)
        return None
    need = req.count if req.mode != "All" else max(1, len(matching))
    per_node: dict[str, list[Device]] = {}
    for d in matching:
        per_node.setdefault(d.node or "(any node)", []).append(d)
    sel_text = "; ".join(req.selectors) or "(none)"
    count = f"{req.count} " if req.mode != "All" else ""
    ev = [*class_ev,
          f"request {req.name}: {req.mode} {count}from class {req.device_class}, "
          f"selectors: {sel_text}",
          f"published devices of driver {driver}: {len(published)} on "
          f"{counted(len({d.node for d in published}), 'node')}; matching on nodes the pod "
          f"can use: "
          f"{len(matching)}"]
    if not any(len(v) >= need for v in per_node.values()):
        if per_node:
            top = max(per_node.items(), key=lambda kv: len(kv[1]))
            ev.append(f"most matching devices on one node: {len(top[1])} on {top[0]}")
        return _Verdict(
            f"No node has {counted(need, 'device')} matching {called} request {req.name!r} "
            f"(class {req.device_class}"
            + (f", selectors {sel_text}" if req.selectors else "") + f"): {len(matching)} "
            "match in all.",
            Fix("Loosen the request's selectors or count to what the nodes publish, or add "
                "nodes with such devices.",
                (kubectl("get", "resourceslices", "-o", "yaml")
                 + f" | grep -A12 {shlex.quote(f'driver: {driver}')}",)),
            ev + _samples(published))
    taken = dra.allocated_devices(reader.list("ResourceClaim"))
    mine = {k for k, c in taken.items() if claim is not None and c is claim}
    free_per_node = {n: [d for d in ds if d.key not in taken or d.key in mine]
                     for n, ds in per_node.items()}
    if any(len(v) >= need for v in free_per_node.values()):
        return None
    holders: dict[str, list[str]] = {}
    for ds in per_node.values():
        for d in ds:
            c = taken.get(d.key)
            if c is not None:
                holders.setdefault(dra.claim_ref(c), []).append(f"{d.node}/{d.name}")
    claims_by_ref = {dra.claim_ref(c): c for c in taken.values()}
    lines = []
    for ref, devs in sorted(holders.items(), key=lambda kv: -len(kv[1]))[:6]:
        pods = dra.reserved_for(claims_by_ref[ref])
        lines.append(f"claim {ref} holds {', '.join(devs[:4])}"
                     + (f" (pod {', '.join(pods)})" if pods else " (no pod: it can be deleted)"))
    idle = [r for r, c in claims_by_ref.items() if r in holders and not dra.reserved_for(c)]
    fix = Fix("Wait for the pods holding the devices to finish"
              + (", or delete the allocated claims no pod uses" if idle else "")
              + "; or add GPU nodes.",
              tuple(kubectl("delete", "resourceclaim", r.split("/", 1)[1],
                            namespace=r.split("/", 1)[0]) for r in idle[:3]))
    return _Verdict(
        f"Every device matching {called} request {req.name!r} is allocated to other claims "
        f"({len(matching)} matching, none free on a node with {need}).",
        fix, ev + lines, [ObjectRef("ResourceClaim", r.split("/", 1)[1], r.split("/", 1)[0])
                          for r in list(holders)[:3]])


def _samples(published: list[Device]) -> list[str]:
    out = []
    for d in published[:3]:
        attrs = ", ".join(f"{k}={v}" for k, v in sorted(d.attributes.items())
                          if k in ("productName", "type", "architecture")
                          or k.endswith("/productName"))
        caps = ", ".join(f"{k}={fmt_quantity(v, 'memory' if 'memory' in k else '')}"
                         for k, v in sorted(d.capacity.items()))
        out.append(f"device {d.node}/{d.name}: {attrs}" + (f"; capacity {caps}" if caps else ""))
    return out


def _plugin_pods(ctx: PendingContext) -> list[Obj]:
    out = []
    for p in ctx.reader.list("Pod"):
        lab = labels(p)
        comp = next((lab[k] for k in dra.CHART_COMPONENT_LABELS if k in lab), "")
        if comp == "kubelet-plugin" or (
                "dra" in name_of(p) and any(w in name_of(p) for w in PLUGIN_WORDS)):
            out.append(p)
    return out


def _plugin_daemonsets(ctx: PendingContext) -> list[Obj]:
    return [ds for ds in ctx.reader.list("DaemonSet")
            if "dra" in name_of(ds) and any(w in name_of(ds) for w in PLUGIN_WORDS)]


def _pod_problem(p: Obj) -> str | None:
    st = p.get("status") or {}
    for cs in (st.get("initContainerStatuses") or []) + (st.get("containerStatuses") or []):
        w = (cs.get("state") or {}).get("waiting") or {}
        if w.get("reason"):
            return f"{cs.get('name')}: {w.get('reason')}" + (
                f" ({w.get('message')})" if w.get("message") else "")
    if st.get("phase") != "Running":
        return f"phase {st.get('phase', '?')}"
    return None


def _no_slices(ctx: PendingContext, req: Request, called: str, driver: str,
               class_ev: list[str]) -> _Verdict:
    """No ResourceSlice for the driver: its kubelet plugin does not run on the GPU nodes."""
    ev = [*class_ev, f"ResourceSlices with spec.driver {driver}: none"]
    gpu_nodes = sorted(ctx.gpu_like)
    pods = _plugin_pods(ctx)
    on_node = {str((p.get("spec") or {}).get("nodeName")): p for p in pods
               if (p.get("spec") or {}).get("nodeName")}
    why = ""
    fix = Fix()
    if pods:
        broken = [(p, _pod_problem(p)) for p in pods]
        bad = [(p, w) for p, w in broken if w]
        for p, w in bad[:3]:
            ev.append(f"kubelet plugin {ns_of(p)}/{name_of(p)} on "
                      f"{(p.get('spec') or {}).get('nodeName') or '(unscheduled)'}: {w}")
        if bad:
            why = "its kubelet plugin pods are failing"
            p = bad[0][0]
            fix = Fix("Fix what its log reports (driver root, CDI, the GPU driver on the "
                      "node); then the plugin publishes ResourceSlices.",
                      (kubectl("logs", name_of(p), "--all-containers", namespace=ns_of(p)),))
    missing = [n for n in gpu_nodes if n not in on_node]
    dsets = _plugin_daemonsets(ctx)
    for ds in dsets[:2]:
        st = ds.get("status") or {}
        ev.append(f"DaemonSet {ns_of(ds)}/{name_of(ds)}: desired "
                  f"{st.get('desiredNumberScheduled', '?')}, ready {st.get('numberReady', '?')}")
    if not why and gpu_nodes and missing:
        ev.append(f"GPU nodes without a kubelet plugin pod: {', '.join(missing[:5])}")
        if dsets:
            why = "its kubelet plugin DaemonSet places no pod on the GPU nodes"
            node = ctx.nodes_by_name.get(missing[0]) or {}
            tmpl_spec = ((dsets[0].get("spec") or {}).get("template") or {}).get("spec") or {}
            ok, reason = node_matches_pod({"spec": tmpl_spec}, node)
            wanted = _affinity_text(tmpl_spec)
            if not ok:
                ev.append(f"the DaemonSet's pods do not match node {missing[0]}: {reason}"
                          + (f" (they need {wanted})" if wanted else ""))
            fix = Fix(f"Make the DaemonSet {name_of(dsets[0])} match the GPU nodes: set the "
                      "chart's kubeletPlugin.affinity to labels the nodes carry"
                      + (", or label the nodes." if not ok else
                         "; its tolerations and events say more."),
                      (kubectl("get", "node", missing[0], "--show-labels"),
                       kubectl("label", "node", missing[0], "nvidia.com/gpu.present=true"))
                      if not ok else
                      (kubectl("describe", "daemonset", name_of(dsets[0]),
                               namespace=ns_of(dsets[0])),))
        else:
            why = "the DRA driver's kubelet plugin is not installed"
            fix = Fix("Install the NVIDIA DRA driver with its GPU resources enabled "
                      "(resources.gpus.enabled).", docs=(DRA_DRIVER,))
    if not why:
        why = "no kubelet plugin of that driver publishes devices"
        fix = Fix("Check the driver's kubelet plugin on the GPU nodes.", (
            kubectl("get", "pods", "-A") + " | grep kubelet-plugin",
            kubectl("get", "resourceslices")))
    return _Verdict(
        f"{called} asks for class {req.device_class} (driver {driver}), but no ResourceSlice "
        f"of that driver exists: {why}.", fix, ev,
        [ObjectRef("DeviceClass", req.device_class)])


def _affinity_text(spec: Obj) -> str:
    """A DaemonSet pod's required node labels, as ``k In (v) or k2 In (v2)``."""
    parts = [f"{k}={v}" for k, v in (spec.get("nodeSelector") or {}).items()]
    req = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
           .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = [" and ".join(f"{e.get('key')} {e.get('operator')}"
                          + (f" ({','.join(map(str, e.get('values') or []))})"
                             if e.get("values") else "")
                          for e in t.get("matchExpressions") or [])
             for t in req.get("nodeSelectorTerms") or []]
    if terms:
        parts.append(" or ".join(t for t in terms if t))
    return "; ".join(parts)
