"""Snapshots: cluster state read from files instead of an API server.

    load_snapshot(path) -> SnapshotView     # a handlers.view.ClusterView
    LoadProblem                              # one thing that could not be read
    SnapshotError(ViewError)                 # nothing usable at that path
"""

from .loader import load_snapshot
from .model import LoadProblem, SnapshotError
from .view import SnapshotView

__all__ = ["LoadProblem", "SnapshotError", "SnapshotView", "load_snapshot"]
