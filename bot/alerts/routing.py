"""Which channel an alert group's card goes to.

``GPUBOT_ALERT_ROUTES="namespace=ml-team=C0ML;severity=critical=#gpu-oncall"``: the first
route whose label matches the group's common labels wins; else ``GPUBOT_ALERT_CHANNEL``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from handlers.errors import GpubotError


class RouteError(GpubotError):
    pass


@dataclass(frozen=True)
class Route:
    label: str
    value: str
    channel: str


def parse_routes(text: str | None) -> list[Route]:
    out: list[Route] = []
    for part in (text or "").replace("\n", ";").split(";"):
        part = part.strip()
        if not part:
            continue
        bits = part.split("=")
        if len(bits) != 3 or not all(b.strip() for b in bits):
            raise RouteError(f"GPUBOT_ALERT_ROUTES: {part!r} is not LABEL=VALUE=CHANNEL")
        out.append(Route(*(b.strip() for b in bits)))
    return out


def channel_for(labels: Mapping[str, str], routes: list[Route], default: str | None
                ) -> str | None:
    for r in routes:
        if labels.get(r.label) == r.value:
            return r.channel
    return default
