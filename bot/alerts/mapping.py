"""Which gpubot diagnosis answers an alert: by alertname, with its labels as arguments.

Each command says which alerts it answers and how their labels become its parameters
(``CommandSpec.alerts`` in ``handlers/registry.py``); alerts of
``deploy/prometheus/gpubot-rules.yaml`` map to a command. An alert gpubot does not know gets
a card with its labels and annotations and no diagnosis.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from bot.slack.commands import Command
from handlers.registry import COMMANDS, for_alert

# Every alertname some command answers.
KNOWN = frozenset(alert.name for spec in COMMANDS.values() for alert in spec.alerts)


def command_for(labels: Mapping[str, str], cluster_label: str | None = None
                ) -> Command | None:
    """``cluster_label``: with several clusters, the label naming the alert's cluster
    (its diagnosis reads that cluster; without the label, as ``/gpu`` without ``-c``)."""
    found = for_alert(labels)
    if found is None:
        return None
    spec, params = found
    cluster = labels.get(cluster_label) if cluster_label else None
    return Command(spec.name, **params, cluster=cluster or None)


def commands_for(alerts: Iterable[Mapping[str, str]], cluster_label: str | None = None
                 ) -> list[Command]:
    """The distinct diagnoses a group's alerts ask for, in the alerts' order."""
    out: dict[str, Command] = {}
    for labels in alerts:
        cmd = command_for(labels, cluster_label)
        if cmd is not None:
            out.setdefault(cmd.line(), cmd)
    return list(out.values())
