"""Alertmanager webhook bodies (version 4) for tests, shaped as Alertmanager 0.25 sends them."""

from __future__ import annotations

import hashlib
import json
from typing import Any

TOKEN = "alert-token-3c9e"
NEVER = "0001-01-01T00:00:00Z"


def alert(name: str, status: str = "firing", *, starts: str = "2026-12-03T05:00:00Z",
          ends: str = NEVER, **labels: str) -> dict[str, Any]:
    labels = {"alertname": name, **labels}
    return {"status": status, "labels": labels,
            "annotations": {"summary": f"{name} on {labels.get('pod') or labels.get('node')}"},
            "startsAt": starts, "endsAt": ends,
            "generatorURL": "http://prometheus.test/graph?g0.expr=x",
            "fingerprint": hashlib.sha256(json.dumps(labels, sort_keys=True).encode())
            .hexdigest()[:16]}


def webhook(alerts: list[dict[str, Any]], *, key: str | None = None,
            common: dict[str, str] | None = None) -> dict[str, Any]:
    first = alerts[0]["labels"]
    common = common if common is not None else dict(first) if len(alerts) == 1 else {
        "alertname": first["alertname"]}
    status = "firing" if any(a["status"] == "firing" for a in alerts) else "resolved"
    return {"version": "4", "receiver": "gpubot", "status": status, "alerts": alerts,
            "groupLabels": {"alertname": first["alertname"]}, "commonLabels": common,
            "commonAnnotations": {"summary": alerts[0]["annotations"]["summary"]}
            if len(alerts) == 1 else {},
            "externalURL": "http://alertmanager.test",
            "groupKey": key or '{}/{alertname=~"GPU.+"}:' + f'{{alertname="{first["alertname"]}"}}',
            "truncatedAlerts": 0}
