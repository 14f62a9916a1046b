"""The GPU ledger of one node: the GPUs it has, what says so, and how many of them the
scheduler cannot use (lost).

    of(node, dra_gpus=None) -> NodeLedger   # physical, source, capacity, allocatable, lost
    physical_count(node) -> int | None      # what its labels and conditions say it has

A pure function of the Node object (and the whole GPUs its ResourceSlices publish, when DRA
serves them), cheap enough to run on every watch event: what the labels and conditions say is
remembered per node object in the diagnosis's memos (``handlers/memo.py``), the rest is
arithmetic.

What says how many GPUs a node has, in order of trust (``knowledge/gpu_counts.yaml``,
``knowledge/node_conditions.yaml``, each with its public source):

1. GFD ``nvidia.com/gpu.count``: the GPUs NVML enumerated at GFD's last relabel;
2. the machine's count: Karpenter ``karpenter.k8s.aws/instance-gpu-count``, GKE
   ``cloud.google.com/gke-accelerator-count``, the instance-type table (AWS, Azure, GCP), the
   count a node health agent expects (AKS GPUMissing, EKS NvidiaDeviceCountMismatch);
3. the GPUs the node advertises (capacity) or its ResourceSlices publish;
4. NFD's PCI label (vendor 10de): at least one.

The node has the most any of them saw: a GPU that fell off the bus lowers GFD's count too
(the driver no longer sees it), so a higher machine count wins and the evidence says the two
disagree; and nothing enumerates GPUs that are not there. Lost = physical - allocatable, in
whole GPUs: under time-slicing allocatable counts replicas (``nvidia.com/gpu.replicas``),
and with MIG on it counts slices, so there only a node offering nothing has lost its GPUs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from handlers.dra import Device, is_gpu_driver
from handlers.gpu import (
    GPU_RESOURCE,
    MIG_RESOURCE_RE,
    SHARED_GPU_RESOURCE,
    gpu_count,
    gpu_resources,
    labels,
    name_of,
    nfd_pci_nvidia,
)
from handlers.knowledge.gpu_counts import counts, instance_type_gpus
from handlers.knowledge.node_conditions import known_types, matches
from handlers.memo import Table
from handlers.words import counted

REPLICAS_LABEL = "nvidia.com/gpu.replicas"
# Sources, most trusted first: on a tie the first names the count.
TRUST = ("gfd", "karpenter", "gke", "instance-type", "health-agent", "dra", "capacity", "nfd")
# What says what the node has from its labels and conditions, not from what it advertises.
LABELLED = frozenset({"gfd", "karpenter", "gke", "instance-type", "health-agent"})


@dataclass(frozen=True)
class Count:
    source: str  # one of TRUST
    gpus: int
    evidence: str  # "nvidia.com/gpu.count=8", "node.kubernetes.io/instance-type=p4d.24xlarge: ..."
    machine: bool  # what the machine type has, not what the driver saw


@dataclass(frozen=True)
class NodeLedger:
    node: str
    physical: int  # 0: nothing says the node has a GPU
    source: str | None  # the Count that set `physical`
    at_least: bool  # only NFD's presence label: one or more
    counts: tuple[Count, ...]
    capacity: float  # nvidia.com/gpu
    allocatable: float
    dra: int | None  # whole GPUs its ResourceSlices publish
    offered: float  # allocatable (and DRA) in whole GPUs
    lost: int
    unhealthy: int  # of `lost`: advertised, but not allocatable (the plugin marked them)
    mig: bool  # MIG slices: only "offers nothing" is telling
    replicas: int  # time-slicing or MPS advertise each GPU this many times
    notes: tuple[str, ...] = ()

    @property
    def evidence(self) -> tuple[str, ...]:
        return (*(c.evidence for c in self.counts), *self.notes)

    def to_json(self) -> dict[str, Any]:
        return {"physical": self.physical, "physical_at_least": self.at_least,
                "source": self.source, "lost": self.lost, "unhealthy": self.unhealthy,
                "evidence": list(self.evidence)}


# node name -> (the node object, what its labels and conditions say), in each Memos
_LABELLED: Table[str, tuple[Mapping[str, Any], tuple[Count, ...]]] = Table(50_000)


def _int(value: Any) -> int | None:
    try:
        n = int(str(value))
    except ValueError:
        return None
    return n if n > 0 else None


def _from_labels(node: Mapping[str, Any]) -> tuple[Count, ...]:
    lab = labels(node)
    out = []
    for c in counts().labels:
        n = _int(lab.get(c.key))
        if n is not None and (c.requires is None or lab.get(c.requires)):
            out.append(Count(c.id, n, f"{c.key}={lab[c.key]}", c.machine))
    for key in counts().instance_type_keys:
        it = instance_type_gpus(str(lab.get(key) or ""))
        if it is not None:
            out.append(Count("instance-type", it.gpus,
                             f"{key}={lab[key]}: {counted(it.gpus, 'GPU')} ({it.family})",
                             True))
            break  # the GA and beta labels name the same type
    conditions = (node.get("status") or {}).get("conditions") or []
    if any(str(c.get("type")) in known_types() for c in conditions):
        for hit in matches(conditions):
            said = hit.entry.gpu_counts(hit.condition)
            if said is not None:
                cond = hit.condition
                out.append(Count("health-agent", said[0], f"condition {cond.get('type')}="
                                 f"{cond.get('status')}: {cond.get('message', '')}", True))
                break
    return tuple(out)


def _labelled(node: Mapping[str, Any]) -> tuple[Count, ...]:
    """What the node's labels and conditions say, remembered for this node object."""
    meta = node.get("metadata") or {}
    name = str(meta.get("name") or "")
    kept = _LABELLED.of()
    hit = kept.get(name) if kept is not None else None
    if hit is not None and hit[0] is node:
        return hit[1]
    said = _from_labels(node)
    if kept is not None and meta.get("uid"):
        kept.keep(name, (node, said))
    return said


def physical_said(node: Mapping[str, Any]) -> Count | None:
    """What the node's labels say it has (the most any says, the most trusted on a tie), or
    None. A health agent's count is left out: the chain reports it as GPU_MISSING."""
    return _pick([c for c in _labelled(node) if c.source != "health-agent"], False)


def physical_count(node: Mapping[str, Any]) -> int | None:
    said = physical_said(node)
    return said.gpus if said else None


def dra_gpus(devices: Iterable[Device]) -> dict[str, int]:
    """Node -> the whole GPUs its ResourceSlices publish: devices of a GPU driver whose type,
    when they say, is a GPU (the NVIDIA DRA driver also publishes MIG slices)."""
    out: dict[str, int] = {}
    for d in devices:
        kind = d.attributes.get("type") or d.attributes.get(f"{d.driver}/type") or "gpu"
        if d.node and is_gpu_driver(d.driver) and str(kind) == "gpu":
            out[d.node] = out.get(d.node, 0) + 1
    return out


def _mig(node: Mapping[str, Any], lab: Mapping[str, str]) -> bool:
    if any(MIG_RESOURCE_RE.match(r) for r in gpu_resources(node)):
        return True
    return "-MIG-" in lab.get("nvidia.com/gpu.product", "") or (
        lab.get("nvidia.com/mig.strategy") in ("single", "mixed")
        and lab.get("nvidia.com/mig.config", "all-disabled") != "all-disabled")


def _pick(said: list[Count], mig: bool) -> Count | None:
    if mig and any(c.machine for c in said):
        # GFD counts MIG devices as nvidia.com/gpu under the single strategy.
        said = [c for c in said if c.machine]
    if not said:
        return None
    top = max(c.gpus for c in said)
    return min((c for c in said if c.gpus == top), key=lambda c: TRUST.index(c.source))


def _disagree(said: list[Count]) -> tuple[str, ...]:
    """GFD against the machine's count: a GPU the driver no longer sees, or a stale label."""
    gfd = next((c for c in said if c.source == "gfd"), None)
    machine = max((c for c in said if c.machine), key=lambda c: c.gpus, default=None)
    if gfd is None or machine is None or gfd.gpus == machine.gpus:
        return ()
    if gfd.gpus < machine.gpus:
        return (f"GFD counts {counted(gfd.gpus, 'GPU')} ({gfd.evidence}) but the machine has "
                f"{machine.gpus}: the driver no longer sees {machine.gpus - gfd.gpus} (fallen "
                "off the bus, or failed to initialise); the machine's count is taken",)
    return (f"GFD counts {counted(gfd.gpus, 'GPU')} ({gfd.evidence}), more than the machine's "
            f"{machine.gpus}: GFD's count is taken (nothing enumerates GPUs that are not there)",)


def of(node: Mapping[str, Any], dra_gpus: int | None = None) -> NodeLedger:
    """The ledger of ``node``; ``dra_gpus``: the whole GPUs its ResourceSlices publish."""
    lab = labels(node)
    mig = _mig(node, lab)
    replicas = _int(lab.get(REPLICAS_LABEL)) or 1
    cap = gpu_count(node, "capacity")
    alloc = gpu_count(node, "allocatable")
    # Time-slicing and MPS advertise each GPU `replicas` times, as nvidia.com/gpu or, renamed,
    # nvidia.com/gpu.shared.
    cap_gpus = (cap + gpu_count(node, "capacity", SHARED_GPU_RESOURCE)) / replicas
    offered = (alloc + gpu_count(node, "allocatable", SHARED_GPU_RESOURCE)) / replicas \
        + (dra_gpus or 0)
    said = list(_labelled(node))
    if cap_gpus and not mig:
        said.append(Count("capacity", math.ceil(cap_gpus),
                          f"capacity {GPU_RESOURCE}: {cap:g}"
                          + (f" ({replicas} replicas each)" if replicas > 1 else ""), False))
    if dra_gpus:
        said.append(Count("dra", dra_gpus, f"ResourceSlices publish {counted(dra_gpus, 'GPU')}",
                          False))
    best = _pick(said, mig)
    at_least = False
    if best is None:
        pci = nfd_pci_nvidia(node)
        if pci:
            best, at_least = Count("nfd", 1, f"{pci}: at least 1 GPU", False), True
            said.append(best)
    physical = best.gpus if best else 0
    if mig:  # slices, not GPUs: a node that offers anything has its GPUs
        anything = any(v > 0 for v in gpu_resources(node, "allocatable").values()) or dra_gpus
        lost = 0 if anything else physical
    else:
        lost = max(physical - math.ceil(offered - 1e-9), 0)
    unhealthy = min(max(math.ceil(cap_gpus - 1e-9) - math.ceil(offered - 1e-9), 0), lost) \
        if not mig else 0
    return NodeLedger(name_of(node), physical, best.source if best else None, at_least,
                      tuple(said), cap, alloc, dra_gpus, offered, lost, unhealthy, mig,
                      replicas, _disagree(said))
