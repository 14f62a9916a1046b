"""Alertmanager's API v2, the part gpubot writes: ``POST /api/v2/silences``.

    am = Alertmanager("http://alertmanager:9093", timeout=10)
    am.create_silence({"alertname": "GPUXidErrors"}, starts, ends, "someone", "why")  # its id
    am.silence_link(sid)                                  # its page in Alertmanager's UI

Every failure (unreachable, a timeout, a 4xx/5xx, a body without ``silenceID``) raises
``AlertmanagerError`` naming the server and what went wrong, for the thread to say.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

import httpx

from handlers.errors import GpubotError


class AlertmanagerError(GpubotError):
    """Alertmanager did not create the silence; ``str()`` says why."""


def _rfc3339(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Alertmanager:
    def __init__(self, url: str, *, timeout: float = 10.0, token: str | None = None,
                 transport: httpx.BaseTransport | None = None) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self._token = token  # a bearer token (an auth proxy in front of Alertmanager)
        self._transport = transport

    def silence_link(self, silence_id: str) -> str:
        return f"{self.url}/#/silences/{silence_id}"

    def create_silence(self, matchers: Mapping[str, str], starts: float, ends: float,
                       created_by: str, comment: str) -> str:
        """The new silence's id. Every matcher is an exact match (``isEqual``, no regex)."""
        body = {
            "matchers": [{"name": k, "value": v, "isRegex": False, "isEqual": True}
                         for k, v in sorted(matchers.items())],
            "startsAt": _rfc3339(starts), "endsAt": _rfc3339(ends),
            "createdBy": created_by, "comment": comment,
        }
        where = f"Alertmanager at {self.url}"
        headers = {"Accept": "application/json"}
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        try:
            with httpx.Client(timeout=self.timeout, transport=self._transport) as client:
                resp = client.post(f"{self.url}/api/v2/silences", json=body, headers=headers)
        except httpx.TimeoutException:
            raise AlertmanagerError(f"{where} did not answer within {self.timeout:g}s") from None
        except httpx.HTTPError as err:
            raise AlertmanagerError(f"cannot reach {where}: {type(err).__name__}: "
                                    f"{err}") from None
        if resp.status_code != 200:
            text = " ".join(resp.text.split())[:300] or resp.reason_phrase
            raise AlertmanagerError(f"{where} refused the silence (HTTP {resp.status_code}): "
                                    f"{text}")
        try:
            sid = resp.json()["silenceID"]
        except (ValueError, KeyError, TypeError):
            sid = None
        if not isinstance(sid, str) or not sid:
            raise AlertmanagerError(f"{where} answered 200 without a silenceID: is it "
                                    "Alertmanager's API v2?")
        return sid
