"""Everything the why-pending checks share, computed once per diagnosis."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from handlers.view import Obj, Reader


@dataclass
class PendingContext:
    """The target and the cluster as the why-pending checks see them.

    ``pod`` is the real pod when one exists, else the pod template of the controller
    (``pod_exists`` False) so that spec, quota and placement checks still run.
    """

    reader: Reader
    pod: Obj
    pod_exists: bool
    namespace: str
    controller: Obj | None = None  # Deployment/StatefulSet/Job/ReplicaSet named or owning
    # Events about the pod and its owners (ReplicaSet, Job, ...), newest last.
    events: list[Obj] = field(default_factory=list)
    controller_events: list[Obj] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)

    @cached_property
    def nodes(self) -> list[Obj]:
        return self.reader.list("Node")

    @cached_property
    def active_pods(self) -> list[Obj]:
        """Non-terminated pods in the cluster: the ones that hold node resources."""
        return self.reader.list(
            "Pod", field_selector="status.phase!=Succeeded,status.phase!=Failed"
        )

    @cached_property
    def pods_by_node(self) -> dict[str, list[Obj]]:
        out: dict[str, list[Obj]] = defaultdict(list)
        for p in self.active_pods:
            node = p.get("spec", {}).get("nodeName")
            if node:
                out[node].append(p)
        return dict(out)

    @property
    def pod_name(self) -> str:
        return str(self.pod.get("metadata", {}).get("name", ""))
