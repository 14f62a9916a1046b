"""nodes: the GPU ledger per node and per GPU model.

Per node: the GPUs it has and what says so (``handlers/ledger.py``), capacity, allocatable,
allocated (the GPU requests of the non-terminated pods bound to it), free, and lost (it has
them, the scheduler cannot use them); per model the same summed, and what unbound pending pods
ask. GPUs lost lead the diagnosis: GPU_CAPACITY_LOST names how many and where, and the
discovery chain, run on those nodes, finds why (its findings are the causes).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

from handlers import dra, ledger
from handlers.chain import check_chain
from handlers.finish import finish
from handlers.gpu import (
    GPU_RESOURCE,
    gpu_product,
    gpu_resources,
    has_gpu_labels,
    is_device_plugin_pod,
    is_gpu_node,
    name_of,
)
from handlers.grouping import pools_of
from handlers.knowledge.gpu_counts import counts, instance_type_gpus
from handlers.kube.commands import kubectl, pods_on_node
from handlers.kube.resources import pod_requests
from handlers.kube.taints import LIFECYCLE_TAINT_KEYS
from handlers.model import Diagnosis, Finding, Fix, ObjectRef
from handlers.runtime import checks as runtime
from handlers.view import ACTIVE_PODS, Obj, Reader
from handlers.words import counted

PRODUCT_LABELS = ("nvidia.com/gpu.product", "cloud.google.com/gke-accelerator")
LOST = "GPU_CAPACITY_LOST"
_NAMED = 6  # nodes named in the summary
_EVIDENCE_NODES = 20


@dataclass
class NodeRow:
    node: str
    product: str
    capacity: float
    allocatable: float
    allocated: float
    free: float
    ready: bool
    cordoned: bool
    taints: list[str] = field(default_factory=list)
    other_resources: dict[str, float] = field(default_factory=dict)  # MIG profiles, shared
    dra: dict[str, int] | None = None  # DRA GPU devices: published, allocated, free
    physical: int = 0  # the GPUs the node has (0: nothing says)
    physical_at_least: bool = False  # only NFD's PCI label: one or more
    source: str | None = None  # what says how many it has (handlers/ledger.py TRUST)
    lost: int = 0  # has, but the scheduler cannot use
    unhealthy: int = 0  # of lost: advertised, not allocatable
    evidence: list[str] = field(default_factory=list)  # what says how many it has


@dataclass
class ModelRow:
    product: str
    nodes: int = 0
    physical: float = 0
    capacity: float = 0
    allocatable: float = 0
    allocated: float = 0
    free: float = 0
    pending: float = 0
    cordoned: int = 0
    lost: float = 0


def _ready(node: Obj) -> bool:
    for c in node.get("status", {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return bool(c.get("status") == "True")
    return False


def _taint_text(t: dict[str, Any]) -> str:
    v = f"={t['value']}" if t.get("value") else ""
    return f"{t.get('key')}{v}:{t.get('effect')}"


def _pending_product(pod: Obj) -> str:
    """The GPU model a pending pod asks for, when its node selector names one."""
    sel = pod.get("spec", {}).get("nodeSelector") or {}
    for k in PRODUCT_LABELS:
        if k in sel:
            return str(sel[k])
    return "(any model)"


def _dra_counts(reader: Reader, nodes: list[Obj]) -> dict[str, dict[str, int]]:
    """DRA GPU devices per node. A cluster that cannot show ResourceSlices is noted as not
    checked only when some GPU-labelled node advertises no GPU resource (DRA could be why);
    elsewhere the column is simply absent."""
    before = len(reader.unchecked)
    counts = dra.node_counts(reader)
    if len(reader.unchecked) > before and not any(
            has_gpu_labels(n) and not gpu_resources(n, "allocatable") for n in nodes):
        del reader.unchecked[before:]
    return counts


def _product(node: Obj, dra_products: dict[str, str]) -> str:
    """GFD's or the cloud's GPU model; else the DRA devices' or the instance type's family."""
    product = gpu_product(node)
    if product != "unknown":
        return product
    if name_of(node) in dra_products:
        return dra_products[name_of(node)]
    lab = (node.get("metadata") or {}).get("labels") or {}
    it = next((t for k in counts().instance_type_keys
               if (t := instance_type_gpus(str(lab.get(k) or ""))) is not None), None)
    return it.family if it else "unknown"


def _lost_line(row: NodeRow, led: ledger.NodeLedger) -> str:
    offered = [f"capacity {GPU_RESOURCE} {led.capacity:g}",
               f"allocatable {led.allocatable:g}"]
    if led.dra is not None:
        offered.append(f"ResourceSlices publish {led.dra}")
    has = (f"at least {counted(row.physical, 'GPU')}" if row.physical_at_least
           else counted(row.physical, "GPU"))
    said = [c.evidence for c in led.counts if c.source not in ("capacity", "dra")]
    return (f"node {row.node}: has {has}" + (f" ({'; '.join(said)})" if said else "")
            + f", {', '.join(offered)}: {row.lost} lost"
            + (f" ({row.unhealthy} marked unhealthy)" if row.unhealthy else ""))


def lost_finding(lost: list[tuple[NodeRow, ledger.NodeLedger]]) -> Finding:
    """One finding for every GPU the nodes have and the scheduler cannot use; its causes are
    the discovery chain's findings on the same nodes (the card's caused_by)."""
    gpus = sum(r.lost for r, _ in lost)
    named = ", ".join(f"{r.node} offers {r.physical - r.lost} of its {r.physical}"
                      for r, _ in lost[:_NAMED])
    if len(lost) > _NAMED:
        named += f" and {len(lost) - _NAMED} more"
    evidence = [_lost_line(r, led) for r, led in lost[:_EVIDENCE_NODES]]
    evidence += [n for _, led in lost[:_EVIDENCE_NODES] for n in led.notes]
    if len(lost) > _EVIDENCE_NODES:
        evidence.append(f"and {len(lost) - _EVIDENCE_NODES} more nodes")
    fix = Fix("Fix what each node's other findings name (gpubot doctor NODE shows its whole "
              "chain), then check that every GPU is back.", (kubectl(
                  "get", "nodes", "-o", "custom-columns=NODE:.metadata.name,"
                  "CAPACITY:.status.capacity.nvidia\\.com/gpu,"
                  "ALLOCATABLE:.status.allocatable.nvidia\\.com/gpu"),))
    dra_nodes = [r.node for r, led in lost if led.dra is not None]
    if dra_nodes:
        # The DRA driver leaves a device it finds unhealthy out of the slice until it restarts.
        fix = fix.then(Fix(
            "DRA: the driver's kubelet plugin leaves GPUs it finds unhealthy out of its "
            "ResourceSlice (its log says which); once they are repaired, restart it and check "
            "what it publishes.", (kubectl("get", "resourceslices", "--field-selector",
                                           pods_on_node(dra_nodes[0]), "-o", "yaml"),)))
    return Finding(
        LOST, f"{counted(gpus, 'GPU')} lost on {counted(len(lost), 'node')}: {named}.",
        tuple(ObjectRef("Node", r.node) for r, _ in lost), tuple(evidence), fix,
        # A node that offers none of its GPUs is out of service, not short of one.
        conditions=frozenset({"all-unusable"} if any(led.offered == 0 for _, led in lost)
                             else ()))


def run(reader: Reader) -> Diagnosis:
    diag = Diagnosis("nodes", "cluster")
    diag.check("GPU capacity, allocatable and allocation per node")
    diag.check("GPUs each node has (labels, instance type, health agents) against allocatable")
    nodes = reader.list("Node")
    pods = reader.list("Pod", field_selector=ACTIVE_PODS)
    plugin_nodes = {p.get("spec", {}).get("nodeName", "") for p in pods
                    if is_device_plugin_pod(p)}
    allocated: dict[str, float] = defaultdict(float)
    pending: dict[str, float] = defaultdict(float)
    for p in pods:
        gpus = pod_requests(p).get(GPU_RESOURCE, 0.0)
        if not gpus:
            continue
        node = p.get("spec", {}).get("nodeName")
        if node:
            allocated[node] += gpus
        elif p.get("status", {}).get("phase", "Pending") == "Pending":
            pending[_pending_product(p)] += gpus

    dra_counts = _dra_counts(reader, nodes)
    dra_products = dra.node_products(reader) if dra_counts else {}
    dra_gpus = ledger.dra_gpus(dra.devices(reader)) if dra_counts else {}
    rows: list[NodeRow] = []
    lost: list[tuple[NodeRow, ledger.NodeLedger]] = []
    lost_nodes: list[Obj] = []
    models: dict[str, ModelRow] = {}
    for n in sorted(nodes, key=name_of):
        if not is_gpu_node(n, plugin_nodes) and name_of(n) not in dra_counts:
            continue
        name = name_of(n)
        led = ledger.of(n, dra_gpus.get(name))
        alloc = gpu_resources(n, "allocatable")
        taints = [_taint_text(t) for t in n.get("spec", {}).get("taints") or []
                  if t.get("key") not in LIFECYCLE_TAINT_KEYS]
        row = NodeRow(
            node=name, capacity=led.capacity,
            product=_product(n, dra_products),
            allocatable=led.allocatable, allocated=allocated.get(name, 0.0),
            free=max(led.allocatable - allocated.get(name, 0.0), 0.0),
            ready=_ready(n), cordoned=bool(n.get("spec", {}).get("unschedulable")),
            taints=taints,
            other_resources={k: v for k, v in alloc.items() if k != GPU_RESOURCE and v},
            dra=dra_counts.get(name), physical=led.physical, physical_at_least=led.at_least,
            source=led.source, lost=led.lost, unhealthy=led.unhealthy,
            evidence=list(led.evidence),
        )
        rows.append(row)
        if led.lost:
            lost.append((row, led))
            lost_nodes.append(n)
        m = models.setdefault(row.product, ModelRow(row.product))
        m.nodes += 1
        m.physical += row.physical
        m.capacity += row.capacity
        m.allocatable += row.allocatable
        m.allocated += row.allocated
        # Cordoned and NotReady nodes take no new pods: their GPUs are not free.
        m.free += row.free if row.ready and not row.cordoned else 0
        m.cordoned += row.cordoned
        m.lost += row.lost
    if lost:
        diag.add(lost_finding(lost))
        # Why they are lost: the discovery chain's own findings on those nodes.
        report = check_chain(reader, lost_nodes)
        for f in report.findings:
            if f.severity.is_problem:
                diag.add(f)
        for check in report.checks:
            diag.check(check)
        diag.unchecked.extend(report.unchecked)
    for product, demand in pending.items():
        models.setdefault(product, ModelRow(product)).pending += demand
    diag.details["rows"] = [asdict(r) for r in rows]
    diag.details["models"] = [asdict(m) for m in sorted(models.values(),
                                                         key=lambda m: m.product)]
    diag.details["totals"] = {
        "nodes": len(rows),
        "physical": sum(r.physical for r in rows),
        "capacity": sum(r.capacity for r in rows),
        "allocatable": sum(r.allocatable for r in rows),
        "allocated": sum(r.allocated for r in rows),
        "free": sum(m.free for m in models.values()),
        "pending": sum(pending.values()),
        "lost": sum(r.lost for r, _ in lost),
        "lost_nodes": len(lost),
    }
    if dra_counts:
        diag.details["totals"]["dra"] = {
            k: sum(c[k] for c in dra_counts.values()) for k in ("published", "allocated", "free")}
    diag.can_clear = False  # a ledger, not a check of the chain
    runtime.enrich(reader, diag, idle=True, allocation=True)
    diag.unchecked.extend(u for u in reader.unchecked if u not in diag.unchecked)
    diag.withheld = list(reader.withheld)  # what the chain did not claim, and why
    diag.node_pools = pools_of(diag.findings, {name_of(n): n for n in nodes})
    return finish(diag)
