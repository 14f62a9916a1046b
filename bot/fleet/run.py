"""Which cluster a command reads in a fleet, and its answer from there: the one
implementation behind ``/gpu`` (``bot/slack/diagnoses.py``) and the CLI (``bot/cli.py``).

    answer = run_on_fleet(fleet, "why-pending", diagnose, target=target)
    answer.diagnosis, answer.cluster      # found in one cluster: its name

- ``cluster`` named: that cluster (``UnknownCluster`` if there is none of that name,
  ``ClusterUnavailable`` if it does not answer);
- ``all_clusters``: every readable cluster, merged (``bot/fleet/merge.py``); one that does
  not answer is said among the answer's unchecked lines, the others answer;
- a ``target`` and no cluster in a fleet of several: looked for in every readable cluster
  (``bot/fleet/search.py``), run where it is, the clusters not read said;
- else the fleet's default cluster.

Then, in a fleet of several, a why-pending answer about a pending GPU pod says on which
other clusters the asker may read it would schedule now (``bot/fleet/elsewhere.py``).

``diagnose(handle, view)`` runs the command on one cluster's view; what it runs (a Slack
command under a deadline, the CLI's parameters) is the caller's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bot.fleet import ClusterHandle, ClusterUnavailable, Fleet
from bot.fleet.elsewhere import Budget, add_fits_elsewhere
from bot.fleet.merge import merge
from bot.fleet.search import find_target
from handlers.model import Diagnosis
from handlers.target import Target
from handlers.view import ClusterView, ViewError

Diagnose = Callable[[ClusterHandle, ClusterView], Diagnosis]
# namespace (None: any) -> the names of the clusters the asker may read it in
Readable = Callable[[str | None], Sequence[str]]


@dataclass(frozen=True)
class FleetAnswer:
    diagnosis: Diagnosis
    cluster: str | None  # the cluster read; None: every readable cluster, merged
    clusters: tuple[str, ...] = ()  # merged: the clusters that answered, in order


def run_on_fleet(fleet: Fleet, command: str, diagnose: Diagnose, *,
                 cluster: str | None = None, all_clusters: bool = False,
                 target: Target | None = None, namespace: str | None = None,
                 readable: Readable | None = None, budget: Budget | None = None
                 ) -> FleetAnswer:
    """``command``'s answer from the cluster(s) chosen as the module says. ``namespace``:
    what a fleet-wide answer reads (None: every namespace), for ``readable`` (None: every
    cluster is readable); ``budget``: how fits elsewhere reads the other clusters (the
    asker's deadline). Raises UnknownCluster, ClusterUnavailable, TargetNotFound,
    AmbiguousTarget, or what ``diagnose`` raises."""
    def names(ns: str | None) -> list[str]:
        return list(readable(ns)) if readable is not None else fleet.names

    if all_clusters and fleet.multi:
        diag = fleet_wide(fleet, command, diagnose, names(namespace))
        return FleetAnswer(diag, None, tuple(diag.details.get("clusters", ())))
    if cluster is None and fleet.multi and target is not None:
        answer = search(fleet, target, diagnose, names(target.namespace))
    else:
        handle = fleet.get(cluster)
        answer = FleetAnswer(run_on(fleet, handle, diagnose), handle.name)
    if target is not None and fleet.multi and answer.cluster is not None:
        add_fits_elsewhere(fleet, fleet.get(answer.cluster), target, answer.diagnosis,
                           names(target.namespace), budget or Budget())
    return answer


def run_on(fleet: Fleet, handle: ClusterHandle, diagnose: Diagnose) -> Diagnosis:
    """The answer from one cluster. In a fleet the config names, a cluster that does not
    answer (or refuses gpubot's credentials) raises ClusterUnavailable: about that cluster,
    not gpubot. A single unnamed view is read as it always was."""
    if not fleet.named:
        assert handle.view is not None  # a single view is always open
        return diagnose(handle, handle.view)
    try:
        return diagnose(handle, handle.readable())
    except ViewError as err:
        if not getattr(err, "fatal", False):
            raise
        raise ClusterUnavailable(f"cluster {handle.name} is unreachable: {err}") from err


def search(fleet: Fleet, target: Target, diagnose: Diagnose,
           names: Sequence[str]) -> FleetAnswer:
    """``target`` looked for in the clusters ``names``, diagnosed in the one holding it;
    the clusters that could not be asked are said among the answer's unchecked lines."""
    handle, skipped = find_target(target, [fleet.get(n) for n in names])
    diag = run_on(fleet, handle, diagnose)
    diag.unchecked.extend(f"not read: {s}" for s in skipped)
    return FleetAnswer(diag, handle.name)


def fleet_wide(fleet: Fleet, command: str, diagnose: Diagnose,
               names: Sequence[str]) -> Diagnosis:
    """``command`` (nodes, pending) on each of the clusters ``names``, merged; a cluster
    that does not answer is said, the others answer."""
    parts: list[tuple[str, Diagnosis]] = []
    not_read: list[str] = []
    for name in names:
        try:
            parts.append((name, run_on(fleet, fleet.get(name), diagnose)))
        except ClusterUnavailable as err:
            not_read.append(str(err))
    return merge(command, parts, not_read)
