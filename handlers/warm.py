"""Build what warm diagnoses remember, before anyone asks.

Once the watch cache has synced, the bot calls ``warm(reader)`` so that the first diagnosis
is as fast as later ones: the cache's label indexes for the device-plugin selectors, the
traits of every node (and what is worked out over all of them), and every node's NodeInfo
(a GPU node's with its pods, as why-pending reads them on a large cluster) are built from
the very objects the cache will hand out, so later diagnoses hit them (see "Warm
diagnoses" in docs/design.md).
"""

from __future__ import annotations

from handlers.chain.fixcontext import newest_drivers
from handlers.chain.inventory import device_plugin_nodes
from handlers.pending.context import node_table
from handlers.scheduler.nodeinfo import node_info
from handlers.view import Reader


def warm(reader: Reader) -> int:
    """Memos built; returns the number of GPU nodes whose pods were read."""
    device_plugin_nodes(reader)
    nodes = reader.list("Node")
    traits = node_table(nodes).traits
    newest_drivers(nodes)
    gpu = [t.name for t in traits if t.gpu_like]
    pods = reader.pods_on(gpu)
    for t in traits:
        node_info(t.node, pods.get(t.name, []), t.name)
    return len(gpu)
