"""A target named without a cluster, looked for in every cluster the asker may read."""

from __future__ import annotations

from collections.abc import Iterable

from bot.fleet import ClusterHandle
from handlers.errors import GpubotError, TargetNotFound
from handlers.target import Target
from handlers.view import ViewError


class AmbiguousTarget(GpubotError):
    """The target exists in several clusters; ``clusters`` names them."""

    def __init__(self, target: Target, clusters: list[str]) -> None:
        self.clusters = clusters
        what = f"{target.kind.lower()} {target.namespace}/{target.name}"
        super().__init__(f"{what} exists in clusters {', '.join(clusters)}: name one with "
                         + " or ".join(f"-c {c}" for c in clusters))


def find_target(target: Target, candidates: Iterable[ClusterHandle]
                ) -> tuple[ClusterHandle, list[str]]:
    """The one cluster holding ``target``, and a line for each cluster that could not be
    asked. Raises TargetNotFound (in none) or AmbiguousTarget (in several)."""
    found: list[ClusterHandle] = []
    skipped: list[str] = []
    asked: list[str] = []
    for handle in candidates:
        asked.append(handle.name)
        why = handle.unreachable()
        if why is not None or handle.view is None:
            skipped.append(f"cluster {handle.name}: unreachable ({why})")
            continue
        try:
            obj = handle.view.get(target.kind, target.name, target.namespace)
        except ViewError as err:
            if getattr(err, "fatal", False):
                skipped.append(f"cluster {handle.name}: {err}")
            continue  # a kind this cluster does not serve: not there
        if obj is not None:
            found.append(handle)
    if len(found) == 1:
        return found[0], skipped
    if found:
        raise AmbiguousTarget(target, [h.name for h in found])
    where = ", ".join(asked) if asked else "none the channel may read"
    message = (f"{target.kind.lower()} {target.name!r} not found in namespace "
               f"{target.namespace!r} in any cluster ({where})")
    if skipped:
        message += "; not read: " + "; ".join(skipped)
    raise TargetNotFound(message)
