"""Alertmanager's webhook body (version 4), checked field by field.

https://prometheus.io/docs/alerting/latest/configuration/#webhook_config documents it:
``{"version": "4", "groupKey", "status", "receiver", "groupLabels", "commonLabels",
"commonAnnotations", "externalURL", "alerts": [{"status", "labels", "annotations",
"startsAt", "endsAt", "generatorURL", "fingerprint"}]}``. ``PayloadError`` says what is
wrong in words the sender can act on (the receiver answers it with a 400).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

STATUSES = ("firing", "resolved")


class PayloadError(ValueError):
    """The body is not a usable version-4 webhook; ``str()`` says why."""


@dataclass(frozen=True)
class Alert:
    status: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    starts_at: str
    ends_at: str
    fingerprint: str
    generator_url: str = ""  # Prometheus's graph of the rule's expression

    @property
    def name(self) -> str:
        return self.labels.get("alertname", "")

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "labels": dict(self.labels),
                "annotations": dict(self.annotations), "startsAt": self.starts_at,
                "endsAt": self.ends_at, "fingerprint": self.fingerprint,
                "generatorURL": self.generator_url}


@dataclass(frozen=True)
class AlertGroup:
    group_key: str
    status: str
    receiver: str
    group_labels: Mapping[str, str]
    common_labels: Mapping[str, str]
    common_annotations: Mapping[str, str]
    external_url: str
    alerts: tuple[Alert, ...]


def _strings(value: Any, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise PayloadError(f"{where} must be an object of strings")
    return dict(value)


def _text(body: Mapping[str, Any], key: str, where: str) -> str:
    v = body.get(key, "")
    if not isinstance(v, str):
        raise PayloadError(f"{where}{key} must be a string")
    return v


def _alert(raw: Any, i: int) -> Alert:
    where = f"alerts[{i}]"
    if not isinstance(raw, dict):
        raise PayloadError(f"{where} must be an object")
    labels = _strings(raw.get("labels"), f"{where}.labels")
    if not labels:
        raise PayloadError(f"{where}.labels is missing or empty")
    status = raw.get("status")
    if status not in STATUSES:
        raise PayloadError(f"{where}.status must be firing or resolved, not {status!r}")
    fingerprint = _text(raw, "fingerprint", f"{where}.") or hashlib.sha256(
        json.dumps(labels, sort_keys=True).encode()).hexdigest()[:16]
    return Alert(str(status), labels, _strings(raw.get("annotations"), f"{where}.annotations"),
                 _text(raw, "startsAt", f"{where}."), _text(raw, "endsAt", f"{where}."),
                 fingerprint, _text(raw, "generatorURL", f"{where}."))


def parse(body: bytes) -> AlertGroup:
    try:
        doc = json.loads(body)
    except (UnicodeDecodeError, ValueError) as err:
        raise PayloadError(f"the body is not JSON: {err}") from None
    if not isinstance(doc, dict):
        raise PayloadError("the body must be a JSON object (Alertmanager's webhook payload)")
    if doc.get("version") != "4":
        raise PayloadError(f"expected Alertmanager's webhook version \"4\", got "
                           f"{doc.get('version')!r}")
    key = doc.get("groupKey")
    if not isinstance(key, str) or not key:
        raise PayloadError("groupKey is missing: every version-4 payload names its group")
    alerts = doc.get("alerts")
    if not isinstance(alerts, list):
        raise PayloadError("alerts is missing or not a list")
    if not alerts:
        raise PayloadError("alerts is empty: nothing to post")
    status = doc.get("status", "firing")
    if status not in STATUSES:
        raise PayloadError(f"status must be firing or resolved, not {status!r}")
    return AlertGroup(
        key, str(status), _text(doc, "receiver", ""),
        _strings(doc.get("groupLabels"), "groupLabels"),
        _strings(doc.get("commonLabels"), "commonLabels"),
        _strings(doc.get("commonAnnotations"), "commonAnnotations"),
        _text(doc, "externalURL", ""), tuple(_alert(a, i) for i, a in enumerate(alerts)))
