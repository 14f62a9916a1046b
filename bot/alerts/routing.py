"""Which channel a card goes to: an alert group's, an incident's.

``GPUBOT_ALERT_ROUTES="namespace=ml-team=C0ML;severity=critical=#gpu-oncall"``: the first
route whose label matches the group's common labels wins; else ``GPUBOT_ALERT_CHANNEL``.
``GPUBOT_SENTINEL_ROUTES="namespace=ml-team=C1;pool=a100=C2;detector=gpu-pending=C3"``: the
same, over what an incident is about (its namespaces, pools, nodes, detector); else
``GPUBOT_SENTINEL_CHANNEL``.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from handlers.errors import GpubotError


class RouteError(GpubotError):
    pass


@dataclass(frozen=True)
class Route:
    label: str
    value: str
    channel: str


def parse_routes(text: str | None, setting: str = "GPUBOT_ALERT_ROUTES",
                 labels: Collection[str] | None = None) -> list[Route]:
    """``labels``: the only keys a route may match on (None: any alert label)."""
    out: list[Route] = []
    for part in (text or "").replace("\n", ";").split(";"):
        part = part.strip()
        if not part:
            continue
        bits = part.split("=")
        if len(bits) != 3 or not all(b.strip() for b in bits):
            raise RouteError(f"{setting}: {part!r} is not LABEL=VALUE=CHANNEL")
        route = Route(*(b.strip() for b in bits))
        if labels is not None and route.label not in labels:
            raise RouteError(f"{setting}: {part!r}: {route.label!r} is not one of "
                             f"{', '.join(sorted(labels))}")
        out.append(route)
    return out


def channel_for(labels: Mapping[str, str], routes: list[Route], default: str | None
                ) -> str | None:
    return channel_for_any({k: (v,) for k, v in labels.items()}, routes, default)


def channel_for_any(values: Mapping[str, Iterable[str]], routes: list[Route],
                    default: str | None) -> str | None:
    """The first route whose value is among ``values[label]``, else ``default``."""
    for r in routes:
        if r.value in values.get(r.label, ()):
            return r.channel
    return default
