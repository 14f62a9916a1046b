"""Which cluster a ``/gpu`` command reads (``bot/fleet``), settled before the channel's
access rules are checked: ``-c NAME`` as typed, else the channel's default cluster
(``channel_clusters``), else the fleet's only cluster. With several clusters and none
named, a command with a target is searched for in every cluster the channel may read
(``Diagnoses``), ``nodes`` shows every cluster, and the rest ask the user to name one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from bot.fleet import Fleet
from bot.slack import messages
from bot.slack.commands import Command, Scope
from bot.slack.guards import Guard
from bot.slack.metrics import Metrics
from bot.slack.mrkdwn import code
from bot.slack.request import Asked

# Without a cluster in a fleet: these answer for every cluster at once.
FLEET_WIDE = frozenset({"nodes"})


class ChooseCluster(Guard):
    def __init__(self, fleet: Fleet, channel_clusters: Mapping[str, str] | None,
                 metrics: Metrics) -> None:
        self.fleet = fleet
        self.channel_clusters = dict(channel_clusters or {})
        self.metrics = metrics

    def default_for(self, channel_id: str, channel_name: str) -> str | None:
        for key in (channel_id, f"#{channel_name}" if channel_name else "", channel_name):
            if key and key in self.channel_clusters:
                return self.channel_clusters[key]
        return None

    def choose(self, cmd: Command, channel_id: str, channel_name: str) -> Command | str:
        """The command with its cluster settled, or what to tell the user (mrkdwn)."""
        if cmd.route.scope is Scope.NONE:
            return cmd
        names = self.fleet.names
        if cmd.cluster is not None:
            if cmd.cluster not in self.fleet.handles:
                return (f"no cluster {code(cmd.cluster)}; clusters: "
                        f"{', '.join(code(n) for n in names)}")
            return cmd
        if cmd.all_clusters or not self.fleet.multi:
            return cmd
        default = self.default_for(channel_id, channel_name)
        if default is not None:
            return replace(cmd, cluster=default)
        if cmd.target is not None:
            return cmd  # looked for in every cluster when diagnosed
        if cmd.name in FLEET_WIDE:
            return replace(cmd, all_clusters=True)
        example = f"{cmd.line()} -c {names[0]}"
        return (f"gpubot reads {len(names)} clusters ({', '.join(code(n) for n in names)}) "
                f"and this channel has no default one: name it, e.g. {code(example)}")

    def admit(self, asked: Asked) -> Asked | None:
        cmd, req = asked.command, asked.request
        assert cmd is not None, "ChooseCluster needs a parsed command"
        chosen = self.choose(cmd, req.channel, req.channel_name)
        if isinstance(chosen, str):
            self.metrics.count(cmd.name, "usage_error")
            asked.answer(messages.usage(asked.prefix, chosen, cmd.route.example))
            return None
        return replace(asked, command=chosen)


class Guards(Guard):
    """Several guards as one (a mention runs them off the listener thread)."""

    def __init__(self, *guards: Guard) -> None:
        self.guards = guards

    def admit(self, asked: Asked) -> Asked | None:
        current: Asked | None = asked
        for guard in self.guards:
            if current is None:
                return None
            current = guard.admit(current)
        return current
