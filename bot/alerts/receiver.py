"""``POST /alertmanager``: Alertmanager's webhook into the notifier's queue.

    401  no or wrong ``Authorization: Bearer <GPUBOT_ALERT_TOKEN>``
    413  a body over 1 MiB (by Content-Length, before reading it; or while reading)
    400  not JSON, not version 4, no ``alerts``, no ``groupKey``: the body says what
    503  the queue is full (Alertmanager retries)
    202  queued: ``{"queued": true, "alerts": N, "channel": "C..."}``
"""

from __future__ import annotations

import hmac
import json
import logging
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from bot import oplog
from bot.alerts.notifier import AlertNotifier
from bot.alerts.payload import PayloadError, parse
from bot.alerts.routing import Route, channel_for

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment

log = logging.getLogger("gpubot.alerts")

PATH = "/alertmanager"
MAX_BODY = 1 << 20
_OUTCOMES = {202: "queued", 400: "malformed", 401: "unauthorized", 405: "bad_method",
             413: "too_large", 503: "queue_full"}
_REASONS = {202: "Accepted", 400: "Bad Request", 401: "Unauthorized", 405: "Method Not Allowed",
            413: "Content Too Large", 503: "Service Unavailable"}


class AlertReceiver:
    def __init__(self, notifier: AlertNotifier, token: str, default_channel: str | None,
                 routes: list[Route], on_close: Callable[[], None] | None = None,
                 count: Callable[[str], None] = lambda outcome: None) -> None:
        self.notifier = notifier
        self._on_close = on_close
        self._count = count  # gpubot_alert_webhooks_total{outcome}
        self._token = token.encode()
        self.default_channel = default_channel
        self.routes = routes
        self.received = 0

    def close(self, timeout: float = 10.0) -> None:
        self.notifier.close(timeout)
        if self._on_close is not None:
            self._on_close()

    def __call__(self, environ: WSGIEnvironment,
                 start_response: StartResponse) -> Iterable[bytes]:
        status = [0]
        seen: dict[str, Any] = {}  # what _serve read of the group, for the operator log
        started = time.monotonic()

        def counted(line: str, headers: list[tuple[str, str]], exc: Any = None) -> Any:
            status[0] = int(line.split()[0])
            return start_response(line, headers)

        try:
            return self._serve(environ, counted, seen)
        finally:
            outcome = _OUTCOMES.get(status[0], str(status[0]))
            self._count(outcome)
            oplog.event("alert", command=seen.get("alertname", "alertmanager"),
                        target=seen.get("group", ""), channel=seen.get("channel", ""),
                        outcome=outcome, duration=time.monotonic() - started,
                        request_id=oplog.new_request_id(), alerts=seen.get("alerts"))

    def _serve(self, environ: WSGIEnvironment, start_response: StartResponse,
               seen: dict[str, Any]) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD") != "POST":
            return _answer(start_response, 405, {"error": "POST Alertmanager's webhook here"})
        auth = str(environ.get("HTTP_AUTHORIZATION", ""))
        scheme, _, given = auth.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(),
                                                                  self._token):
            log.warning("alert webhook refused: %s", "no bearer token" if not given
                        else "wrong bearer token")
            return _answer(start_response, 401, {"error": "a bearer token is required "
                                                 "(GPUBOT_ALERT_TOKEN)"},
                           [("WWW-Authenticate", 'Bearer realm="gpubot"')])
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return _answer(start_response, 400, {"error": "bad Content-Length"})
        if length > MAX_BODY:
            return _answer(start_response, 413, {"error": f"body of {length} bytes is over "
                                                 f"{MAX_BODY} bytes"})
        body = environ["wsgi.input"].read(min(length, MAX_BODY) if length else MAX_BODY + 1)
        if len(body) > MAX_BODY:
            return _answer(start_response, 413, {"error": f"body over {MAX_BODY} bytes"})
        try:
            group = parse(body)
        except PayloadError as err:
            log.info("alert webhook rejected: %s", err)
            return _answer(start_response, 400, {"error": str(err)})
        channel = channel_for(group.common_labels or group.alerts[0].labels, self.routes,
                              self.default_channel)
        names = sorted({a.labels.get("alertname", "?") for a in group.alerts})
        seen.update(alertname=",".join(names), group=group.group_key,
                    channel=channel or "", alerts=len(group.alerts))
        if not channel:
            return _answer(start_response, 400, {"error": "no channel for this group: set "
                                                 "GPUBOT_ALERT_CHANNEL or a matching route"})
        self.received += 1
        if not self.notifier.submit(group, channel):
            return _answer(start_response, 503, {"error": "alert queue full; retry later"},
                           [("Retry-After", "10")])
        return _answer(start_response, 202, {"queued": True, "alerts": len(group.alerts),
                                             "channel": channel})


def _answer(start_response: StartResponse, status: int, payload: dict[str, Any],
            headers: list[tuple[str, str]] | None = None) -> list[bytes]:
    body = json.dumps(payload).encode() + b"\n"
    start_response(f"{status} {_REASONS[status]}", [
        ("Content-Type", "application/json"), ("Content-Length", str(len(body))),
        *(headers or [])])
    return [body]
