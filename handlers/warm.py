"""Build what warm diagnoses remember, before anyone asks.

Once the watch cache has synced, the bot calls ``warm(reader)`` so that the first diagnosis
is as fast as later ones: the cache's label indexes for the device-plugin selectors, the
traits of every node (and what is worked out over all of them), and every node's NodeInfo
(a GPU node's with its pods, as why-pending reads them on a large cluster) are built from
the very objects the cache will hand out, so later diagnoses hit them (see "Warm
diagnoses" in docs/design.md).

Then the pods pending at that moment, which are what on-call asks about first and what
alerts on pending pods diagnose, are diagnosed once each kind (``PENDING_KINDS`` at most,
most pods first): their verdicts on every node are kept with the NodeInfos, so their first
diagnosis is a warm one too.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable
from typing import NamedTuple

from handlers import why_pending
from handlers.chain.fixcontext import newest_drivers
from handlers.chain.inventory import device_plugin_nodes
from handlers.errors import GpubotError
from handlers.gpu import name_of, ns_of
from handlers.kube.resources import pod_requests
from handlers.pending.context import main_gpu_request, node_table
from handlers.scheduler.nodeinfo import node_info
from handlers.target import Target
from handlers.view import Obj, Reader, ViewError

# Each kind's verdicts take about three of a GPU node's kept conclusions
# (nodeinfo._KEPT_PER_NODE), and leave room for the pods asked about next.
PENDING_KINDS = 4


class Warmed(NamedTuple):
    gpu_nodes: int  # whose pods were read
    pending: list[str]  # "namespace/name" of the pending pods diagnosed, one of each kind


def warm(reader: Reader) -> Warmed:
    """Memos built, then one pending GPU pod of each kind diagnosed."""
    device_plugin_nodes(reader)
    nodes = reader.list("Node")
    memos = reader.memos  # the view's, kept for the diagnoses to come
    traits = node_table(nodes, memos).traits
    newest_drivers(nodes, memos)
    gpu = [t.name for t in traits if t.gpu_like]
    pods = reader.pods_on(gpu)
    for t in traits:
        node_info(t.node, pods.get(t.name, []), t.name, memos)
    pending = []
    for pod in pending_kinds(reader):
        target = Target("Pod", name_of(pod), ns_of(pod))
        try:
            why_pending.run(Reader(reader.view), target)  # a Reader of its own, as the bot's
        except (GpubotError, ViewError):  # gone or unreadable since it was listed
            continue
        pending.append(f"{target.namespace}/{target.name}")
    return Warmed(len(gpu), pending)


def pending_kinds(reader: Reader, limit: int = PENDING_KINDS) -> list[Obj]:
    """The oldest pending pod asking for GPUs of each kind (what the scheduler's filters
    read of it: requests, tolerations, node selector, affinity), kinds with the most
    pending pods first."""
    kinds: dict[Hashable, list[Obj]] = defaultdict(list)
    for pod in reader.list("Pod", field_selector="spec.nodeName="):
        spec = pod.get("spec") or {}
        if (pod.get("status") or {}).get("phase") != "Pending" or not main_gpu_request(pod)[1]:
            continue
        kinds[(tuple(sorted(pod_requests(pod).items())), repr(spec.get("tolerations")),
               repr(spec.get("nodeSelector")), repr(spec.get("affinity")))].append(pod)
    oldest = sorted(((len(ps), min(ps, key=_age_key)) for ps in kinds.values()),
                    key=lambda kind: (-kind[0], _age_key(kind[1])))
    return [pod for _, pod in oldest[:limit]]


def _age_key(pod: Obj) -> tuple[str, str, str]:
    meta = pod.get("metadata") or {}
    return str(meta.get("creationTimestamp") or ""), ns_of(pod), name_of(pod)
