"""kube-scheduler's Filter plugins, simulated for one pod against every node.

Every filter runs on every node (the scheduler stops at the first failing plugin; a
diagnosis wants all of them). Semantics follow kubernetes/kubernetes
``pkg/scheduler/framework/plugins``; where gpubot splits or adds a verdict it says so:

- ``NodeName``: ``spec.nodeName`` set and different from the node. ``nominatedNodeName`` is
  only a preemption hint and filters nothing.
- ``NodeUnschedulable``: ``spec.unschedulable`` (cordon) unless the pod tolerates
  ``node.kubernetes.io/unschedulable:NoSchedule``. The ``unschedulable`` taint the node
  controller adds for a cordon is reported here, not under TaintToleration.
- ``NodeReady`` (gpubot's name; upstream this is TaintToleration on the lifecycle taints):
  an untolerated ``not-ready`` / ``unreachable`` / ``network-unavailable`` taint
  (NoSchedule or NoExecute), or a ``Ready`` condition that is not ``True`` while the pod does
  not tolerate the NoSchedule taint the node lifecycle controller would set for it
  (``False`` -> not-ready, ``Unknown`` -> unreachable). A node that reports no Ready
  condition at all is not rejected on that ground.
- ``NodePressure`` (gpubot's name; upstream TaintToleration): an untolerated
  ``memory-pressure`` / ``disk-pressure`` / ``pid-pressure`` taint rejects *every* pod that
  does not tolerate it. Upstream does not exempt Burstable/Guaranteed pods from the
  memory-pressure taint: only the optional PodTolerationRestriction admission plugin adds
  that toleration to non-BestEffort pods, and such a pod then carries it in
  ``spec.tolerations``, which is what is checked here. When a pressure condition is
  ``True`` but its taint is absent (controller lag, partial snapshot) gpubot applies the
  kubelet's admission rule instead: MemoryPressure rejects only BestEffort pods,
  DiskPressure/PIDPressure reject every pod, each unless the pod tolerates the taint.
- ``NodeAffinity``: nodeSelector AND required node affinity.
- ``TaintToleration``: every untolerated NoSchedule/NoExecute taint except the lifecycle
  taints above (one rejection per taint; PreferNoSchedule never rejects).
- ``InterPodAffinity``: required pod affinity / anti-affinity and existing pods' required
  anti-affinity against this pod.
- ``VolumeNodeAffinity`` (upstream VolumeBinding, bound claims): the PV bound to each PVC
  the pod uses must have ``spec.nodeAffinity.required`` matching the node's labels.
  Unbound or unknown claims are not judged here.
- ``NodeResourcesFit``: every resource the pod requests (> 0) against ``allocatable -
  requested`` of the non-terminated pods on the node (a resource the node lacks has
  allocatable 0), plus the pod count against allocatable ``pods``.
- ``NodePorts``: hostPort conflicts (containers and sidecar init containers; hostIP
  0.0.0.0 conflicts with any IP, protocol defaults to TCP).

The target pod itself, if it is already in ``pods_by_node``, is left out of every count.
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from handlers.kube.affinity import NodeAffinity, NodeSelector, PodAffinityState
from handlers.kube.quantity import fmt_quantity
from handlers.kube.resources import (
    PODS,
    is_best_effort,
    pod_requests_view,
    same_pod_as,
    units,
)
from handlers.kube.taints import (
    LIFECYCLE_TAINTS,
    NO_SCHEDULE,
    PRESSURE_TAINTS,
    READINESS_TAINTS,
    TAINT_DISK_PRESSURE,
    TAINT_MEMORY_PRESSURE,
    TAINT_NOT_READY,
    TAINT_PID_PRESSURE,
    TAINT_UNREACHABLE,
    TAINT_UNSCHEDULABLE,
    taint_str,
    tolerated_by_any,
    untolerated,
)
from handlers.scheduler.nodeinfo import NodeInfo, NodeInfos, build_node_info

Obj = Mapping[str, Any]

FILTERS = ("NodeName", "NodeUnschedulable", "NodeReady", "NodePressure", "NodeAffinity",
           "TaintToleration", "InterPodAffinity", "VolumeNodeAffinity", "NodeResourcesFit",
           "NodePorts")
_FILTER_RANK = {f: i for i, f in enumerate(FILTERS)}

GPU_RESOURCE = "nvidia.com/gpu"
# handlers.gpu.OTHER_GPU_RESOURCES (this package imports only handlers.kube)
_OTHER_GPU_RESOURCES = ("amd.com/gpu", "gpu.intel.com/i915", "gpu.intel.com/xe",
                        "volcano.sh/vgpu-number", "volcano.sh/gpu-number")
# Sizes of a vGPU share that Volcano's scheduler leaves out of its resource fit
# (IgnoredDevicesList, pkg/scheduler/api/resource_info.go; its deviceshare plugin places
# them on a card): no node needs to advertise them.
SHARE_PARAMETERS = frozenset({"volcano.sh/vgpu-memory", "volcano.sh/vgpu-memory-percentage",
                              "volcano.sh/vgpu-cores"})

_PRESSURE_CONDITIONS = (("MemoryPressure", TAINT_MEMORY_PRESSURE),
                        ("DiskPressure", TAINT_DISK_PRESSURE),
                        ("PIDPressure", TAINT_PID_PRESSURE))


@dataclass(frozen=True)
class Rejection:
    filter: str  # one of FILTERS
    reason: str  # human and specific
    resource: str | None = None  # NodeResourcesFit
    requested: float | None = None
    free: float | None = None
    allocatable: float | None = None
    taint: dict[str, Any] | None = None  # NodeUnschedulable/NodeReady/NodePressure/TaintToleration
    label: str | None = None  # NodeAffinity / VolumeNodeAffinity: the label key that failed


@dataclass
class NodeFit:
    """A node's verdict for one pod. Shared between diagnoses (see NodeInfo.verdicts):
    never changed once made."""

    node: str
    rejections: list[Rejection] = field(default_factory=list)
    allocatable: dict[str, float] = field(default_factory=dict)
    requested: dict[str, float] = field(default_factory=dict)  # incl. "pods": pod count
    free: dict[str, float] = field(default_factory=dict)
    holders: list[tuple[str, float]] = field(default_factory=list)  # (ns/pod, gpus)
    # Worked out once: a diagnosis asks each of thousands of fits several times.
    fits: bool = field(init=False)
    filters: frozenset[str] = field(init=False)  # that rejected the pod
    # Passes every filter except NodeResourcesFit (resources and pod count).
    feasible: bool = field(init=False)

    def __post_init__(self) -> None:
        self.fits = not self.rejections
        # thousands of fits a new target: a few combinations of filters between them
        key = tuple(r.filter for r in self.rejections)
        known = _FILTER_SETS.get(key)
        if known is None:
            filters = frozenset(key)
            known = (filters, filters <= {"NodeResourcesFit"})
            if len(_FILTER_SETS) < 1024:
                _FILTER_SETS[key] = known
        self.filters, self.feasible = known


# Interned by value (filter names), shared by every cluster: not per-cluster state.
_FILTER_SETS: dict[tuple[str, ...], tuple[frozenset[str], bool]] = {}


def _meta(obj: Obj) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _name(obj: Obj) -> str:
    return str(_meta(obj).get("name") or "")


def _pod_ref(pod: Obj) -> str:
    m = _meta(pod)
    return f"{m.get('namespace') or ''}/{m.get('name') or ''}"


def _is_gpu_resource(name: str) -> bool:
    return name.startswith("nvidia.com/") or name in _OTHER_GPU_RESOURCES


def _default_gpu_resource(requests: Mapping[str, float]) -> str:
    gpus = sorted(r for r, v in requests.items() if v > 0 and _is_gpu_resource(r))
    if not gpus or GPU_RESOURCE in gpus:
        return GPU_RESOURCE
    return gpus[0]


def _fmt(value: float, resource: str) -> str:
    return fmt_quantity(value, resource)


# ----------------------------------------------------------------------------- ports

_Port = tuple[str, str, int]  # (hostIP, protocol, hostPort)


def host_ports(pod: Obj) -> list[_Port]:
    """Host ports of containers and sidecar init containers (upstream GetHostPorts)."""
    spec = pod.get("spec") or {}
    out: list[_Port] = []
    for key in ("initContainers", "containers"):
        for c in spec.get(key) or ():
            ports = c.get("ports")
            if not ports or (key == "initContainers" and c.get("restartPolicy") != "Always"):
                continue
            for p in ports:
                hp = p.get("hostPort")
                if isinstance(hp, int) and hp > 0:
                    out.append((str(p.get("hostIP") or "0.0.0.0"),
                                str(p.get("protocol") or "TCP"), hp))
    return out


def _port_conflict(want: _Port, used: _Port) -> bool:
    ip, proto, port = want
    uip, uproto, uport = used
    if port != uport or proto != uproto:
        return False
    return ip == "0.0.0.0" or uip in ("0.0.0.0", ip)


# ----------------------------------------------------------------------------- volumes


def _pod_claims(pod: Obj) -> list[str]:
    spec = pod.get("spec") or {}
    pod_name = _name(pod)
    out = []
    for v in spec.get("volumes") or ():
        pvc = v.get("persistentVolumeClaim")
        if pvc and pvc.get("claimName"):
            out.append(str(pvc["claimName"]))
        elif v.get("ephemeral") is not None and pod_name:
            out.append(f"{pod_name}-{v.get('name')}")
    return out


def _volume_selectors(pod: Obj, pvcs: Iterable[Obj],
                      pvs: Iterable[Obj]) -> list[tuple[str, str, NodeSelector]]:
    """(claim, pv name, compiled required node affinity) for the pod's bound claims."""
    claims = _pod_claims(pod)
    if not claims:
        return []
    ns = str(_meta(pod).get("namespace") or "")
    pvc_by_name = {_name(c): c for c in pvcs if (_meta(c).get("namespace") or "") == ns}
    pv_by_name = {_name(v): v for v in pvs}
    out = []
    for claim in claims:
        pvc = pvc_by_name.get(claim)
        if pvc is None:
            continue
        vol = (pvc.get("spec") or {}).get("volumeName")
        pv = pv_by_name.get(str(vol)) if vol else None
        if pv is None:
            continue
        required = ((pv.get("spec") or {}).get("nodeAffinity") or {}).get("required")
        if required:
            out.append((claim, _name(pv), NodeSelector(required)))
    return out


# ----------------------------------------------------------------------------- lifecycle


def _conditions(node: Obj) -> dict[str, str]:
    return {str(c.get("type")): str(c.get("status"))
            for c in (node.get("status") or {}).get("conditions") or ()}


def _lifecycle_rejections(node: Obj, taints: Sequence[Obj], tolerations: Sequence[Obj],
                          best_effort: bool) -> list[Rejection]:
    out: list[Rejection] = []
    spec = node.get("spec") or {}
    conds = _conditions(node)
    bad = untolerated([t for t in taints if t.get("key") in LIFECYCLE_TAINTS], tolerations)

    # NodeUnschedulable
    cordon_taints = [t for t in bad if t.get("key") == TAINT_UNSCHEDULABLE]
    if spec.get("unschedulable") and not tolerated_by_any(
            tolerations, {"key": TAINT_UNSCHEDULABLE, "effect": NO_SCHEDULE}):
        taint = next((t for t in taints if t.get("key") == TAINT_UNSCHEDULABLE), None)
        out.append(Rejection("NodeUnschedulable", "node is cordoned (spec.unschedulable: true)",
                             taint=dict(taint) if taint else None))
    elif cordon_taints:
        t = cordon_taints[0]
        out.append(Rejection("NodeUnschedulable", f"node has untolerated taint {taint_str(t)}",
                             taint=dict(t)))

    # NodeReady: readiness taints, one rejection per taint key.
    seen: set[str] = set()
    for t in bad:
        key = str(t.get("key"))
        if key in READINESS_TAINTS and key not in seen:
            seen.add(key)
            ready = conds.get("Ready")
            state = f" (Ready={ready})" if ready and key in (TAINT_NOT_READY, TAINT_UNREACHABLE) \
                else ""
            out.append(Rejection("NodeReady", f"node has untolerated taint {taint_str(t)}{state}",
                                 taint=dict(t)))
    ready = conds.get("Ready")
    if ready is not None and ready != "True":
        key = TAINT_NOT_READY if ready == "False" else TAINT_UNREACHABLE
        if key not in seen and TAINT_NOT_READY not in seen and TAINT_UNREACHABLE not in seen \
                and not tolerated_by_any(tolerations, {"key": key, "effect": NO_SCHEDULE}):
            out.append(Rejection("NodeReady", f"node is NotReady (Ready={ready})"))

    # NodePressure
    seen.clear()
    for t in bad:
        key = str(t.get("key"))
        if key in PRESSURE_TAINTS and key not in seen:
            seen.add(key)
            out.append(Rejection("NodePressure", f"node has untolerated taint {taint_str(t)}",
                                 taint=dict(t)))
    for cond, key in _PRESSURE_CONDITIONS:
        if conds.get(cond) != "True" or key in seen:
            continue
        if any(t.get("key") == key for t in taints):
            continue  # the taint is there and tolerated: the scheduler lets the pod through
        if key == TAINT_MEMORY_PRESSURE and not best_effort:
            continue
        if not tolerated_by_any(tolerations, {"key": key, "effect": NO_SCHEDULE}):
            who = " and the pod is BestEffort" if key == TAINT_MEMORY_PRESSURE else ""
            out.append(Rejection("NodePressure", f"node reports {cond}=True{who}"))
    return out


# ----------------------------------------------------------------------------- simulate

# What a target asks -> a number never given to another. Interned by value, holding no API
# object, so shared by every cluster (the verdicts it keys live in each cluster's NodeInfos).
_ASKS: dict[Hashable, int] = {}
_ASKS_NEXT = itertools.count()


def _asks(pod: Obj, requests: Mapping[str, float], gpu_res: str | None, best_effort: bool,
          wanted_node: str, wanted_ports: Sequence[_Port]) -> int:
    """Everything of the target that the per-node filters read (affinity and volumes
    aside), as a number: two pods that ask the same get the same number, so they get the
    same fit on a node. (A number hashes at once; the tuple would be hashed per node.)"""
    spec = pod.get("spec") or {}
    affinity = spec.get("affinity") or {}
    key = (tuple(sorted(requests.items())), gpu_res, best_effort, wanted_node,
           tuple(wanted_ports), repr(spec.get("tolerations")), repr(spec.get("nodeSelector")),
           repr(affinity.get("nodeAffinity")))
    found = _ASKS.get(key)
    if found is None:
        if len(_ASKS) >= 10_000:
            _ASKS.clear()  # numbers already handed out stay unique: the counter goes on
        found = _ASKS[key] = next(_ASKS_NEXT)
    return found


class _TargetMatcher:
    """Tells the target pod among a node's pods (``same_pod_as``), so that it is not
    counted as its own neighbour."""

    def __init__(self, pod: Obj) -> None:
        self.pod = pod
        self.is_same = same_pod_as(pod)
        self.uid = str(_meta(pod).get("uid") or "")
        self.ref = _pod_ref(pod) if _name(pod) else ""

    def maybe_on(self, info: NodeInfo) -> bool:
        """False when the target is surely not among the node's pods (cheap)."""
        if (self.uid and self.uid in info.uids) or (self.ref and self.ref in info.refs):
            return True
        return not self.uid and not self.ref and any(f.pod is self.pod for f in info.active)


def _node_rejections(info: NodeInfo, wanted_node: str, tolerations: list[Obj],
                     best_effort: bool, node_aff: NodeAffinity,
                     same: dict[tuple[Any, ...], Rejection]) -> Iterator[Rejection]:
    """NodeName, the lifecycle filters, NodeAffinity and TaintToleration: what only the
    node decides; ``same`` shares equal taint rejections between nodes."""
    node = info.node
    if wanted_node and wanted_node != info.name:
        yield Rejection("NodeName", f"spec.nodeName is {wanted_node}")
    if not info.healthy:
        yield from _lifecycle_rejections(node, info.taints, tolerations, best_effort)
    if not node_aff.empty:
        miss = node_aff.mismatch(node)
        if miss is not None:
            yield Rejection("NodeAffinity", miss[1], label=miss[0] or None)
    for t in untolerated(info.other_taints, tolerations) if info.other_taints else ():
        tkey = ("taint", *sorted(t.items()))
        if tkey not in same:
            same[tkey] = Rejection("TaintToleration", f"untolerated taint {taint_str(t)}",
                                   taint=dict(t))
        yield same[tkey]


def simulate(pod: Obj, nodes: Iterable[Obj], pods_by_node: Mapping[str, Iterable[Obj]], *,
             pvcs: Iterable[Obj] = (), pvs: Iterable[Obj] = (), gpu_resource: str | None = None,
             namespaces_labels: Mapping[str, Mapping[str, str]] | None = None) -> list[NodeFit]:
    """Run every filter for ``pod`` on every node; one NodeFit per node, in node order.

    ``pods_by_node`` maps node name to the pods bound there (terminated pods are ignored).
    ``namespaces_labels`` (namespace -> labels) resolves affinity namespaceSelectors.
    """
    nodes = list(nodes)
    remembered = NodeInfos()  # the diagnosis's memos, looked up once, not per node
    memos = remembered.memos
    spec = pod.get("spec") or {}
    tolerations: list[Obj] = list(spec.get("tolerations") or ())
    wanted_node = spec.get("nodeName") or ""
    requests = {k: v for k, v in pod_requests_view(pod, memos).items()
                if v > 0 and k not in SHARE_PARAMETERS}
    gpu_res = gpu_resource or _default_gpu_resource(requests)
    best_effort = is_best_effort(pod)
    node_aff = NodeAffinity(pod)
    wanted_ports = host_ports(pod)
    volumes = _volume_selectors(pod, pvcs, pvs)
    is_target = _TargetMatcher(pod)
    infos = []
    for node in nodes:
        name = str((node.get("metadata") or {}).get("name") or "")  # _name, inlined: per node
        bound = pods_by_node.get(name, ())
        info = remembered.get(node, bound if isinstance(bound, (list, tuple)) else list(bound),
                            name)
        if is_target.maybe_on(info):  # the target is not its own neighbour
            info = build_node_info(node, [p for p in info.pods if not is_target.is_same(p)],
                                   info, memos)
        infos.append(info)
    if PodAffinityState.needs_every_pod(pod):
        aff_infos = infos
        aff_pods: Mapping[str, Iterable[Obj]] = {i.name: [f.pod for f in i.active] for i in infos}
    else:  # only pods with required anti-affinity can turn this pod away
        aff_infos = [i for i in infos if i.anti_affinity]
        aff_pods = {i.name: i.anti_affinity for i in aff_infos}
    aff_state = PodAffinityState.build(pod, {i.name: i.node for i in aff_infos}, aff_pods,
                                       namespaces_labels)
    check_affinity = aff_state.active

    # Rejections that read the same on many nodes (thousands of "Insufficient
    # nvidia.com/gpu ... node has none") are made once and shared: they are frozen.
    same: dict[tuple[Any, ...], Rejection] = {}
    # A node's fit depends on the node, its pods (both fixed for one NodeInfo) and what
    # the target asks, unless other nodes' pods (inter-pod affinity) or volumes come in:
    # then a NodeInfo keeps the fit, and a warm bot re-checking a pod redoes only the
    # nodes that changed.
    asks = None if check_affinity or volumes else _asks(
        pod, requests, gpu_res, best_effort, wanted_node, wanted_ports)
    needs = [(k, need, units(k, need)) for k, need in requests.items() if k != PODS]
    fits: list[NodeFit] = []
    for info in infos:
        if asks is not None and (kept := info.verdicts.get(asks)) is not None:
            fits.append(kept)
            continue
        node, name = info.node, info.name
        # The filters that read only the node: kept while the node object is the same, as
        # its pods change (under churn, most rebuilt NodeInfos are of unchanged nodes).
        by_node = None if asks is None else info.node_verdicts.get(asks)
        if by_node is None:
            by_node = tuple(_node_rejections(info, wanted_node, tolerations, best_effort,
                                             node_aff, same))
            if asks is not None:
                info.remember_for_node(asks, by_node)
        rej = list(by_node)

        if check_affinity:
            why = aff_state.check(node)
            if why is not None:
                rej.append(Rejection("InterPodAffinity", why))

        for claim, pv, selector in volumes:
            vmiss = selector.mismatch(info.labels)
            if vmiss is not None:
                rej.append(Rejection(
                    "VolumeNodeAffinity",
                    f"PersistentVolume {pv} (claim {claim}) node affinity {vmiss[1]}",
                    label=vmiss[0] or None))

        alloc, free = info.allocatable, info.free
        if any(k not in free for k in requests):  # asked for what the node has none of
            free = {**free, **{k: 0.0 for k in requests if k not in free and k != PODS}}
        for k, need, need_units in needs:
            have = free[k]
            if need_units > units(k, have):
                rkey = (k, have, alloc.get(k))
                if rkey not in same:
                    a = alloc.get(k, 0.0)
                    where = (f"free {_fmt(have, k)} of {_fmt(a, k)} allocatable" if k in alloc
                             else "node has none")
                    same[rkey] = Rejection(
                        "NodeResourcesFit",
                        f"Insufficient {k}: requested {_fmt(need, k)}, {where}",
                        resource=k, requested=need, free=have, allocatable=a)
                rej.append(same[rkey])
        count = len(info.active)
        if info.has_pod_limit:
            max_pods = alloc.get(PODS, 0.0)
            if count + 1 > max_pods:
                rej.append(Rejection(
                    "NodeResourcesFit",
                    f"Too many pods: {count} of {max_pods:g} allowed pods already on the node",
                    resource=PODS, requested=1.0, free=max_pods - count, allocatable=max_pods))

        if wanted_ports:
            used_ports = [(hp, f.ref) for f in info.active for hp in host_ports(f.pod)]
            for want in wanted_ports:
                for have_port, owner in used_ports:
                    if _port_conflict(want, have_port):
                        ip, proto, port = want
                        rej.append(Rejection(
                            "NodePorts", f"hostPort {port}/{proto}"
                            + (f" on {ip}" if ip != "0.0.0.0" else "")
                            + f" is already used by {owner}"))
                        break

        if len(rej) > 1:
            rej.sort(key=lambda r: _FILTER_RANK[r.filter])
        holders = [(f.ref, g) for f in info.extended if (g := f.requests.get(gpu_res))]
        holders.sort(key=lambda h: (-h[1], h[0]))
        fit = NodeFit(name, rej, alloc, info.requested, free, holders)
        if asks is not None:
            info.remember(asks, fit)
        fits.append(fit)
    return fits
