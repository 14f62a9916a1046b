"""How a node's GPUs sit on its NUMA nodes, where something the cluster shows says so.

The machine type's layout (``knowledge/numa.yaml``, matched on the node's instance-type
label) gives the number of NUMA nodes and GPUs on each; which of them are in use the API
does not show, so ``Layout.most_free_surely`` reasons from the worst spread of the GPUs in use.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from handlers.knowledge import load_yaml
from handlers.knowledge.nodes import node_knowledge

DATA = Path(__file__).parent / "knowledge" / "numa.yaml"


@dataclass(frozen=True)
class Layout:
    numa_nodes: int
    gpus_per_numa_node: int
    evidence: str  # what says so, with its source

    def most_free_surely(self, in_use: int) -> int:
        """GPUs the freest NUMA node surely has free with ``in_use`` GPUs taken anywhere:
        the worst spread takes them as evenly as it can."""
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


def layout(node: Mapping[str, Any]) -> Layout | None:
    """The node's NUMA layout by its machine type, or None when nothing says it."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    for key in node_knowledge().instance_type_keys:
        value = str(labels.get(key) or "")
        for e in _entries():
            if value == e.match:
                return Layout(e.numa_nodes, e.gpus, f"{key}={value}: {e.numa_nodes} NUMA nodes "
                              f"with {e.gpus} GPUs each ({e.source})")
    return None
