"""Everything the chain reads, read once: one pass over the cluster's pods.

A 30,000-pod cluster is listed once; the pass keeps only the few pods the chain looks at
(device-plugin and GPU operator pods, pods the kubelet refused, failing GPU workloads),
indexed by node.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from handlers.gpu import (
    is_device_plugin_pod,
    is_operator_controller,
    name_of,
    ns_of,
    operator_component,
    requests_gpu,
)
from handlers.knowledge.nodes import plugin_knowledge
from handlers.kube.admission import is_refusal_reason
from handlers.kube.selectors import selector_from_object
from handlers.memo import Value
from handlers.view import Reader

Obj = dict[str, Any]

_TERMINAL = ("Succeeded", "Failed")
# Read pods node by node when the nodes that matter are at most 1/SCOPE_FRACTION of all
# nodes; otherwise one list of every pod is cheaper.
SCOPE_FRACTION = 4
_FAILING_WAIT = frozenset({"CrashLoopBackOff", "RunContainerError", "CreateContainerError",
                           "StartError", "CreateContainerConfigError"})


def _template_pod(ds: Obj) -> Obj:
    """A DaemonSet's pod template as a pod, so that the pod classifiers apply to it."""
    tmpl = (ds.get("spec") or {}).get("template") or {}
    meta = dict(tmpl.get("metadata") or {})
    meta["name"] = f"{name_of(ds)}-xxxxx"
    meta["namespace"] = ns_of(ds)
    return {"kind": "Pod", "metadata": meta, "spec": tmpl.get("spec") or {}}


def admission_failed(pod: Obj) -> bool:
    """The kubelet refused the pod at admission, as its status says (Topology Manager, device
    allocation, OutOf<resource>: ``handlers/kube/admission.py``)."""
    st = pod.get("status") or {}
    return is_refusal_reason(st.get("reason")) or (
        "Allocate failed due to" in str(st.get("message") or ""))





def _workload_failing(pod: Obj) -> bool:
    """A container waits in a crash/start error, or ended with a non-zero exit."""
    st = pod.get("status") or {}
    for cs in st.get("containerStatuses") or []:
        state = cs.get("state") or {}
        if (state.get("waiting") or {}).get("reason") in _FAILING_WAIT:
            return True
        term = state.get("terminated") or (cs.get("lastState") or {}).get("terminated")
        if term and term.get("exitCode") not in (0, None):
            return True
    return False


@dataclass
class Inventory:
    # No reference to its Reader: the Reader's memo holds the Inventory, and a cycle would
    # keep every read of a diagnosis alive until a full collection.
    now: datetime
    nodes: list[Obj] = field(default_factory=list)
    # Non-terminated device-plugin pods per node, and GPU operator pods per node/component.
    plugin_pods: dict[str, list[Obj]] = field(default_factory=dict)
    component_pods: dict[str, dict[str, list[Obj]]] = field(default_factory=dict)
    # Failed one-shot validator pods (nvidia-cuda-validator-x, ...) per node.
    failed_validators: dict[str, list[Obj]] = field(default_factory=dict)
    # Operator pods not run by a DaemonSet (the operator itself, NFD master/gc).
    cluster_pods: list[tuple[str, Obj]] = field(default_factory=list)
    admission_failed: dict[str, list[Obj]] = field(default_factory=dict)
    failing_gpu_workloads: dict[str, list[Obj]] = field(default_factory=dict)
    daemonsets: list[Obj] = field(default_factory=list)
    plugin_daemonsets: list[Obj] = field(default_factory=list)
    component_daemonsets: list[tuple[str, Obj]] = field(default_factory=list)
    cluster_policies: list[Obj] = field(default_factory=list)

    @property
    def plugin_nodes(self) -> set[str]:
        return set(self.plugin_pods)

    def daemonset(self, namespace: str, name: str) -> Obj | None:
        for ds in self.daemonsets:
            if name_of(ds) == name and ns_of(ds) == namespace:
                return ds
        return None

    @property
    def operator_namespace(self) -> str | None:
        """Where the GPU operator runs: its controller's, else its DaemonSets' namespace."""
        for comp, pod in self.cluster_pods:
            if comp == "operator":
                return ns_of(pod)
        for _, ds in self.component_daemonsets:
            return ns_of(ds)
        for ds in self.plugin_daemonsets:
            return ns_of(ds)
        return None


# Inventories per node scope, kept in the Reader's memo: why-pending may ask the chain about
# several node sets, and a Reader's reads never change during a diagnosis. (Not a
# WeakKeyDictionary keyed by the Reader: an Inventory holds its Reader, so no entry ever
# died, and every diagnosis leaked its reads.)
_Key = tuple[frozenset[str], bool] | None


def build_inventory(reader: Reader, scope: Iterable[str] | None = None, *,
                    cluster_pods: bool = False) -> Inventory:
    """What the chain reads. With ``scope``, only the pods on those nodes are read (one
    field-selected list per node); ``cluster_pods`` adds the pods of the operator's
    namespaces, for its own controller (a whole-cluster doctor wants it, the chain of a
    few nodes does not)."""
    cached: dict[_Key, Inventory] = reader.memo.setdefault("inventories", {})
    key = None if scope is None else (frozenset(scope), cluster_pods)
    inv = cached.get(None) or cached.get(key)  # a full inventory serves any scope
    if inv is None:
        inv = cached[key] = _build(reader, key)
    return inv


def device_plugin_nodes(reader: Reader) -> set[str]:
    """Nodes running a device-plugin pod, without listing every pod of the cluster: the pods
    of each DaemonSet whose template ``is_device_plugin_pod`` accepts (by its own selector,
    so layouts found by image or hostPath are read too), and pods carrying a known plugin
    label (no DaemonSet, or DaemonSets that could not be read)."""
    nodes: set[str] = set()
    seen: set[tuple[str, str]] = set()
    was = _PLUGIN_PODS.get(reader.memos) or {}
    now: dict[int, tuple[Obj, _PluginPodFact]] = {}

    def take(pods: Iterable[Obj]) -> None:
        for fact in _facts(pods, was, now):
            if fact is None or fact[0] in seen:
                continue
            seen.add(fact[0])
            if fact[1]:
                nodes.add(fact[1])

    for ds in reader.list("DaemonSet"):
        selector = selector_from_object((ds.get("spec") or {}).get("selector"))
        if selector and is_device_plugin_pod(_template_pod(ds)):
            take(reader.list("Pod", ns_of(ds), label_selector=selector))
    for selector in plugin_knowledge().selectors():
        take(reader.list("Pod", label_selector=selector))
    _PLUGIN_PODS.put(reader.memos, now)
    return nodes


# id(pod) -> (pod, _plugin_pod_fact(pod)) for the pods device_plugin_nodes read last, in the
# Reader's Memos: a warm watch cache hands out the same objects until they change, and a
# diagnosis reads thousands (see handlers/memo.py). Rebuilt on every call, so it holds only
# pods of the last one (each entry keeps its pod alive, so an id is never another object's
# meanwhile).
_PluginPodFact = tuple[tuple[str, str], str] | None
_PLUGIN_PODS: Value[dict[int, tuple[Obj, _PluginPodFact]]] = Value()


# Apart from _PLUGIN_PODS: a memo keeps only the pods of its last call, and
# device_plugin_nodes reads a few hundred pods where this reads all of them.
_SCANNED_PODS: Value[dict[int, tuple[Obj, _PluginPodFact]]] = Value()


def plugin_nodes_among(reader: Reader, pods: Iterable[Obj]) -> set[str]:
    """Nodes running a device-plugin pod among ``pods`` (all of a cluster's, listed
    already): every pod is looked at, so a plugin run outside any DaemonSet or known label
    counts, and each pod's answer is kept while the watch cache hands out the same object.
    (Matching each of 30,000 pods' images against the plugins' patterns was a quarter of a
    second of every warm why-pending.)"""
    was = _SCANNED_PODS.get(reader.memos) or {}
    now: dict[int, tuple[Obj, _PluginPodFact]] = {}
    nodes = {fact[1] for fact in _facts(pods, was, now) if fact is not None and fact[1]}
    _SCANNED_PODS.put(reader.memos, now)
    return nodes


def _facts(pods: Iterable[Obj], was: dict[int, tuple[Obj, _PluginPodFact]],
           now: dict[int, tuple[Obj, _PluginPodFact]]) -> Iterator[_PluginPodFact]:
    """Each pod's ``_plugin_pod_fact``, from ``was`` while it is the same object; the
    answers of API objects go to ``now`` (an API object is replaced, never edited)."""
    for p in pods:
        hit = was.get(id(p))
        if hit is None or hit[0] is not p:
            hit = (p, _plugin_pod_fact(p))
        if (p.get("metadata") or {}).get("uid"):
            now[id(p)] = hit
        yield hit[1]


def _plugin_pod_fact(pod: Obj) -> _PluginPodFact:
    """None unless a device-plugin pod bound to a node; else its (namespace, name) and the
    node it runs on ("" once it has terminated)."""
    node = (pod.get("spec") or {}).get("nodeName")
    if not node or not is_device_plugin_pod(pod):
        return None
    running = (pod.get("status") or {}).get("phase") not in _TERMINAL
    return (ns_of(pod), name_of(pod)), str(node) if running else ""


def _build(reader: Reader, key: _Key) -> Inventory:
    inv = Inventory(reader.now())
    inv.nodes = reader.list("Node")
    inv.daemonsets = reader.list("DaemonSet")
    for ds in inv.daemonsets:
        tp = _template_pod(ds)
        if is_device_plugin_pod(tp):
            inv.plugin_daemonsets.append(ds)
            continue
        comp = operator_component(tp)
        if comp is not None:
            inv.component_daemonsets.append((comp, ds))
    inv.cluster_policies = reader.list("ClusterPolicy")
    sorter = _Sorter(inv)
    if key is None:
        for pod in reader.list("Pod"):
            sorter.add(pod)
    else:
        scope, with_cluster_pods = key
        for on_node in reader.pods_on(sorted(scope)).values():
            for pod in on_node:
                sorter.add(pod)
        namespaces = {ns_of(ds) for ds in inv.plugin_daemonsets} | {
            ns_of(ds) for _, ds in inv.component_daemonsets}
        for ns in sorted(namespaces) if with_cluster_pods else ():
            for pod in reader.list("Pod", ns):
                if (pod.get("spec") or {}).get("nodeName") not in scope:
                    sorter.add(pod, cluster_only=True)
    sorter.done()
    return inv


class _Sorter:
    """Puts each pod where the chain looks for it."""

    def __init__(self, inv: Inventory) -> None:
        self.inv = inv
        self.plugin: dict[str, list[Obj]] = defaultdict(list)
        self.comps: dict[str, dict[str, list[Obj]]] = defaultdict(lambda: defaultdict(list))
        self.validators: dict[str, list[Obj]] = defaultdict(list)
        self.admission: dict[str, list[Obj]] = defaultdict(list)
        self.workloads: dict[str, list[Obj]] = defaultdict(list)

    def add(self, pod: Obj, *, cluster_only: bool = False) -> None:
        """``cluster_only``: a pod off the scoped nodes, kept only if it is one of the
        operator's cluster-wide pods (its controller, NFD master)."""
        spec = pod.get("spec") or {}
        node = spec.get("nodeName") or ""
        phase = (pod.get("status") or {}).get("phase")
        # A refused pod that asked no GPU (OutOfcpu on a GPU node) is no GPU-stack matter.
        if node and phase == "Failed" and admission_failed(pod) and requests_gpu(pod):
            if not cluster_only:
                self.admission[node].append(pod)
            return
        if is_device_plugin_pod(pod):
            if node and phase not in _TERMINAL and not cluster_only:
                self.plugin[node].append(pod)
            return
        comp = operator_component(pod)
        if comp is None and is_operator_controller(pod):
            comp = "operator"
        if comp is not None:
            kinds = {r.get("kind") for r in (pod.get("metadata") or {}).get(
                "ownerReferences") or []}
            if "DaemonSet" in kinds and node:
                if phase not in _TERMINAL and not cluster_only:
                    self.comps[node][comp].append(pod)
            elif comp == "validator" and node:
                if phase == "Failed" and not cluster_only:
                    self.validators[node].append(pod)
            elif phase not in _TERMINAL:
                self.inv.cluster_pods.append((comp, pod))
            return
        if node and not cluster_only and _workload_failing(pod) and requests_gpu(pod):
            self.workloads[node].append(pod)

    def done(self) -> None:
        inv = self.inv
        inv.plugin_pods = dict(self.plugin)
        inv.component_pods = {n: dict(c) for n, c in self.comps.items()}
        inv.failed_validators = dict(self.validators)
        inv.admission_failed = dict(self.admission)
        inv.failing_gpu_workloads = dict(self.workloads)


def template_pod(ds: Obj) -> Obj:
    return _template_pod(ds)
