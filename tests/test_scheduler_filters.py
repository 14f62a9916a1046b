"""kube-scheduler Filter plugins simulated per node: taints, affinity, resources, ports."""

from __future__ import annotations

import copy
import random
from collections import defaultdict
from typing import Any

import pytest

from handlers.kube.affinity import (
    NodeAffinity,
    check_pod_affinity,
    match_node_selector_terms,
    node_matches_pod,
)
from handlers.kube.taints import tolerates, untolerated
from handlers.scheduler.filters import NodeFit, simulate
from tests.diagnosing import Diagnosing

Obj = dict[str, Any]
ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


# ----------------------------------------------------------------------------- builders


def mk_node(name: str = "n1", *, alloc: dict[str, Any] | None = None,
            labels: dict[str, str] | None = None, taints: list[Obj] | None = None,
            unschedulable: bool = False, conditions: dict[str, str] | None = None) -> Obj:
    a = {"cpu": "32", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": "8",
         "ephemeral-storage": "500Gi"} if alloc is None else alloc
    conds = {"Ready": "True"} if conditions is None else conditions
    return {
        "kind": "Node",
        "metadata": {"name": name, "labels": {HOST: name, **(labels or {})}},
        "spec": {"taints": taints or [], **({"unschedulable": True} if unschedulable else {})},
        "status": {"allocatable": a, "capacity": dict(a),
                   "conditions": [{"type": k, "status": v} for k, v in conds.items()]},
    }


def mk_pod(name: str = "train", ns: str = "ml", *, requests: dict[str, Any] | None = None,
           limits: dict[str, Any] | None = None, labels: dict[str, str] | None = None,
           node: str | None = None,
           phase: str = "Pending", tolerations: list[Obj] | None = None,
           affinity: Obj | None = None, node_selector: dict[str, str] | None = None,
           ports: list[Obj] | None = None, volumes: list[Obj] | None = None,
           init: list[Obj] | None = None, overhead: dict[str, Any] | None = None,
           uid: str | None = None) -> Obj:
    c: Obj = {"name": "main", "resources": {}}
    if requests is not None:
        c["resources"]["requests"] = requests
    if limits is not None:
        c["resources"]["limits"] = limits
    if ports:
        c["ports"] = ports
    spec: Obj = {"containers": [c]}
    for key, val in (("nodeName", node), ("tolerations", tolerations), ("affinity", affinity),
                     ("nodeSelector", node_selector), ("volumes", volumes),
                     ("initContainers", init), ("overhead", overhead)):
        if val is not None:
            spec[key] = val
    meta: Obj = {"name": name, "namespace": ns, "labels": labels or {}}
    if uid:
        meta["uid"] = uid
    return {"kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": phase}}


GPU4 = {"cpu": "4", "memory": "32Gi", "nvidia.com/gpu": "4"}


def taint(key: str, effect: str = "NoSchedule", value: str | None = None) -> Obj:
    t: Obj = {"key": key, "effect": effect}
    if value is not None:
        t["value"] = value
    return t


def tol(key: str | None = None, op: str | None = None, value: str | None = None,
        effect: str | None = None, seconds: int | None = None) -> Obj:
    t: Obj = {}
    for k, v in (("key", key), ("operator", op), ("value", value), ("effect", effect),
                 ("tolerationSeconds", seconds)):
        if v is not None:
            t[k] = v
    return t


def one(pod: Obj, node: Obj, others: list[Obj] | None = None, **kw: Any) -> NodeFit:
    name = node["metadata"]["name"]
    fits = simulate(pod, [node], {name: others or []}, **kw)
    assert len(fits) == 1 and fits[0].node == name
    return fits[0]


def filters(fit: NodeFit) -> list[str]:
    return [r.filter for r in fit.rejections]


# ----------------------------------------------------------------------------- taints


TOLERATION_CASES = [
    ("Exists matches any value", tol("k", "Exists"), taint("k", value="v"), True),
    ("Exists other key", tol("k", "Exists"), taint("other"), False),
    ("default operator is Equal: same value", tol("k", value="v"), taint("k", value="v"), True),
    ("Equal: different value", tol("k", "Equal", "v"), taint("k", value="w"), False),
    ("Equal: toleration without value vs valued taint", tol("k", "Equal"), taint("k", value="v"),
     False),
    ("Equal: both empty values", tol("k", "Equal"), taint("k"), True),
    ("empty key + Exists tolerates everything", tol(op="Exists"), taint("any", "NoExecute", "x"),
     True),
    ("empty effect matches every effect", tol("k", "Exists"), taint("k", "NoExecute"), True),
    ("effect must match when set", tol("k", "Exists", effect="NoSchedule"),
     taint("k", "NoExecute"), False),
    ("effect match", tol("k", "Exists", effect="NoExecute"), taint("k", "NoExecute"), True),
    ("Gt: taint value greater", tol("gpu-gen", "Gt", "3"), taint("gpu-gen", value="5"), True),
    ("Gt: taint value equal", tol("gpu-gen", "Gt", "5"), taint("gpu-gen", value="5"), False),
    ("Lt: taint value smaller", tol("gpu-gen", "Lt", "9"), taint("gpu-gen", value="5"), True),
    ("Gt: non-integer taint", tol("gpu-gen", "Gt", "3"), taint("gpu-gen", value="v5"), False),
    ("unknown operator", tol("k", "Matches", "v"), taint("k", value="v"), False),
]


@pytest.mark.parametrize(("toleration", "taint_obj", "ok"), [c[1:] for c in TOLERATION_CASES],
                         ids=[c[0] for c in TOLERATION_CASES])
def test_tolerates(toleration: Obj, taint_obj: Obj, ok: bool) -> None:
    assert tolerates(toleration, taint_obj) is ok


def test_untolerated_effects() -> None:
    taints = [taint("a"), taint("b", "PreferNoSchedule"), taint("c", "NoExecute"), taint("d")]
    assert [t["key"] for t in untolerated(taints, [tol("d", "Exists")])] == ["a", "c"]
    assert [t["key"] for t in untolerated(taints, [], effects=("PreferNoSchedule",))] == ["b"]
    assert untolerated(taints, [tol(op="Exists")]) == []


# ----------------------------------------------------------------------------- node affinity

NODE = mk_node("gpu-1", labels={"gpu": "a100", "nvidia.com/gpu.memory": "40960", ZONE: "a",
                                "weird": "x1"})


def term(*exprs: Obj, fields: list[Obj] | None = None) -> Obj:
    t: Obj = {}
    if exprs:
        t["matchExpressions"] = list(exprs)
    if fields:
        t["matchFields"] = fields
    return t


def ex(key: str, op: str, *values: str) -> Obj:
    e: Obj = {"key": key, "operator": op}
    if values:
        e["values"] = list(values)
    return e


MEM = "nvidia.com/gpu.memory"
SELECTOR_CASES = [
    ("In match", [term(ex("gpu", "In", "h100", "a100"))], True),
    ("In no match", [term(ex("gpu", "In", "h100"))], False),
    ("In on missing label", [term(ex("nope", "In", "x"))], False),
    ("NotIn other value", [term(ex("gpu", "NotIn", "h100"))], True),
    ("NotIn same value", [term(ex("gpu", "NotIn", "a100"))], False),
    ("NotIn on missing label matches", [term(ex("nope", "NotIn", "x"))], True),
    ("Exists", [term(ex("gpu", "Exists"))], True),
    ("Exists missing", [term(ex("nope", "Exists"))], False),
    ("DoesNotExist", [term(ex("nope", "DoesNotExist"))], True),
    ("DoesNotExist present", [term(ex("gpu", "DoesNotExist"))], False),
    ("Gt true", [term(ex(MEM, "Gt", "40000"))], True),
    ("Gt equal is false", [term(ex(MEM, "Gt", "40960"))], False),
    ("Lt true", [term(ex(MEM, "Lt", "81920"))], True),
    ("Lt false", [term(ex(MEM, "Lt", "1024"))], False),
    ("Gt on non-integer label fails", [term(ex("weird", "Gt", "0"))], False),
    ("Gt on missing label fails", [term(ex("nope", "Gt", "0"))], False),
    ("Gt with non-integer value is invalid", [term(ex(MEM, "Gt", "40k"))], False),
    ("Gt with two values is invalid", [term(ex(MEM, "Gt", "1", "2"))], False),
    ("In without values is invalid", [term(ex("gpu", "In"))], False),
    ("Exists with values is invalid", [term(ex("gpu", "Exists", "a100"))], False),
    ("unknown operator", [term(ex("gpu", "Equals", "a100"))], False),
    ("AND inside a term", [term(ex("gpu", "In", "a100"), ex(ZONE, "In", "b"))], False),
    ("OR across terms", [term(ex(ZONE, "In", "b")), term(ex(ZONE, "In", "a"))], True),
    ("invalid term does not poison the others",
     [term(ex(MEM, "Gt", "x")), term(ex("gpu", "Exists"))], True),
    ("empty term matches nothing", [term()], False),
    ("empty term list matches nothing", [], False),
    ("matchFields name In", [term(fields=[ex("metadata.name", "In", "gpu-1")])], True),
    ("matchFields name In other", [term(fields=[ex("metadata.name", "In", "gpu-2")])], False),
    ("matchFields name NotIn", [term(fields=[ex("metadata.name", "NotIn", "gpu-2")])], True),
    ("matchFields needs exactly one value",
     [term(fields=[ex("metadata.name", "In", "gpu-1", "gpu-2")])], False),
    ("matchFields AND labels", [term(ex("gpu", "In", "a100"),
                                     fields=[ex("metadata.name", "In", "gpu-2")])], False),
]


@pytest.mark.parametrize(("terms", "ok"), [c[1:] for c in SELECTOR_CASES],
                         ids=[c[0] for c in SELECTOR_CASES])
def test_match_node_selector_terms(terms: list[Obj], ok: bool) -> None:
    assert match_node_selector_terms(terms, NODE) is ok
    assert match_node_selector_terms({"nodeSelectorTerms": terms}, NODE) is ok


def test_match_fields_ignored_without_node_name() -> None:
    # Upstream builds the field set from the name only; PV checks pass labels only.
    nameless = {"metadata": {"labels": {"gpu": "a100"}}}
    assert match_node_selector_terms([term(fields=[ex("metadata.name", "In", "x")])], nameless)


def required(*terms: Obj) -> Obj:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                             {"nodeSelectorTerms": list(terms)}}}


@pytest.mark.parametrize(("pod", "ok", "label"), [
    (mk_pod(node_selector={"gpu": "a100"}), True, None),
    (mk_pod(node_selector={"gpu": "h100"}), False, "gpu"),
    (mk_pod(node_selector={"gpu": "a100", "pool": "train"}), False, "pool"),
    (mk_pod(affinity=required(term(ex(MEM, "Gt", "81000")))), False, MEM),
    (mk_pod(node_selector={"gpu": "a100"}, affinity=required(term(ex(ZONE, "In", "b")))),
     False, ZONE),
    (mk_pod(affinity=required(term(fields=[ex("metadata.name", "In", "gpu-9")]))), False,
     "metadata.name"),
    (mk_pod(affinity={"nodeAffinity": {}}), True, None),
])
def test_node_matches_pod(pod: Obj, ok: bool, label: str | None) -> None:
    matched, reason = node_matches_pod(pod, NODE)
    assert matched is ok
    assert (reason is None) is ok
    miss = NodeAffinity(pod).mismatch(NODE)
    assert (miss[0] if miss else None) == label


# ----------------------------------------------------------------------------- simulate: one node

CORDON_TAINT = taint("node.kubernetes.io/unschedulable")
NOT_READY_NS = taint("node.kubernetes.io/not-ready")
NOT_READY_NE = taint("node.kubernetes.io/not-ready", "NoExecute")
DEFAULT_TOLS = [tol("node.kubernetes.io/not-ready", "Exists", effect="NoExecute", seconds=300),
                tol("node.kubernetes.io/unreachable", "Exists", effect="NoExecute", seconds=300)]
BURSTABLE = {"cpu": "1", "memory": "1Gi"}

# (id, pod, node, pods on the node, [(filter, detail)], fits, feasible)
# detail: resource for NodeResourcesFit, label for NodeAffinity/VolumeNodeAffinity,
# taint key for taint-based verdicts, None otherwise.
SINGLE_NODE_CASES: list[tuple[str, Obj, Obj, list[Obj], list[tuple[str, str | None]], bool,
                              bool]] = [
    ("fits", mk_pod(requests=GPU4), mk_node(), [], [], True, True),
    ("NodeName other node", mk_pod(node="n2"), mk_node(), [], [("NodeName", None)], False, False),
    ("NodeName this node", mk_pod(node="n1"), mk_node(), [], [], True, True),
    ("nominatedNodeName filters nothing", {**mk_pod(), "status": {
        "phase": "Pending", "nominatedNodeName": "n2"}}, mk_node(), [], [], True, True),
    # cordon
    ("cordoned", mk_pod(), mk_node(unschedulable=True), [], [("NodeUnschedulable", None)],
     False, False),
    ("cordoned with taint", mk_pod(), mk_node(unschedulable=True, taints=[CORDON_TAINT]), [],
     [("NodeUnschedulable", "node.kubernetes.io/unschedulable")], False, False),
    ("cordoned, tolerated", mk_pod(tolerations=[tol("node.kubernetes.io/unschedulable",
                                                    "Exists", effect="NoSchedule")]),
     mk_node(unschedulable=True, taints=[CORDON_TAINT]), [], [], True, True),
    ("cordoned, tolerate-everything", mk_pod(tolerations=[tol(op="Exists")]),
     mk_node(unschedulable=True, taints=[CORDON_TAINT, taint("dedicated", value="x")]),
     [], [], True, True),
    ("cordon taint without spec.unschedulable", mk_pod(), mk_node(taints=[CORDON_TAINT]), [],
     [("NodeUnschedulable", "node.kubernetes.io/unschedulable")], False, False),
    # readiness
    ("NotReady by condition", mk_pod(tolerations=DEFAULT_TOLS),
     mk_node(conditions={"Ready": "False"}), [], [("NodeReady", None)], False, False),
    ("Ready Unknown by condition", mk_pod(), mk_node(conditions={"Ready": "Unknown"}), [],
     [("NodeReady", None)], False, False),
    ("NotReady by taint (condition True)", mk_pod(), mk_node(taints=[NOT_READY_NS]), [],
     [("NodeReady", "node.kubernetes.io/not-ready")], False, False),
    ("NotReady taints, default NoExecute tolerations do not cover NoSchedule",
     mk_pod(tolerations=DEFAULT_TOLS),
     mk_node(conditions={"Ready": "False"}, taints=[NOT_READY_NS, NOT_READY_NE]), [],
     [("NodeReady", "node.kubernetes.io/not-ready")], False, False),
    ("NotReady tolerated", mk_pod(tolerations=[tol("node.kubernetes.io/not-ready", "Exists")]),
     mk_node(conditions={"Ready": "False"}, taints=[NOT_READY_NS, NOT_READY_NE]), [], [],
     True, True),
    ("unreachable: condition Unknown plus both taints", mk_pod(tolerations=DEFAULT_TOLS),
     mk_node(conditions={"Ready": "Unknown"},
             taints=[taint("node.kubernetes.io/unreachable"),
                     taint("node.kubernetes.io/unreachable", "NoExecute")]), [],
     [("NodeReady", "node.kubernetes.io/unreachable")], False, False),
    ("no Ready condition reported", mk_pod(), mk_node(conditions={}), [], [], True, True),
    ("network unavailable taint", mk_pod(),
     mk_node(taints=[taint("node.kubernetes.io/network-unavailable")]), [],
     [("NodeReady", "node.kubernetes.io/network-unavailable")], False, False),
    # pressure
    ("disk pressure taint", mk_pod(requests=BURSTABLE),
     mk_node(taints=[taint("node.kubernetes.io/disk-pressure")]), [],
     [("NodePressure", "node.kubernetes.io/disk-pressure")], False, False),
    ("memory pressure taint blocks a Burstable pod too", mk_pod(requests=BURSTABLE),
     mk_node(taints=[taint("node.kubernetes.io/memory-pressure")],
             conditions={"Ready": "True", "MemoryPressure": "True"}), [],
     [("NodePressure", "node.kubernetes.io/memory-pressure")], False, False),
    ("memory pressure taint tolerated", mk_pod(requests=BURSTABLE, tolerations=[
        tol("node.kubernetes.io/memory-pressure", "Exists", effect="NoSchedule")]),
     mk_node(taints=[taint("node.kubernetes.io/memory-pressure")],
             conditions={"Ready": "True", "MemoryPressure": "True"}), [], [], True, True),
    ("MemoryPressure condition only: BestEffort rejected", mk_pod(),
     mk_node(conditions={"Ready": "True", "MemoryPressure": "True"}), [],
     [("NodePressure", None)], False, False),
    ("MemoryPressure condition only: Burstable admitted", mk_pod(requests=BURSTABLE),
     mk_node(conditions={"Ready": "True", "MemoryPressure": "True"}), [], [], True, True),
    ("PIDPressure condition only: every pod", mk_pod(requests=BURSTABLE),
     mk_node(conditions={"Ready": "True", "PIDPressure": "True"}), [],
     [("NodePressure", None)], False, False),
    ("pressure False", mk_pod(), mk_node(conditions={"Ready": "True", "DiskPressure": "False"}),
     [], [], True, True),
    # node affinity
    ("nodeSelector mismatch", mk_pod(node_selector={"nvidia.com/gpu.product": "H100"}),
     mk_node(labels={"nvidia.com/gpu.product": "A100"}), [],
     [("NodeAffinity", "nvidia.com/gpu.product")], False, False),
    ("required affinity Gt on GPU memory", mk_pod(affinity=required(term(ex(MEM, "Gt", "50000")))),
     mk_node(labels={MEM: "40960"}), [], [("NodeAffinity", MEM)], False, False),
    ("required affinity matches", mk_pod(affinity=required(term(ex(MEM, "Gt", "30000")))),
     mk_node(labels={MEM: "40960"}), [], [], True, True),
    # taints
    ("NoSchedule taint", mk_pod(), mk_node(taints=[taint("nvidia.com/gpu", value="present")]), [],
     [("TaintToleration", "nvidia.com/gpu")], False, False),
    ("NoExecute taint", mk_pod(), mk_node(taints=[taint("maint", "NoExecute")]), [],
     [("TaintToleration", "maint")], False, False),
    ("PreferNoSchedule never rejects", mk_pod(),
     mk_node(taints=[taint("spot", "PreferNoSchedule")]), [], [], True, True),
    ("Exists toleration", mk_pod(tolerations=[tol("nvidia.com/gpu", "Exists")]),
     mk_node(taints=[taint("nvidia.com/gpu", value="present")]), [], [], True, True),
    ("Equal toleration, wrong value", mk_pod(tolerations=[tol("dedicated", "Equal", "infer")]),
     mk_node(taints=[taint("dedicated", value="train")]), [],
     [("TaintToleration", "dedicated")], False, False),
    ("Equal toleration, wrong effect",
     mk_pod(tolerations=[tol("dedicated", value="train", effect="NoExecute")]),
     mk_node(taints=[taint("dedicated", value="train")]), [],
     [("TaintToleration", "dedicated")], False, False),
    ("every untolerated taint reported", mk_pod(),
     mk_node(taints=[taint("a"), taint("b", "NoExecute"), taint("c", "PreferNoSchedule")]), [],
     [("TaintToleration", "a"), ("TaintToleration", "b")], False, False),
    # resources
    ("insufficient GPU", mk_pod(requests=GPU4), mk_node(),
     [mk_pod("a", node="n1", phase="Running", requests={"nvidia.com/gpu": "6"})],
     [("NodeResourcesFit", "nvidia.com/gpu")], False, True),
    ("GPU limit counts as request", mk_pod(limits={"nvidia.com/gpu": "2"}),
     mk_node(alloc={"pods": "110", "nvidia.com/gpu": "2"}), [], [], True, True),
    ("GPU limit counts as request: too many", mk_pod(limits={"nvidia.com/gpu": "4"}),
     mk_node(alloc={"pods": "110", "nvidia.com/gpu": "2"}), [],
     [("NodeResourcesFit", "nvidia.com/gpu")], False, True),
    ("node without the GPU resource", mk_pod(requests={"nvidia.com/gpu": "1"}),
     mk_node(alloc={"cpu": "8", "memory": "16Gi", "pods": "110"}), [],
     [("NodeResourcesFit", "nvidia.com/gpu")], False, True),
    ("terminated pods free their GPUs", mk_pod(requests=GPU4), mk_node(),
     [mk_pod("done", node="n1", phase="Succeeded", requests={"nvidia.com/gpu": "8"}),
      mk_pod("crashed", node="n1", phase="Failed", requests={"nvidia.com/gpu": "8"})],
     [], True, True),
    ("the target pod itself is not counted",
     mk_pod(requests={"nvidia.com/gpu": "8"}, uid="me"), mk_node(),
     [mk_pod(node="n1", phase="Running", requests={"nvidia.com/gpu": "8"}, uid="me")],
     [], True, True),
    ("hugepages", mk_pod(requests={"hugepages-1Gi": "4Gi"}),
     mk_node(alloc={"pods": "110", "hugepages-1Gi": "2Gi"}), [],
     [("NodeResourcesFit", "hugepages-1Gi")], False, True),
    ("pod count", mk_pod(), mk_node(alloc={"pods": "2"}),
     [mk_pod("a", node="n1", phase="Running"), mk_pod("b", node="n1", phase="Running")],
     [("NodeResourcesFit", "pods")], False, True),
    ("pod count ignores terminated pods", mk_pod(), mk_node(alloc={"pods": "2"}),
     [mk_pod("a", node="n1", phase="Running"), mk_pod("b", node="n1", phase="Succeeded")],
     [], True, True),
    ("zero-request pod on an overcommitted node", mk_pod(requests={"cpu": "0"}),
     mk_node(alloc={"cpu": "1", "pods": "110"}),
     [mk_pod("a", node="n1", phase="Running", requests={"cpu": "2"})], [], True, True),
    ("cpu sums do not drift", mk_pod(requests={"cpu": "300m"}),
     mk_node(alloc={"cpu": "1", "pods": "110"}),
     [mk_pod(f"p{i}", node="n1", phase="Running", requests={"cpu": "100m"}) for i in range(7)],
     [], True, True),
    ("cpu one millicore short", mk_pod(requests={"cpu": "301m"}),
     mk_node(alloc={"cpu": "1", "pods": "110"}),
     [mk_pod(f"p{i}", node="n1", phase="Running", requests={"cpu": "100m"}) for i in range(7)],
     [("NodeResourcesFit", "cpu")], False, True),
    ("init container needs more GPUs than the node has free",
     mk_pod(requests={"nvidia.com/gpu": "1"}, init=[{"name": "warm", "resources": {
         "requests": {"nvidia.com/gpu": "4"}}}]), mk_node(),
     [mk_pod("a", node="n1", phase="Running", requests={"nvidia.com/gpu": "6"})],
     [("NodeResourcesFit", "nvidia.com/gpu")], False, True),
    ("overhead pushes memory over", mk_pod(requests={"memory": "15Gi"},
                                           overhead={"memory": "2Gi"}),
     mk_node(alloc={"memory": "16Gi", "pods": "110"}), [],
     [("NodeResourcesFit", "memory")], False, True),
    ("several resources short", mk_pod(requests={"cpu": "40", "nvidia.com/gpu": "9"}), mk_node(),
     [], [("NodeResourcesFit", "cpu"), ("NodeResourcesFit", "nvidia.com/gpu")], False, True),
    # host ports
    ("hostPort conflict", mk_pod(ports=[{"containerPort": 80, "hostPort": 8080}]), mk_node(),
     [mk_pod("web", node="n1", phase="Running",
             ports=[{"containerPort": 80, "hostPort": 8080}])],
     [("NodePorts", None)], False, False),
    ("hostPort other protocol", mk_pod(ports=[{"hostPort": 8080, "protocol": "UDP"}]), mk_node(),
     [mk_pod("web", node="n1", phase="Running", ports=[{"hostPort": 8080}])], [], True, True),
    ("hostPort different specific IPs",
     mk_pod(ports=[{"hostPort": 8080, "hostIP": "10.0.0.1"}]), mk_node(),
     [mk_pod("web", node="n1", phase="Running", ports=[{"hostPort": 8080, "hostIP": "10.0.0.2"}])],
     [], True, True),
    ("hostPort specific IP vs 0.0.0.0",
     mk_pod(ports=[{"hostPort": 8080, "hostIP": "10.0.0.1"}]), mk_node(),
     [mk_pod("web", node="n1", phase="Running", ports=[{"hostPort": 8080}])],
     [("NodePorts", None)], False, False),
    ("hostPort of a running sidecar init container", mk_pod(ports=[{"hostPort": 9100}]),
     mk_node(), [mk_pod("exporter", node="n1", phase="Running", init=[
         {"name": "side", "restartPolicy": "Always", "ports": [{"hostPort": 9100}]}])],
     [("NodePorts", None)], False, False),
    ("hostPort of a finished regular init container", mk_pod(ports=[{"hostPort": 9100}]),
     mk_node(), [mk_pod("job", node="n1", phase="Running", init=[
         {"name": "setup", "ports": [{"hostPort": 9100}]}])], [], True, True),
    ("hostPort held by a terminated pod", mk_pod(ports=[{"hostPort": 8080}]), mk_node(),
     [mk_pod("web", node="n1", phase="Failed", ports=[{"hostPort": 8080}])], [], True, True),
    # all filters run
    ("every failing filter is reported",
     mk_pod(requests={"nvidia.com/gpu": "4"}, node_selector={"pool": "train"}),
     mk_node(unschedulable=True, taints=[CORDON_TAINT, taint("dedicated", value="x")],
             labels={"pool": "infer"}),
     [mk_pod("a", node="n1", phase="Running", requests={"nvidia.com/gpu": "8"})],
     [("NodeUnschedulable", "node.kubernetes.io/unschedulable"), ("NodeAffinity", "pool"),
      ("TaintToleration", "dedicated"), ("NodeResourcesFit", "nvidia.com/gpu")], False, False),
]


def _detail(r: Any) -> str | None:
    if r.filter == "NodeResourcesFit":
        return str(r.resource)
    if r.filter in ("NodeAffinity", "VolumeNodeAffinity"):
        return r.label  # type: ignore[no-any-return]
    if r.taint is not None:
        return str(r.taint["key"])
    return None


@pytest.mark.parametrize(("pod", "node", "others", "want", "fits", "feasible"),
                         [c[1:] for c in SINGLE_NODE_CASES], ids=[c[0] for c in SINGLE_NODE_CASES])
def test_single_node(pod: Obj, node: Obj, others: list[Obj], want: list[tuple[str, str | None]],
                     fits: bool, feasible: bool) -> None:
    fit = one(pod, node, others)
    assert [(r.filter, _detail(r)) for r in fit.rejections] == want
    assert fit.fits is fits
    assert fit.feasible is feasible


def test_resource_numbers() -> None:
    fit = one(mk_pod(requests=GPU4), mk_node(),
              [mk_pod("a", node="n1", phase="Running", requests={"nvidia.com/gpu": "6"},
                      ns="team"),
               mk_pod("b", node="n1", phase="Running", requests={"cpu": "1"}, ns="team")])
    (r,) = fit.rejections
    assert (r.resource, r.requested, r.free, r.allocatable) == ("nvidia.com/gpu", 4.0, 2.0, 8.0)
    assert fit.allocatable["nvidia.com/gpu"] == 8.0
    assert fit.requested["nvidia.com/gpu"] == 6.0
    assert fit.requested["pods"] == 2.0
    assert fit.free["nvidia.com/gpu"] == 2.0
    assert fit.free["cpu"] == 31.0
    assert fit.free["pods"] == 108.0
    assert fit.holders == [("team/a", 6.0)]


def test_pod_count_numbers() -> None:
    fit = one(mk_pod(), mk_node(alloc={"pods": "1"}), [mk_pod("a", node="n1", phase="Running")])
    (r,) = fit.rejections
    assert (r.resource, r.requested, r.free, r.allocatable) == ("pods", 1.0, 0.0, 1.0)


def test_holders_follow_gpu_resource() -> None:
    others = [mk_pod("a", node="n1", phase="Running", requests={"nvidia.com/gpu": "2"}),
              mk_pod("b", node="n1", phase="Running", requests={"nvidia.com/gpu": "5"}),
              mk_pod("m", node="n1", phase="Running", requests={"nvidia.com/mig-1g.5gb": "3"}),
              mk_pod("z", node="n1", phase="Succeeded", requests={"nvidia.com/gpu": "1"})]
    node = mk_node(alloc={"pods": "110", "nvidia.com/gpu": "8", "nvidia.com/mig-1g.5gb": "7"})
    assert one(mk_pod(requests={"nvidia.com/gpu": "1"}), node, others).holders == [
        ("ml/b", 5.0), ("ml/a", 2.0)]
    mig = mk_pod(requests={"nvidia.com/mig-1g.5gb": "1"})
    assert one(mig, node, others).holders == [("ml/m", 3.0)]
    assert one(mk_pod(), node, others, gpu_resource="nvidia.com/mig-1g.5gb").holders == [
        ("ml/m", 3.0)]


# ----------------------------------------------------------------------------- inter-pod affinity


def anti(key: str, labels: dict[str, str], **extra: Any) -> Obj:
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": labels}, "topologyKey": key, **extra}]}}


def aff(key: str, labels: dict[str, str], **extra: Any) -> Obj:
    return {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": labels}, "topologyKey": key, **extra}]}}


# Three nodes: a1, a2 in zone a; b1 in zone b; "bare" has no zone label.
CLUSTER = [mk_node("a1", labels={ZONE: "a"}), mk_node("a2", labels={ZONE: "a"}),
           mk_node("b1", labels={ZONE: "b"}), mk_node("bare")]

# (id, pod, {node: [pods]}, namespaces_labels, nodes rejected by InterPodAffinity)
AFFINITY_CASES: list[tuple[str, Obj, dict[str, list[Obj]], Any, set[str]]] = [
    ("anti-affinity by hostname", mk_pod(labels={"app": "w"}, affinity=anti(HOST, {"app": "w"})),
     {"a1": [mk_pod("w0", labels={"app": "w"}, node="a1", phase="Running")]}, None, {"a1"}),
    ("anti-affinity by zone", mk_pod(labels={"app": "w"}, affinity=anti(ZONE, {"app": "w"})),
     {"a1": [mk_pod("w0", labels={"app": "w"}, node="a1", phase="Running")]}, None,
     {"a1", "a2"}),
    ("anti-affinity ignores other namespaces by default",
     mk_pod(labels={"app": "w"}, affinity=anti(HOST, {"app": "w"})),
     {"a1": [mk_pod("w0", ns="other", labels={"app": "w"}, node="a1", phase="Running")]}, None,
     set()),
    ("anti-affinity with namespaces list",
     mk_pod(labels={"app": "w"}, affinity=anti(HOST, {"app": "w"}, namespaces=["other"])),
     {"a1": [mk_pod("w0", ns="other", labels={"app": "w"}, node="a1", phase="Running")]}, None,
     {"a1"}),
    ("anti-affinity with empty namespaceSelector = all namespaces",
     mk_pod(labels={"app": "w"}, affinity=anti(HOST, {"app": "w"}, namespaceSelector={})),
     {"a1": [mk_pod("w0", ns="other", labels={"app": "w"}, node="a1", phase="Running")]}, None,
     {"a1"}),
    ("anti-affinity with labelled namespaceSelector",
     mk_pod(labels={"app": "w"}, affinity=anti(
         HOST, {"app": "w"}, namespaceSelector={"matchLabels": {"team": "ml"}})),
     {"a1": [mk_pod("w0", ns="other", labels={"app": "w"}, node="a1", phase="Running")],
      "a2": [mk_pod("w1", ns="ml2", labels={"app": "w"}, node="a2", phase="Running")]},
     {"other": {"team": "web"}, "ml2": {"team": "ml"}}, {"a2"}),
    ("anti-affinity ignores terminated pods",
     mk_pod(labels={"app": "w"}, affinity=anti(HOST, {"app": "w"})),
     {"a1": [mk_pod("w0", labels={"app": "w"}, node="a1", phase="Succeeded")]}, None, set()),
    ("anti-affinity: node without the topology label passes",
     mk_pod(labels={"app": "w"}, affinity=anti(ZONE, {"app": "w"})),
     {"bare": [mk_pod("w0", labels={"app": "w"}, node="bare", phase="Running")]}, None, set()),
    ("existing pod's anti-affinity (symmetric)", mk_pod(labels={"app": "web"}),
     {"a1": [mk_pod("db", labels={"app": "db"}, node="a1", phase="Running",
                    affinity=anti(HOST, {"app": "web"}))]}, None, {"a1"}),
    ("existing pod's zone anti-affinity (symmetric)", mk_pod(labels={"app": "web"}),
     {"b1": [mk_pod("db", labels={"app": "db"}, node="b1", phase="Running",
                    affinity=anti(ZONE, {"app": "web"}))]}, None, {"b1"}),
    ("existing pod's anti-affinity, other namespace by default", mk_pod(labels={"app": "web"}),
     {"a1": [mk_pod("db", ns="db", labels={"app": "db"}, node="a1", phase="Running",
                    affinity=anti(HOST, {"app": "web"}))]}, None, set()),
    ("pod affinity to a zone", mk_pod(affinity=aff(ZONE, {"app": "db"})),
     {"b1": [mk_pod("db", labels={"app": "db"}, node="b1", phase="Running")]}, None,
     {"a1", "a2", "bare"}),
    ("pod affinity, no match anywhere", mk_pod(affinity=aff(ZONE, {"app": "db"})),
     {"b1": [mk_pod("x", labels={"app": "x"}, node="b1", phase="Running")]}, None,
     {"a1", "a2", "b1", "bare"}),
    ("pod affinity to itself, first of its group", mk_pod(labels={"app": "db"},
                                                          affinity=aff(ZONE, {"app": "db"})),
     {}, None, {"bare"}),
    ("matchLabelKeys narrows the selector",
     mk_pod(labels={"app": "w", "rev": "2"},
            affinity=anti(HOST, {"app": "w"}, matchLabelKeys=["rev"])),
     {"a1": [mk_pod("old", labels={"app": "w", "rev": "1"}, node="a1", phase="Running")],
      "a2": [mk_pod("new", labels={"app": "w", "rev": "2"}, node="a2", phase="Running")]},
     None, {"a2"}),
]


@pytest.mark.parametrize(("pod", "placed", "ns_labels", "rejected"),
                         [c[1:] for c in AFFINITY_CASES], ids=[c[0] for c in AFFINITY_CASES])
def test_inter_pod_affinity(pod: Obj, placed: dict[str, list[Obj]], ns_labels: Any,
                            rejected: set[str]) -> None:
    fits = simulate(pod, CLUSTER, placed, namespaces_labels=ns_labels)
    got = {f.node for f in fits if "InterPodAffinity" in filters(f)}
    assert got == rejected
    for f in fits:
        assert f.feasible is (f.node not in rejected)
    by_name = {n["metadata"]["name"]: n for n in CLUSTER}
    for n in CLUSTER:
        why = check_pod_affinity(pod, n, by_name, placed, ns_labels)
        assert (why is not None) is (n["metadata"]["name"] in rejected)


# ----------------------------------------------------------------------------- volumes

PVC_VOL = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]


def pvc(name: str, volume: str | None, ns: str = "ml") -> Obj:
    spec: Obj = {"volumeName": volume} if volume else {}
    return {"kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": ns},
            "spec": spec, "status": {"phase": "Bound" if volume else "Pending"}}


def pv(name: str, zone: str) -> Obj:
    return {"kind": "PersistentVolume", "metadata": {"name": name},
            "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": ZONE, "operator": "In", "values": [zone]}]}]}}}}


@pytest.mark.parametrize(("pod", "pvcs", "pvs", "rejected"), [
    (mk_pod(volumes=PVC_VOL), [pvc("data", "pv-a")], [pv("pv-a", "a")], {"b1", "bare"}),
    (mk_pod(volumes=PVC_VOL), [pvc("data", "pv-b")], [pv("pv-b", "b")], {"a1", "a2", "bare"}),
    (mk_pod(volumes=PVC_VOL), [pvc("data", None)], [pv("pv-a", "a")], set()),  # unbound
    (mk_pod(volumes=PVC_VOL), [pvc("data", "pv-a", ns="other")], [pv("pv-a", "a")], set()),
    (mk_pod(volumes=[{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {}}}]),
     [pvc("train-scratch", "pv-a")], [pv("pv-a", "a")], {"b1", "bare"}),
    (mk_pod(), [pvc("data", "pv-a")], [pv("pv-a", "a")], set()),
])
def test_volume_node_affinity(pod: Obj, pvcs: list[Obj], pvs: list[Obj],
                              rejected: set[str]) -> None:
    fits = simulate(pod, CLUSTER, {}, pvcs=pvcs, pvs=pvs)
    got = {f.node for f in fits if "VolumeNodeAffinity" in filters(f)}
    assert got == rejected
    for f in fits:
        for r in f.rejections:
            assert r.filter == "VolumeNodeAffinity" and r.label == ZONE


def test_pv_affinity_ignores_match_fields() -> None:
    vol = pv("pv-x", "a")
    vol["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"] = [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a1"]}]}]
    fits = simulate(mk_pod(volumes=PVC_VOL), CLUSTER, {}, pvcs=[pvc("data", "pv-x")], pvs=[vol])
    assert all(f.fits for f in fits)


# ----------------------------------------------------------------------------- scale


def _kubectl_bulk(p: Obj, j: int) -> None:
    """What `kubectl get pod -o json` carries besides the fields the filters read."""
    p["metadata"].update({
        "resourceVersion": str(1000 + j), "creationTimestamp": "2026-01-01T00:00:00Z",
        "generateName": "p-", "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                                  "name": "rs", "uid": "rs-uid",
                                                  "controller": True}],
        "managedFields": [{"manager": m, "operation": "Update", "apiVersion": "v1",
                           "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:containers": {
                               'k:{"name":"main"}': {".": {}, "f:image": {}}}}}}
                          for m in ("kube-controller-manager", "kubelet")]})
    for c in p["spec"]["containers"]:
        c.update({"image": "registry/img:1", "env": [{"name": f"E{i}", "value": "v"}
                                                     for i in range(4)],
                  "volumeMounts": [{"name": "kube-api", "mountPath": "/var/run/secrets"}]})
    p["spec"].update({"volumes": [{"name": "kube-api", "projected": {"sources": [
        {"serviceAccountToken": {"path": "token"}}]}}], "serviceAccountName": "default"})
    p["status"].update({
        "qosClass": "Burstable", "podIP": "10.0.0.1",
        "conditions": [{"type": t, "status": "True"} for t in
                       ("Initialized", "Ready", "ContainersReady", "PodScheduled")],
        "containerStatuses": [{"name": c["name"], "ready": True, "restartCount": 0,
                               "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
                               "resources": {"requests": c["resources"].get("requests", {})}}
                              for c in p["spec"]["containers"]]})


def _cluster(n_nodes: int, n_pods: int, seed: int = 7) -> tuple[list[Obj], dict[str, list[Obj]]]:
    rnd = random.Random(seed)
    nodes = []
    for i in range(n_nodes):
        gpu = i % 2 == 0
        labels = {ZONE: f"z{i % 3}", "node.kubernetes.io/instance-type": "p4d" if gpu else "m5"}
        if gpu:
            labels["nvidia.com/gpu.product"] = rnd.choice(["A100", "H100"])
        taints = [taint("nvidia.com/gpu", value="present")] if gpu else []
        alloc = {"cpu": "95", "memory": "1100Gi", "pods": "110", "ephemeral-storage": "1Ti",
                 **({"nvidia.com/gpu": "8"} if gpu else {})}
        nodes.append(mk_node(f"node-{i}", alloc=alloc, labels=labels, taints=taints,
                             conditions={"Ready": "True", "MemoryPressure": "False",
                                         "DiskPressure": "False", "PIDPressure": "False"}))
    by_node: dict[str, list[Obj]] = defaultdict(list)
    for j in range(n_pods):
        n = nodes[j % n_nodes]
        name = n["metadata"]["name"]
        req = {"cpu": f"{rnd.randint(1, 20) * 100}m", "memory": f"{rnd.randint(1, 16)}Gi"}
        if "nvidia.com/gpu" in n["status"]["allocatable"] and j % 4 == 0:
            req["nvidia.com/gpu"] = "1"
        p = mk_pod(f"p-{j}", ns=f"ns-{j % 40}", requests=req, node=name, phase="Running",
                   labels={"app": f"app-{j % 100}"}, uid=f"uid-{j}")
        p["spec"]["containers"].append({"name": "sidecar", "resources": {
            "requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}}})
        _kubectl_bulk(p, j)
        if j % 500 == 0:
            p["spec"]["affinity"] = anti(HOST, {"app": p["metadata"]["labels"]["app"]})
        by_node[name].append(p)
    return nodes, dict(by_node)


@pytest.fixture
def diagnosing() -> Diagnosing:
    """Memos current for the test, as during a diagnosis: what is worked out is kept."""
    return Diagnosing()


def test_large_cluster_cached_and_fresh_results_agree(diagnosing: Diagnosing) -> None:
    # Speed is measured in bench/, never here; this checks the per-pod cache gives the same
    # verdicts on a second run as on a cold one.
    nodes, by_node = _cluster(200, 3_000)
    target = mk_pod("big", requests={"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "8"},
                    tolerations=[tol("nvidia.com/gpu", "Exists")],
                    node_selector={"nvidia.com/gpu.product": "H100"},
                    labels={"app": "app-0"}, affinity=anti(ZONE, {"app": "nothing"}))
    fits = simulate(target, nodes, by_node)  # cold: the fixture's memos are new
    again = simulate(copy.deepcopy(target), nodes, by_node)
    assert len(fits) == 200
    assert any(f.fits for f in fits)
    assert [(f.node, f.fits, f.free) for f in fits] == [(f.node, f.fits, f.free) for f in again]


# ----------------------------------------------------------------------------- NodeInfo


def _api(obj: Obj, uid: str) -> Obj:
    """The object as the API serves it: with a uid, so results about it are remembered."""
    obj["metadata"]["uid"] = uid
    return obj


def test_node_info_is_remembered_for_the_same_objects_and_redone_when_one_changes(
        diagnosing: Diagnosing) -> None:
    from handlers.scheduler.nodeinfo import node_info

    node = _api(mk_node("ni-1"), "node-ni-1")
    a = _api(mk_pod("a", node="ni-1", phase="Running", requests=GPU4), "pod-a")
    b = _api(mk_pod("b", node="ni-1", phase="Running", requests={"nvidia.com/gpu": "2"}), "pod-b")
    first = node_info(node, [a, b])
    assert node_info(node, [a, b]) is first  # a new list, the same objects
    assert first.free["nvidia.com/gpu"] == 2 and first.requested["pods"] == 2
    # The watch cache replaces a changed pod with a new object: the info is redone.
    b2 = _api(mk_pod("b", node="ni-1", phase="Succeeded", requests={"nvidia.com/gpu": "2"}),
              "pod-b")
    second = node_info(node, [a, b2])
    assert second is not first and second.free["nvidia.com/gpu"] == 4
    assert node_info(node, [a]) is not second  # a pod left
    # Objects without a uid (templates, fixtures) may be edited in place: never remembered.
    bare = mk_node("ni-2")
    assert node_info(bare, []) is not node_info(bare, [])


def test_fits_are_reused_while_node_and_pods_stay_and_follow_what_the_pod_asks(
        diagnosing: Diagnosing) -> None:
    node = _api(mk_node("fr-1", taints=[taint("nvidia.com/gpu")]), "node-fr-1")
    holder = _api(mk_pod("holder", node="fr-1", phase="Running", requests=GPU4), "pod-holder")
    by_node = {"fr-1": [holder]}
    tolerating = mk_pod("t", requests=GPU4, tolerations=[tol("nvidia.com/gpu", "Exists")])
    plain = mk_pod("p", requests=GPU4)
    first = simulate(tolerating, [node], by_node)[0]
    assert first.fits and first.free["nvidia.com/gpu"] == 4
    assert simulate(copy.deepcopy(tolerating), [node], {"fr-1": [holder]})[0] is first
    other = simulate(plain, [node], by_node)[0]  # asks differently: its own verdict
    assert not other.fits and [r.filter for r in other.rejections] == ["TaintToleration"]
    bigger = _api(mk_pod("holder", node="fr-1", phase="Running",
                         requests={"nvidia.com/gpu": "8"}), "pod-holder")
    after = simulate(tolerating, [node], {"fr-1": [bigger]})[0]
    assert not after.fits and after.free["nvidia.com/gpu"] == 0


def test_node_level_verdicts_outlive_pod_changes_but_not_a_node_change(
        diagnosing: Diagnosing) -> None:
    from handlers.scheduler.nodeinfo import node_info

    node = _api(mk_node("nv-1", taints=[taint("nvidia.com/gpu")]), "node-nv-1")
    holder = _api(mk_pod("holder", node="nv-1", phase="Running", requests=GPU4), "pod-h")
    plain = mk_pod("p", requests=GPU4)  # tolerates nothing
    first = simulate(plain, [node], {"nv-1": [holder]})[0]
    # A pod on the node changed (churn): pods are counted again, the taint verdict is kept.
    bigger = _api(mk_pod("holder", node="nv-1", phase="Running",
                         requests={"nvidia.com/gpu": "8"}), "pod-h")
    after = simulate(plain, [node], {"nv-1": [bigger]})[0]
    assert after is not first and after.free["nvidia.com/gpu"] == 0
    assert [r.filter for r in after.rejections] == ["TaintToleration", "NodeResourcesFit"]
    assert after.rejections[0] is first.rejections[0]
    rebuilt = node_info(node, [bigger])
    assert rebuilt.allocatable is node_info(node, [holder]).allocatable  # not parsed again
    # A new node object (the taint removed): everything about the node is worked out again.
    untainted = _api(mk_node("nv-1"), "node-nv-1")
    fresh = simulate(plain, [untainted], {"nv-1": [bigger]})[0]
    assert [r.filter for r in fresh.rejections] == ["NodeResourcesFit"]


def test_a_running_target_is_not_its_own_neighbour_on_a_remembered_node(
        diagnosing: Diagnosing) -> None:
    node = _api(mk_node("rt-1"), "node-rt-1")
    target = _api(mk_pod("train", node="rt-1", phase="Running", requests=GPU4), "pod-train")
    other = _api(mk_pod("other", node="rt-1", phase="Running",
                        requests={"nvidia.com/gpu": "1"}), "pod-other")
    by_node = {"rt-1": [target, other]}
    probe = mk_pod("probe", requests={"nvidia.com/gpu": "1"})
    assert simulate(probe, [node], by_node)[0].free["nvidia.com/gpu"] == 3  # both counted
    fit = simulate(target, [node], by_node)[0]
    assert fit.free["nvidia.com/gpu"] == 7 and fit.holders == [("ml/other", 1.0)]


def test_verdicts_outlive_a_status_change_of_the_node_s_pods_but_not_a_new_ask(
        diagnosing: Diagnosing) -> None:
    node = _api(mk_node("vs-1"), "node-vs-1")
    holder = _api(mk_pod("holder", node="vs-1", phase="Running", requests=GPU4), "pod-vs-h")
    probe = mk_pod("probe", requests=GPU4)
    first = simulate(probe, [node], {"vs-1": [holder]})[0]
    assert first.fits and first.holders == [("ml/holder", 4.0)]
    # A restart: a new object of the same pod asking the same; the verdict stands.
    restarted = _api(mk_pod("holder", node="vs-1", phase="Running", requests=GPU4), "pod-vs-h")
    restarted["status"]["containerStatuses"] = [{"name": "c", "restartCount": 1}]
    assert simulate(probe, [node], {"vs-1": [restarted]})[0] is first
    # Resized in place: it asks more, the node is judged again.
    resized = _api(mk_pod("holder", node="vs-1", phase="Running",
                          requests={"nvidia.com/gpu": "8"}), "pod-vs-h")
    full = simulate(probe, [node], {"vs-1": [resized]})[0]
    assert not full.fits and full.free["nvidia.com/gpu"] == 0
    # Another pod in its place, asking the same: judged again (its holders differ).
    other = _api(mk_pod("other", node="vs-1", phase="Running", requests=GPU4), "pod-vs-o")
    moved = simulate(probe, [node], {"vs-1": [other]})[0]
    assert moved is not first and moved.holders == [("ml/other", 4.0)]
    # The holder finished: it holds nothing, the node is judged again.
    done = _api(mk_pod("holder", node="vs-1", phase="Succeeded", requests=GPU4), "pod-vs-h")
    freed = simulate(probe, [node], {"vs-1": [done]})[0]
    assert freed.fits and freed.holders == [] and freed.free["nvidia.com/gpu"] == 8
