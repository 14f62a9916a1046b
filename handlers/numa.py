"""How a node's GPUs sit on its NUMA nodes, where something the cluster shows says so.

Most exact first: the node's NodeResourceTopology (topology.node.k8s.io, published by NFD's
topology-updater or the resource-topology-exporter for NUMA-aware scheduling), whose zones
of type Node list each NUMA node's GPUs and how many are free; else the machine type's layout
(``knowledge/numa.yaml``, matched on the node's instance-type label), which gives the number
of NUMA nodes and GPUs on each but not which are in use, so ``Layout.most_free_surely``
reasons from the worst spread of the GPUs in use. Zones that list no GPU (pytorch/ci-infra
#778: g4dn.metal published CPUs only) say nothing about the GPUs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from handlers.knowledge import load_yaml
from handlers.knowledge.nodes import node_knowledge
from handlers.view import Obj, Reader
from handlers.words import counted

DATA = Path(__file__).parent / "knowledge" / "numa.yaml"
TOPOLOGY = "NodeResourceTopology"


@dataclass(frozen=True)
class Layout:
    numa_nodes: int
    gpus_per_numa_node: int
    evidence: str  # what says so, with its source
    # Free GPUs per NUMA node as the node agent last published them; None: not shown.
    free: tuple[int, ...] | None = None

    def most_free_surely(self, in_use: int) -> int:
        """GPUs the freest NUMA node has free: as published, else with ``in_use`` GPUs
        taken anywhere in their worst spread (as evenly as they can be)."""
        if self.free is not None:
            return max(self.free, default=0)
        return max(0, self.gpus_per_numa_node - in_use // self.numa_nodes)


@dataclass(frozen=True)
class _Entry:
    match: str
    numa_nodes: int
    gpus: int
    source: str


@cache
def _entries() -> tuple[_Entry, ...]:
    out = []
    for i, e in enumerate((load_yaml(DATA) or {}).get("instance_types") or []):
        where = f"numa.yaml instance_types[{i}]"
        if not isinstance(e, Mapping):
            raise ValueError(f"{where}: not a mapping")
        try:
            entry = _Entry(str(e["match"]), int(e["numa_nodes"]), int(e["gpus_per_numa_node"]),
                           str(e["source"]))
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"{where}: {err!r}") from None
        if entry.numa_nodes < 1 or entry.gpus < 1 or not entry.source.startswith("https://"):
            raise ValueError(f"{where}: counts must be positive and the source a URL")
        out.append(entry)
    return tuple(out)


def topologies(reader: Reader) -> dict[str, Obj]:
    """Every NodeResourceTopology the data holds, by the node it is named after."""
    return {str((t.get("metadata") or {}).get("name")): t for t in reader.list(TOPOLOGY)}


def _count(value: Any) -> int | None:
    try:
        return int(str(value))
    except ValueError:
        return None


def _from_topology(nrt: Obj, resource: str) -> Layout | None:
    zones = [z for z in nrt.get("zones") or () if isinstance(z, Mapping)
             and z.get("type") == "Node"]
    seen: list[tuple[str, int, int]] = []
    for z in zones:
        for r in z.get("resources") or ():
            if isinstance(r, Mapping) and r.get("name") == resource:
                cap = _count(r.get("capacity"))
                free = _count(r.get("available", r.get("allocatable")))
                if cap is not None and free is not None:
                    seen.append((str(z.get("name")), cap, free))
    if not seen:
        return None
    name = (nrt.get("metadata") or {}).get("name")
    shown = ", ".join(f"{z} {free} of {cap} free" for z, cap, free in seen)
    return Layout(len(zones), max(cap for _, cap, _ in seen),
                  f"NodeResourceTopology {name} ({resource} per NUMA node, as its node agent "
                  f"last published): {shown}", tuple(free for _, _, free in seen))


def layout(node: Mapping[str, Any], topology: Obj | None = None,
           resource: str = "nvidia.com/gpu") -> Layout | None:
    """The node's NUMA layout for ``resource``: its NodeResourceTopology's zones when they
    list it, else its machine type's; None when nothing says it."""
    if topology is not None:
        found = _from_topology(topology, resource)
        if found is not None:
            return found
    labels = (node.get("metadata") or {}).get("labels") or {}
    for key in node_knowledge().instance_type_keys:
        value = str(labels.get(key) or "")
        for e in _entries():
            if value == e.match:
                return Layout(e.numa_nodes, e.gpus, f"{key}={value}: {e.numa_nodes} NUMA nodes "
                              f"with {counted(e.gpus, 'GPU')} each ({e.source})")
    return None
