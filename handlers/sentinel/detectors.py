"""What the sentinel watches for: detectors, each a pure function of one cluster object.

    @detector("gpu-capacity-lost", kind="Node", setting="lost_after", default=300, ...)
    def capacity_lost(look: Lookup, node: Obj) -> Observation | None

A detector is evaluated on the object a watch event changed (and on a timer), so it must be
cheap and read nothing but the object and what ``Lookup`` offers (the node a pod runs on, the
GPUs a node's ResourceSlices publish). It says what is wrong now, not for how long: the
sentinel (``bot/sentinel``) holds the observation until it has lasted the detector's setting
(``lost_after``...), then opens an incident for its ``group`` (one per pool, per controller),
whose thread runs ``diagnose`` (the same handlers as ``/gpu doctor`` and ``/gpu why-pending``).

A detector whose verdict needs a fact most objects lack (being a GPU stack pod) may say so
with ``relevance``: a test of a few subtrees that seldom change. The watcher keeps each
object's answer while those subtrees stay the same, and skips an object that cannot count
without running the detector: under churn most watch changes are status changes of pods
that no detector cares about.

Detectors never import Slack or the store; a new one is one function here (or in a module
of this package, imported by its ``__init__``) with its setting's default, and a scenario in
``tests/test_sentinel*.py``.

Detectors over metrics (``handlers/sentinel/polled.py``) are not evaluated on objects but
polled on the sentinel's timer, and only where Prometheus is configured:

    @poller("gpu-xid", title="GPU Xid errors", setting="xid_after", default=60)
    def xid(metrics: MetricsSource, look: Lookup, now: datetime) -> list[Observation]

A poll says everything that holds now (what it no longer returns is over); it raises
``MetricsError`` when Prometheus cannot answer, and the sentinel then keeps what it last saw.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from handlers import ledger
from handlers.gpu import is_device_plugin_pod, is_gpu_resource, name_of, ns_of, operator_component
from handlers.grouping import pool_of
from handlers.kube.resources import pod_requests
from handlers.model import ObjectRef
from handlers.timefmt import parse_time
from handlers.words import counted

if TYPE_CHECKING:
    from handlers.runtime.source import MetricsSource

Obj = dict[str, Any]


class Lookup(Protocol):
    """What a detector may read beside its object (cached, cheap)."""

    def node(self, name: str) -> Obj | None: ...

    def pod(self, namespace: str, name: str) -> Obj | None: ...

    def dra_gpus(self, node: str) -> int | None:
        """Whole GPUs the node's ResourceSlices publish (None: DRA serves it none)."""
        ...


@dataclass(frozen=True)
class Observation:
    """Something wrong with one object, now."""

    detector: str
    subject: str  # "node/gpu-1", "pod/ml/train-0": one per object and detector
    group: str  # the incident it belongs to, within its detector: "pool a100", "ml/Job train"
    gpus: float  # GPUs it costs (lost, behind a broken plugin, asked for and waiting)
    summary: str  # "gpu-1: 0 of 8 GPUs allocatable"
    objects: tuple[ObjectRef, ...]
    diagnose: tuple[str, str]  # (command, target) its thread runs: ("doctor", "gpu-1")
    since: datetime | None = None  # when the object says it began; None: first seen
    node: str | None = None
    pool: str | None = None
    namespace: str | None = None  # workload detectors: for routing and channel scope
    evidence: tuple[str, ...] = ()


@dataclass(frozen=True)
class Relevance:
    """Whether an object can give its detector an observation at all. ``test(obj)`` False
    must mean ``observe`` returns None for it, whatever the rest of the object says (its
    status); ``inputs(obj)``: every part of the object ``test`` reads (the object's name
    aside: the watcher keeps an answer per object). The watch cache shares an unchanged
    subtree between an object's versions and never edits one, so the same inputs (``is``)
    mean the same answer."""

    inputs: Callable[[Obj], tuple[object, ...]]
    test: Callable[[Obj], bool]


@dataclass(frozen=True)
class Detector:
    name: str
    title: str  # "GPU capacity lost": the incident card's headline
    kind: str  # the kind of object it is evaluated on
    setting: str  # the threshold's name in the settings: "lost_after"
    default: float  # seconds
    observe: Callable[[Lookup, Obj], Observation | None]
    # Other kinds whose changes alter its verdicts: every object of `kind` is evaluated again.
    also: frozenset[str] = field(default_factory=frozenset)
    # True: the metric-based ones, polled on the timer (only with Prometheus).
    needs_metrics: bool = False
    # Theirs: every observation that holds now (``kind`` and ``observe`` are unused).
    poll: Poll | None = None
    relevance: Relevance | None = None


Poll = Callable[["MetricsSource", Lookup, datetime], list[Observation]]

REGISTRY: dict[str, Detector] = {}


def detector(name: str, *, title: str, kind: str, setting: str, default: float,
             also: frozenset[str] = frozenset(), relevance: Relevance | None = None,
             ) -> Callable[[Callable[[Lookup, Obj], Observation | None]],
                           Callable[[Lookup, Obj], Observation | None]]:
    def register(fn: Callable[[Lookup, Obj], Observation | None]
                 ) -> Callable[[Lookup, Obj], Observation | None]:
        if name in REGISTRY:
            raise ValueError(f"detector {name} registered twice")
        REGISTRY[name] = Detector(name, title, kind, setting, default, fn, also,
                                  relevance=relevance)
        return fn
    return register


def poller(name: str, *, title: str, setting: str, default: float
           ) -> Callable[[Poll], Poll]:
    """Register a detector polled from Prometheus on the sentinel's timer."""
    def register(fn: Poll) -> Poll:
        if name in REGISTRY:
            raise ValueError(f"detector {name} registered twice")
        REGISTRY[name] = Detector(name, title, "", setting, default, _no_object,
                                  needs_metrics=True, poll=fn)
        return fn
    return register


def _no_object(look: Lookup, obj: Obj) -> Observation | None:
    return None


def settings_defaults() -> Mapping[str, float]:
    return {d.setting: d.default for d in REGISTRY.values()}


def pool_group(pool: str | None) -> str:
    return f"pool {pool}" if pool else "nodes in no pool"


# -- GPU capacity lost --------------------------------------------------------------------


@detector("gpu-capacity-lost", title="GPU capacity lost", kind="Node", setting="lost_after",
          default=300.0, also=frozenset({"ResourceSlice"}))
def capacity_lost(look: Lookup, node: Obj) -> Observation | None:
    """A GPU node offers fewer GPUs than it has (``handlers/ledger.py``: GFD's count, the
    machine's, NFD's PCI label), or its ResourceSlices publish fewer devices than it has."""
    name = name_of(node)
    led = ledger.of(node, look.dra_gpus(name))
    if led.lost <= 0 or _not_ready(node):
        # A NotReady node's status is stale: its own lifecycle is the story (NODE_NOT_READY).
        return None
    pool = pool_of(node)
    offered = f"{led.offered:g}"
    return Observation(
        "gpu-capacity-lost", f"node/{name}", pool_group(pool), float(led.lost),
        f"{name}: {offered} of {led.physical}{'+' if led.at_least else ''} GPUs allocatable "
        f"({led.lost} lost)", (ObjectRef("Node", name),), ("doctor", name),
        node=name, pool=pool, evidence=led.evidence)


def _not_ready(node: Obj) -> bool:
    for c in (node.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return bool(c.get("status") != "True")
    return False


# -- the GPU stack's pods down ------------------------------------------------------------

_WAITING_DOWN = frozenset({"CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull",
                           "CreateContainerConfigError", "CreateContainerError",
                           "RunContainerError", "InvalidImageName"})


def _component(pod: Obj) -> str | None:
    if is_device_plugin_pod(pod):
        return "device plugin"
    comp = operator_component(pod)
    return {"driver": "driver", "toolkit": "container toolkit"}.get(comp or "")


def _stack_inputs(pod: Obj) -> tuple[object, ...]:
    """What ``_component`` reads besides the pod's name."""
    spec = pod.get("spec") or {}
    return ((pod.get("metadata") or {}).get("labels"), spec.get("containers"),
            spec.get("initContainers"), spec.get("volumes"))


def _is_stack_pod(pod: Obj) -> bool:
    return _component(pod) is not None


def _down(pod: Obj) -> tuple[str, datetime | None] | None:
    """(why the pod is down, since when) or None while it is up or on its way."""
    meta = pod.get("metadata") or {}
    st = pod.get("status") or {}
    if meta.get("deletionTimestamp") or st.get("phase") in ("Succeeded",):
        return None
    ready = next((c for c in st.get("conditions") or [] if c.get("type") == "Ready"), None)
    why: str | None = None
    for cs in (st.get("initContainerStatuses") or []) + (st.get("containerStatuses") or []):
        waiting = (cs.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in _WAITING_DOWN:
            restarts = int(cs.get("restartCount") or 0)
            more = f", {restarts} restarts" if restarts else ""
            why = f"{cs.get('name')}: {waiting['reason']}{more}"
            break
    if why is None and st.get("phase") == "Failed":
        why = f"pod Failed: {st.get('reason') or st.get('message') or 'no reason given'}"
    if why is None and ready is not None and ready.get("status") != "True":
        why = f"not Ready ({ready.get('reason') or 'containers not ready'})"
    if why is None:
        return None
    # Parsed only for a pod that is down: the others are most of the cluster.
    return why, parse_time((ready or {}).get("lastTransitionTime")) or parse_time(
        meta.get("creationTimestamp"))


@detector("gpu-stack-down", title="GPU stack down", kind="Pod", setting="plugin_down_after",
          default=300.0, relevance=Relevance(_stack_inputs, _is_stack_pod))
def stack_down(look: Lookup, pod: Obj) -> Observation | None:
    """A device-plugin, driver or container-toolkit pod on a GPU node not Ready, crash-looping
    or unable to pull its image: the node's GPUs are at stake."""
    node_name = (pod.get("spec") or {}).get("nodeName")
    if not node_name:
        return None
    # Whether it is down first: a look at its status, where telling a GPU stack pod from
    # the others matches every container image against the plugins' patterns.
    down = _down(pod)
    if down is None:
        return None
    comp = _component(pod)
    if comp is None:
        return None
    why, since = down
    node = look.node(str(node_name))
    pool = pool_of(node)
    gpus = float(ledger.of(node, look.dra_gpus(str(node_name))).physical) if node else 0.0
    ns, name = ns_of(pod), name_of(pod)
    return Observation(
        "gpu-stack-down", f"pod/{ns}/{name}", f"{comp} on {pool_group(pool)}", gpus,
        f"{comp} pod {ns}/{name} on {node_name}: {why}",
        (ObjectRef("Pod", name, ns), ObjectRef("Node", str(node_name))),
        ("doctor", str(node_name)), since=since, node=str(node_name), pool=pool)


# -- GPU pods pending ---------------------------------------------------------------------


def controller(pod: Obj) -> tuple[str, str]:
    """(kind, name) of what made the pod, a ReplicaSet named as its Deployment."""
    meta = pod.get("metadata") or {}
    ref = next((r for r in meta.get("ownerReferences") or [] if r.get("controller")), None)
    if ref is None:
        return "Pod", str(meta.get("name") or "")
    kind, name = str(ref.get("kind") or ""), str(ref.get("name") or "")
    suffix = (meta.get("labels") or {}).get("pod-template-hash")
    if kind == "ReplicaSet" and suffix and name.endswith(f"-{suffix}"):
        return "Deployment", name[: -len(suffix) - 1]
    return kind, name


def gpu_asked(pod: Obj) -> float:
    return sum(v for k, v in pod_requests(pod).items() if is_gpu_resource(k) and v > 0)


@detector("gpu-pending", title="GPU work pending", kind="Pod", setting="pending_after",
          default=900.0)
def pending(look: Lookup, pod: Obj) -> Observation | None:
    """A pod asking for GPUs, Pending and unbound (grouped by the controller that made it)."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    if ((pod.get("status") or {}).get("phase", "Pending") != "Pending" or spec.get("nodeName")
            or meta.get("deletionTimestamp")):
        return None
    gpus = gpu_asked(pod)
    if gpus <= 0:
        return None
    ns, name = ns_of(pod), name_of(pod)
    kind, owner = controller(pod)
    return Observation(
        "gpu-pending", f"pod/{ns}/{name}", f"{ns}/{kind} {owner}", gpus,
        f"{ns}/{name} waits for {counted(gpus, 'GPU')}", (ObjectRef("Pod", name, ns),),
        ("why-pending", f"{ns}/{name}"), since=parse_time(meta.get("creationTimestamp")),
        namespace=ns)
