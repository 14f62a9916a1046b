"""The GPU discovery chain per node: hardware -> driver -> device plugin -> container
runtime -> kubelet registration, and the causes that break it.

``check_chain(reader, nodes=None)`` is shared by ``doctor`` (every GPU node, or one) and
``why-pending`` (the GPU nodes a pod could use, to explain a GPU shortage by its cause).
Each stage is one file under ``handlers/chain/stages`` (``handlers/chain/stage.py``).
"""

from __future__ import annotations

from handlers.chain.core import check_chain, is_chain_node
from handlers.chain.model import ChainReport, NodeChain

__all__ = ["ChainReport", "NodeChain", "check_chain", "is_chain_node"]
