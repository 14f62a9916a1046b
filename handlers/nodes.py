"""nodes: the GPU ledger per node and per GPU model.

capacity / allocatable come from the node; allocated is the sum of GPU requests of the
non-terminated pods bound to it; pending demand is what unbound pending pods ask for.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

from handlers import dra
from handlers.finish import finish
from handlers.gpu import (
    GPU_RESOURCE,
    expected_gpu_count,
    gpu_product,
    gpu_resources,
    has_gpu_labels,
    is_device_plugin_pod,
    is_gpu_node,
    name_of,
)
from handlers.grouping import pools_of
from handlers.kube.resources import pod_requests
from handlers.kube.taints import LIFECYCLE_TAINT_KEYS
from handlers.model import Diagnosis, Finding, ObjectRef
from handlers.runtime import checks as runtime
from handlers.view import ACTIVE_PODS, Obj, Reader

PRODUCT_LABELS = ("nvidia.com/gpu.product", "cloud.google.com/gke-accelerator")


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


@dataclass
class ModelRow:
    product: str
    nodes: int = 0
    capacity: float = 0
    allocatable: float = 0
    allocated: float = 0
    free: float = 0
    pending: float = 0
    cordoned: int = 0
    # GPUs the nodes have (capacity or GFD's gpu.count) but do not offer: unhealthy or not
    # advertised.
    unavailable: float = 0


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


def run(reader: Reader) -> Diagnosis:
    diag = Diagnosis("nodes", "cluster")
    diag.check("GPU capacity, allocatable and allocation per node")
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
    rows: list[NodeRow] = []
    models: dict[str, ModelRow] = {}
    for n in sorted(nodes, key=name_of):
        if not is_gpu_node(n, plugin_nodes) and name_of(n) not in dra_counts:
            continue
        name = name_of(n)
        cap = gpu_resources(n, "capacity")
        alloc = gpu_resources(n, "allocatable")
        taints = [_taint_text(t) for t in n.get("spec", {}).get("taints") or []
                  if t.get("key") not in LIFECYCLE_TAINT_KEYS]
        row = NodeRow(
            node=name, capacity=cap.get(GPU_RESOURCE, 0.0),
            product=(gpu_product(n) if gpu_product(n) != "unknown"
                     else dra_products.get(name, "unknown")),
            allocatable=alloc.get(GPU_RESOURCE, 0.0), allocated=allocated.get(name, 0.0),
            free=max(alloc.get(GPU_RESOURCE, 0.0) - allocated.get(name, 0.0), 0.0),
            ready=_ready(n), cordoned=bool(n.get("spec", {}).get("unschedulable")),
            taints=taints,
            other_resources={k: v for k, v in alloc.items() if k != GPU_RESOURCE and v},
            dra=dra_counts.get(name),
        )
        rows.append(row)
        m = models.setdefault(row.product, ModelRow(row.product))
        m.nodes += 1
        m.capacity += row.capacity
        m.allocatable += row.allocatable
        m.allocated += row.allocated
        # Cordoned and NotReady nodes take no new pods: their GPUs are not free.
        m.free += row.free if row.ready and not row.cordoned else 0
        m.cordoned += row.cordoned
        m.unavailable += max(row.capacity, float(expected_gpu_count(n) or 0)) - row.allocatable
        if row.capacity > row.allocatable:
            diag.add(Finding(
                "GPU_UNHEALTHY",
                f"{name} advertises {row.allocatable:g} of its {row.capacity:g} GPUs.",
                (ObjectRef("Node", name),),
                (f"capacity nvidia.com/gpu: {row.capacity:g}",
                 f"allocatable nvidia.com/gpu: {row.allocatable:g}"),
                # No restart offered here: only doctor reads the logs that tell a hardware
                # fault (drain and repair) from a plugin that can re-check its devices.
                f"gpubot doctor {name}",
                conditions=frozenset({"all-unusable"} if not row.allocatable else ()),
            ))
    for product, demand in pending.items():
        if product in models:
            models[product].pending += demand
        else:
            models.setdefault(product, ModelRow(product)).pending += demand
    diag.details["rows"] = [asdict(r) for r in rows]
    diag.details["models"] = [asdict(m) for m in sorted(models.values(),
                                                         key=lambda m: m.product)]
    diag.details["totals"] = {
        "nodes": len(rows),
        "capacity": sum(r.capacity for r in rows),
        "allocatable": sum(r.allocatable for r in rows),
        "allocated": sum(r.allocated for r in rows),
        "free": sum(m.free for m in models.values()),
        "pending": sum(pending.values()),
    }
    if dra_counts:
        diag.details["totals"]["dra"] = {
            k: sum(c[k] for c in dra_counts.values()) for k in ("published", "allocated", "free")}
    diag.can_clear = False  # a ledger, not a check of the chain
    runtime.enrich(reader, diag, idle=True, allocation=True)
    diag.unchecked.extend(reader.unchecked)
    diag.node_pools = pools_of(diag.findings, {name_of(n): n for n in nodes})
    return finish(diag)
