"""Which gpubot diagnosis answers an alert: by alertname, with its labels as arguments.

Alerts of ``deploy/prometheus/gpubot-rules.yaml`` map to a command; an alert gpubot does not
know gets a card with its labels and annotations and no diagnosis. Node names come from
``node`` or dcgm-exporter's ``Hostname`` (``handlers/runtime/labels.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from bot.slack.commands import Command
from handlers.runtime.labels import node_of


def _pending(labels: Mapping[str, str]) -> Command:
    ns, pod = labels.get("namespace"), labels.get("pod")
    if ns and pod:
        return Command("why-pending", target=f"{ns}/{pod}")
    return Command("pending", namespace=ns or None, all_namespaces=not ns)


def _doctor(labels: Mapping[str, str]) -> Command:
    return Command("doctor", node=node_of(labels) or None)


def _quota(labels: Mapping[str, str]) -> Command:
    return Command("quota", namespace=labels.get("namespace") or None)


KNOWN: dict[str, Callable[[Mapping[str, str]], Command]] = {
    "GPUPodPendingTooLong": _pending,
    "GPUQuotaExceeded": _quota,
    "GPUResourceExhaustion": lambda labels: Command("nodes"),
    "GPUDevicePluginDown": _doctor,
    "GPUNotAdvertised": _doctor,
    "GPUXidErrors": _doctor,
}


def command_for(labels: Mapping[str, str]) -> Command | None:
    build = KNOWN.get(labels.get("alertname", ""))
    return build(labels) if build else None


def commands_for(alerts: Iterable[Mapping[str, str]]) -> list[Command]:
    """The distinct diagnoses a group's alerts ask for, in the alerts' order."""
    out: dict[str, Command] = {}
    for labels in alerts:
        cmd = command_for(labels)
        if cmd is not None:
            out.setdefault(cmd.line(), cmd)
    return list(out.values())
