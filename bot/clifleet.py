"""The CLI over several clusters (issue 26): ``--cluster NAME`` and ``--all-clusters``, with
the ``clusters`` setting read as ``gpubot serve`` reads it (``--config FILE`` or
``GPUBOT_CONFIG``, ``GPUBOT_CLUSTERS``) and the cluster chosen by ``bot/fleet/run.py``,
as ``/gpu`` chooses it:

    gpubot why-pending ml-team/train-0     # looked for in every cluster; says where
    gpubot --cluster prod pending          # one cluster
    gpubot nodes                           # every cluster and the total (--all-clusters)

Without ``clusters`` (or with ``--snapshot``/``--kubeconfig``/``--context``) the CLI reads
one cluster as it always has, through the same runner.
"""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, BinaryIO, TextIO

from bot.cliview import CliUsage, held, open_view
from bot.fleet import ClusterHandle, Fleet
from bot.fleet.merge import ALL_CLUSTERS

if TYPE_CHECKING:
    from bot.fleet.run import FleetAnswer
    from bot.progress import Progress
    from bot.slack.config import Settings
    from handlers.model import Diagnosis
    from handlers.registry import CommandSpec
    from handlers.runtime.source import MetricsSource
    from handlers.view import ClusterView

HOW_TO_CONFIGURE = ("configure clusters with a clusters list in the config file (--config FILE "
                    "or GPUBOT_CONFIG) or in GPUBOT_CLUSTERS (docs/configuration.md)")


class ClusterUsage(CliUsage):
    """A cluster flag that cannot be honoured (exit 2)."""


def check_flags(args: argparse.Namespace) -> None:
    """What the cluster flags allow, before anything is read. Raises ClusterUsage."""
    cluster, every = getattr(args, "cluster", None), getattr(args, "all_clusters", False)
    if not (cluster or every):
        return
    if args.command not in ALL_CLUSTERS and every:
        raise ClusterUsage(f"--all-clusters is for {' and '.join(ALL_CLUSTERS)}")
    if cluster and every:
        raise ClusterUsage("give --cluster NAME or --all-clusters, not both")
    if args.snapshot or args.kubeconfig or args.context:
        raise ClusterUsage("--cluster/--all-clusters read the clusters setting; --snapshot, "
                           "--kubeconfig and --context read one cluster: give one or the other")


def load_settings(args: argparse.Namespace, environ: Mapping[str, str]) -> Settings | None:
    """The settings when clusters may be configured, else None (and the settings module
    is not imported). Not validated as serve's are: the Slack tokens are serve's."""
    if args.snapshot or args.kubeconfig or args.context:
        return None  # one cluster named on the line
    if not (args.cluster or args.all_clusters or args.config
            or environ.get("GPUBOT_CONFIG") or environ.get("GPUBOT_CLUSTERS")):
        return None
    from bot.slack.config import ConfigError
    from bot.slack.config import load_settings as load

    try:
        return load(args.config, environ, {"prometheus_url": args.prometheus})
    except ConfigError as err:
        raise CliUsage(str(err)) from None


def open_cli_fleet(args: argparse.Namespace, settings: Settings | None, err: TextIO,
                   progress: Progress, stdin: BinaryIO | None) -> Fleet:
    """The clusters the command may read: the configured ones (a live one is not asked
    anything until read), else the one view the flags name. Raises ClusterUsage,
    ViewError."""
    if settings is None or not settings.clusters:
        if args.cluster or args.all_clusters:
            raise ClusterUsage(f"--cluster and --all-clusters need clusters: {HOW_TO_CONFIGURE}")
        return Fleet.single(open_view(args, err, progress, stdin))
    names = [c.name for c in settings.clusters]
    if args.cluster is not None and args.cluster not in names:
        close = difflib.get_close_matches(args.cluster, names, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]}?" if close else ""
        raise ClusterUsage(f"no cluster {args.cluster!r}{hint} (clusters: {', '.join(names)})")
    from bot.fleet.opening import open_fleet

    timeout = args.timeout

    def open_one(one: Settings) -> tuple[ClusterView, None, Callable[[], None]]:
        if one.snapshot:
            from bot.snapshot import load_snapshot

            return held(load_snapshot(one.snapshot, progress=progress.files)), None, lambda: None
        from bot.live import open_live_view

        live = open_live_view(one.kubeconfig, one.context, timeout=timeout)
        live.transport.on_page = progress.pages
        return live, None, live.close

    return open_fleet(settings, open_one, first_must_open=False)


def open_metrics(fleet: Fleet, settings: Settings | None,
                 open_one: Callable[[str], MetricsSource | None],
                 single: Callable[[], MetricsSource | None]) -> None:
    """Each cluster's Prometheus (its ``prometheus_url``, the first's falling back to
    ``--prometheus``/``GPUBOT_PROMETHEUS_URL``); one unnamed view: ``single()``."""
    if not fleet.named or settings is None:
        fleet.default.prometheus = single()
        return
    from bot.fleet.opening import open_metrics as open_each

    open_each(fleet, settings, open_one)


def close(fleet: Fleet) -> None:
    """Every cluster's view and Prometheus client, once the answer is made."""
    for handle in fleet:
        close_metrics = getattr(handle.prometheus, "close", None)
        handle.prometheus = None  # Fleet.close would close all but the first's again
        if close_metrics is not None:
            close_metrics()
    fleet.close()


def run(fleet: Fleet, spec: CommandSpec, args: argparse.Namespace) -> FleetAnswer:
    """``spec``'s answer from the cluster(s) the flags choose (``bot/fleet/run.py``).
    Raises ClusterUsage when a fleet of several needs ``--cluster`` for this command, and
    what the runner raises."""
    from bot.fleet.run import run_on_fleet
    from handlers.target import Target
    from handlers.view import Reader

    # TARGET without -n: the contexts' namespace when they agree, as in kubectl; else default.
    spaces = {getattr(h.view, "context_namespace", None) for h in fleet if h.view is not None}
    params = spec.bind(vars(args), context_namespace=spaces.pop() if len(spaces) == 1 else None)
    assert spec.run is not None  # every diagnosis subcommand has one
    every = bool(args.all_clusters) or (
        fleet.multi and args.cluster is None and spec.name == "nodes")  # nodes: as /gpu nodes
    target = params.target if isinstance(params.target, Target) else None
    if fleet.multi and args.cluster is None and not every and target is None:
        more = " or --all-clusters" if spec.name in ALL_CLUSTERS else ""
        raise ClusterUsage(f"gpubot reads {len(fleet)} clusters ({', '.join(fleet.names)}): "
                           f"name one with --cluster NAME{more}, e.g. "
                           f"gpubot {spec.name} --cluster {fleet.names[0]}")

    def diagnose(handle: ClusterHandle, view: ClusterView) -> Diagnosis:
        assert spec.run is not None
        diag = spec.run(Reader(view, metrics=handle.prometheus if spec.metrics else None),
                        params)
        for problem in getattr(view, "problems", []):
            diag.unchecked.append(f"not read: {problem}")
        return diag

    return run_on_fleet(fleet, spec.name, diagnose,
                        cluster=args.cluster, all_clusters=every, target=target,
                        namespace=params.namespace or None)


def source_of(fleet: Fleet, answer: FleetAnswer) -> str:
    """What the answer read, for its header: the cluster (and its source), or the clusters
    merged."""
    if answer.cluster is None:
        return "clusters " + ", ".join(answer.clusters)
    return fleet.label(fleet.get(answer.cluster))
