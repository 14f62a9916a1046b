"""Pod resource requests and node allocatable, computed the way kube-scheduler does.

Upstream references (kubernetes/kubernetes):

- ``staging/src/k8s.io/component-helpers/resource/helpers.go`` ``PodRequests`` /
  ``AggregateContainerRequests``: regular containers are summed; a restartable init
  container (sidecar, ``restartPolicy: Always``) is added to the sum *and* to a running
  sidecar total; every init container's use is ``its request + the sidecars started before
  it``, and the pod's request is ``max(sum, max(init use))`` per resource; then pod-level
  requests (``spec.resources``, cpu/memory/hugepages-*) replace the aggregate; then
  ``spec.overhead`` is added.
- ``pkg/apis/core/v1/defaults.go`` ``SetDefaults_Pod``: a container's limit stands in for a
  missing request of the same resource (any resource: cpu, memory, nvidia.com/gpu, ...).
  Objects read from the API server already carry this; pod templates do not.
- In-place resize (``InPlacePodVerticalScaling``): when a container status reports
  ``resources``, the scheduler counts ``max(spec, status.resources, allocatedResources)``
  (only the status values when the resize is ``Infeasible``).

Values are floats: cpu in cores, memory/storage/hugepages in bytes, other resources as
counts. Like the scheduler (``Quantity.MilliValue()`` / ``Value()``), a pod's total is
rounded *up* to whole millicores for cpu and to whole units for everything else; sums are
kept on that grid so that comparisons do not suffer from float drift.

Memoisation: ``pod_facts`` results are kept in the diagnosis's ``Memos``
(``handlers/memo.py``, one per cluster state) by ``metadata.uid`` for the objects that carry
one (real API objects, which handlers treat as immutable: a watch cache replaces a changed
pod with a new object), and a hit counts only for the very object (``is``). A newer version
of a pod takes its old version's entry, so a long-running bot keeps no stale pods alive
through it. Objects without a uid (templates, hand-built fixtures) are recomputed each time.
Call ``clear_cache()`` if you mutate a pod in place.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

from handlers.kube.quantity import parse_quantity
from handlers.memo import Memos, Table

Obj = Mapping[str, Any]

# Resources kube-scheduler's NodeResourcesFit tracks as native (not "scalar") resources.
CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"
HUGEPAGES_PREFIX = "hugepages-"

# By uid. One GC-tracked object per kept pod: a big snapshot heap makes every full
# collection expensive, so the memo must not add much to what the collector tracks.
_PODS: Table[str, PodFacts] = Table(200_000)


def clear_cache() -> None:
    """Forget the current diagnosis's memoised pod requests (only needed after mutating a
    pod in place)."""
    kept = _PODS.of()
    if kept is not None:
        kept.clear()


def is_extended(resource: str) -> bool:
    """A resource the scheduler tracks as a scalar (device plugins' GPUs and the like):
    not cpu, memory, ephemeral-storage, pods or hugepages."""
    return resource not in (CPU, MEMORY, EPHEMERAL_STORAGE, PODS) and not resource.startswith(
        HUGEPAGES_PREFIX)


def _scale(resource: str) -> int:
    return 1000 if resource == CPU else 1


def canonical(resource: str, value: float) -> float:
    """Round up to the scheduler's grid: whole millicores for cpu, whole units otherwise.

    Values already on the grid (up to float noise) are snapped, not bumped.
    """
    if resource == CPU:
        x = value * 1000.0
        r = round(x)
        if abs(x - r) <= 1e-6 * max(1.0, abs(x)):
            return r / 1000.0
        return math.ceil(x) / 1000.0
    value = float(value)
    if value.is_integer():
        return value
    r = round(value)
    if abs(value - r) <= 1e-6 * max(1.0, abs(value)):
        return float(r)
    return float(math.ceil(value))


def units(resource: str, value: float) -> int:
    """The value as an integer on the scheduler's grid (millicores for cpu)."""
    return round(value * _scale(resource))


# parse_quantity memoised in a plain dict: a 30,000-pod cluster has a few hundred distinct
# quantity strings, and a dict hit is several times cheaper than the call. Keyed by value
# and holding no object, so shared by every cluster (not in Memos).
_QUANTITIES: dict[Any, float] = {}


def _quantity(v: Any) -> float:
    try:
        return _QUANTITIES[v]
    except KeyError:
        q = parse_quantity(v)
        if len(_QUANTITIES) < 100_000:
            _QUANTITIES[v] = q
        return q
    except TypeError:  # unhashable: let parse_quantity complain or cope
        return parse_quantity(v)


def _parse_list(rl: Mapping[str, Any] | None) -> dict[str, float]:
    if not rl:
        return {}
    q = _QUANTITIES
    out: dict[str, float] = {}
    for k, v in rl.items():
        try:
            out[k] = q[v]
        except (KeyError, TypeError):
            out[k] = _quantity(v)
    return out


def container_requests(container: Obj) -> dict[str, float]:
    """A container's requests after API defaulting (limits fill missing requests)."""
    res = container.get("resources") or {}
    out = _parse_list(res.get("requests"))
    lim = res.get("limits")
    if lim:
        for k, v in lim.items():
            if k not in out:
                out[k] = _quantity(v)
    return out


def _add(into: dict[str, float], other: Mapping[str, float]) -> None:
    for k, v in other.items():
        into[k] = into.get(k, 0.0) + v


def _max_into(into: dict[str, float], other: Mapping[str, float]) -> None:
    for k, v in other.items():
        if k not in into or v > into[k]:
            into[k] = v


def _resize_infeasible(pod: Obj) -> bool:
    for c in (pod.get("status") or {}).get("conditions") or ():
        if c.get("type") == "PodResizePending":
            return bool(c.get("reason") == "Infeasible")
    return False


def _container_statuses(status: Obj) -> dict[Any, Obj] | None:
    """Container statuses that report ``resources`` (in-place resize), by container name."""
    out: dict[Any, Obj] = {}
    for key in ("containerStatuses", "initContainerStatuses"):
        for cs in status.get(key) or ():
            if cs.get("resources") is not None:
                out[cs.get("name")] = cs
    return out or None


def _effective(pod: Obj, c: Obj, statuses: dict[Any, Obj] | None) -> dict[str, float]:
    """A container's requests as the scheduler counts them (fresh dict): spec requests with
    limits as defaults, then upstream determineContainerReqs when a status reports
    resources: max(spec, status.resources, allocatedResources), without the spec when the
    resize is Infeasible."""
    res = c.get("resources")
    raw = None
    if res:
        raw = res.get("requests")
        cr = _parse_list(raw)
        lim = res.get("limits")
        if lim:
            for k, v in lim.items():
                if k not in cr:
                    cr[k] = _quantity(v)
    else:
        cr = {}
    if statuses is not None:
        cs = statuses.get(c.get("name"))
        if cs is not None:
            st_raw = cs["resources"].get("requests")
            allocated_raw = cs.get("allocatedResources")
            if st_raw != raw or (allocated_raw is not None and allocated_raw != raw):
                if _resize_infeasible(pod):
                    cr = {}
                _max_into(cr, _parse_list(st_raw))
                _max_into(cr, _parse_list(allocated_raw))
    return cr


def _compute(pod: Obj) -> dict[str, float]:
    spec = pod.get("spec") or {}
    status = pod.get("status")
    statuses = _container_statuses(status) if status else None

    reqs: dict[str, float] = {}
    first = True
    for c in spec.get("containers") or ():
        cr = _effective(pod, c, statuses)
        if first:
            reqs, first = cr, False
        else:
            _add(reqs, cr)

    inits = spec.get("initContainers")
    if inits:
        sidecars: dict[str, float] = {}
        init_max: dict[str, float] = {}
        for c in inits:
            if c.get("restartPolicy") == "Always":  # sidecar
                cr = _effective(pod, c, statuses)
                _add(reqs, cr)
                _add(sidecars, cr)
                use = dict(sidecars)
            else:
                use = _effective(pod, c, None)  # status resources count for sidecars only
                _add(use, sidecars)
            _max_into(init_max, use)
        _max_into(reqs, init_max)

    # Pod-level resources (PodLevelResources): cpu, memory and hugepages-* from
    # spec.resources replace the container aggregate; limits default missing requests.
    pod_res = spec.get("resources")
    if pod_res:
        level = container_requests({"resources": pod_res})
        for k, v in level.items():
            if k in (CPU, MEMORY) or k.startswith(HUGEPAGES_PREFIX):
                reqs[k] = v

    overhead = spec.get("overhead")
    if overhead:
        _add(reqs, _parse_list(overhead))
    for k, v in reqs.items():  # onto the grid, in place (reqs is ours)
        c = canonical(k, v)
        if c != v:
            reqs[k] = c
    return reqs


class PodFacts(NamedTuple):
    """What the scheduler simulation needs of a pod, computed once per pod object."""

    requests: dict[str, float]  # shared: do not mutate
    terminated: bool
    uid: str
    ref: str  # "namespace/name"
    pod: Obj  # the object these facts describe (keeps its id from being recycled)


def pod_facts(pod: Obj, memos: Memos | None = None) -> PodFacts:
    """Memoised (see the module docstring) requests, phase and identity of a pod; ``memos``:
    the diagnosis's (``handlers.memo.current()`` when None)."""
    m = pod.get("metadata") or {}
    uid = str(m.get("uid") or "")
    kept = _PODS.of(memos) if uid else None
    hit = kept.get(uid) if kept is not None else None
    if hit is not None and hit[4] is pod:
        return hit
    facts = PodFacts(_compute(pod), is_terminated(pod), uid,
                     f"{m.get('namespace') or ''}/{m.get('name') or ''}", pod)
    if kept is not None:
        kept.keep(uid, facts)  # a newer version of the pod replaces the old one's entry
    return facts


def pod_requests_view(pod: Obj, memos: Memos | None = None) -> dict[str, float]:
    """Memoised requests; the returned dict is shared and must not be mutated."""
    return pod_facts(pod, memos)[0]


def pod_requests(pod: Obj) -> dict[str, float]:
    """The pod's effective requests as kube-scheduler computes them (PodRequests).

    The pod count (1) is not included: NodeResourcesFit checks ``pods`` separately.
    """
    return dict(pod_requests_view(pod))


def pod_gpu_request(pod: Obj, resource: str = "nvidia.com/gpu") -> float:
    return pod_requests_view(pod).get(resource, 0.0)


def is_terminated(pod: Obj) -> bool:
    """Succeeded/Failed pods hold no node resources (the scheduler does not cache them)."""
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def same_pod_as(pod: Obj) -> Callable[[Obj], bool]:
    """``same_pod(pod, x)`` as a one-argument predicate, for scanning many pods."""
    m = pod.get("metadata") or {}
    uid, ns, name = m.get("uid"), m.get("namespace") or "", m.get("name")

    def check(other: Obj) -> bool:
        if other is pod:
            return True
        om = other.get("metadata") or {}
        ouid = om.get("uid")
        if uid and ouid:
            return bool(ouid == uid)
        return bool(name) and om.get("name") == name and (om.get("namespace") or "") == ns

    return check


def same_pod(a: Obj, b: Obj) -> bool:
    """The same pod object: identical dict, same uid, or (no uids) same namespace/name."""
    if a is b:
        return True
    ma, mb = a.get("metadata") or {}, b.get("metadata") or {}
    ua, ub = ma.get("uid"), mb.get("uid")
    if ua and ub:
        return bool(ua == ub)
    na = ma.get("name")
    return bool(na) and na == mb.get("name") and (ma.get("namespace") or "") == (
        mb.get("namespace") or "")


def is_best_effort(pod: Obj) -> bool:
    """QoS class BestEffort: no cpu/memory request or limit on any container or the pod."""
    qos = (pod.get("status") or {}).get("qosClass")
    if qos:
        return bool(qos == "BestEffort")
    spec = pod.get("spec") or {}
    res_lists = [c.get("resources") or {} for key in ("containers", "initContainers")
                 for c in spec.get(key) or ()]
    if spec.get("resources"):
        res_lists.append(spec["resources"])
    for res in res_lists:
        for field in ("requests", "limits"):
            for k, v in (res.get(field) or {}).items():
                if k in (CPU, MEMORY) and parse_quantity(v) != 0:
                    return False
    return True


def node_allocatable(node: Obj) -> dict[str, float]:
    """status.allocatable, on the scheduler's grid.

    Falls back to status.capacity only when the node has no ``allocatable`` at all
    (never the case for a real kubelet-registered node; hand-written fixtures).
    """
    status = node.get("status") or {}
    alloc = status.get("allocatable")
    if alloc is None:
        alloc = status.get("capacity")
    out = _parse_list(alloc)
    return {k: canonical(k, v) if k != PODS else float(math.floor(v)) for k, v in out.items()}


def node_requested(pods_on_node: Iterable[Obj]) -> dict[str, float]:
    """Sum of the requests of the non-terminated pods (what NodeInfo.Requested holds)."""
    total: dict[str, float] = {}
    for p in pods_on_node:
        reqs, terminated, _, _, _ = pod_facts(p)
        if terminated:
            continue
        for k, v in reqs.items():
            total[k] = total.get(k, 0.0) + v
    return {k: canonical(k, v) for k, v in total.items()}
