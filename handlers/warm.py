"""Build what warm diagnoses remember, before anyone asks.

Once the watch cache has synced, the bot calls ``warm(reader)`` so that the first diagnosis
is as fast as later ones: the GPU-node traits and the NodeInfo of every GPU node (its pods'
summed requests and GPU holders) are computed from the very objects the cache will hand
out, so later diagnoses hit them (see "Warm diagnoses" in docs/design.md).
"""

from __future__ import annotations

from handlers.gpu import gpu_traits
from handlers.scheduler.nodeinfo import node_info
from handlers.view import Reader


def warm(reader: Reader) -> int:
    """NodeInfos of the GPU nodes built and remembered; returns how many."""
    gpu = [t for t in map(gpu_traits, reader.list("Node")) if t.gpu_like]
    pods = reader.pods_on([t.name for t in gpu])
    for t in gpu:
        node_info(t.node, pods[t.name], t.name)
    return len(gpu)
