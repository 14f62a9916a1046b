"""What ``/slack/events`` checks before Bolt sees a request, and the server that drops
slow clients first.

``FrontDoor`` (WSGI middleware) answers, without a traceback and without logging the body:

- 405 to anything but POST, 413 to a body over ``max_body``, 400 to a missing or bad
  Content-Length;
- 401 to a request whose Slack signature is missing, malformed, stale (> 5 minutes) or
  wrong (https://api.slack.com/authentication/verifying-requests-from-slack);
- 400 to a signed body that is not UTF-8, not a form, or whose ``payload`` is not the
  JSON object an interactive request carries (actions a list of objects, ids strings),
  or to an Events API body (JSON) that is not an object with a type and string fields;
- an ephemeral usage reply to a slash command whose text is over ``max_text`` characters,
  so that no argument is parsed, echoed or logged at any length.

``GuardedServer`` (waitress) gives each request ``read_deadline`` seconds from its first
byte to its last (a client trickling one byte a second is cut off), and when the
connection limit is reached it closes the slowest unfinished requests, then the longest
idle keep-alive connections, instead of refusing everyone.
"""

from __future__ import annotations

import hmac
import io
import json
import logging
import time
from collections.abc import Callable, Iterable
from hashlib import sha256
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import parse_qs

from waitress.adjustments import Adjustments
from waitress.channel import HTTPChannel
from waitress.server import TcpWSGIServer

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

log = logging.getLogger("gpubot.server")

MAX_BODY = 1 << 20  # an interactive payload carries the card's blocks: tens of KB
MAX_TEXT = 2000  # a slash command's text; gpubot's longest real command is ~100 characters
MAX_FIELDS = 64  # form fields of a request (a slash command has ~15)
MAX_AGE = 300  # seconds: Slack's own replay window
READ_DEADLINE = 10.0  # seconds from a request's first byte to its last
CONNECTION_LIMIT = 512  # well above the worker threads: slow clients cannot fill it


class FrontDoor:
    def __init__(self, inner: WSGIApplication, signing_secret: str, *, command: str = "/gpu",
                 max_body: int = MAX_BODY, max_text: int = MAX_TEXT,
                 clock: Callable[[], float] = time.time) -> None:
        self.inner = inner
        self._secret = signing_secret.encode()
        self.command = command
        self.max_body = max_body
        self.max_text = max_text
        self._clock = clock

    def __call__(self, environ: WSGIEnvironment,
                 start_response: StartResponse) -> Iterable[bytes]:
        peer = environ.get("REMOTE_ADDR", "?")
        if environ.get("REQUEST_METHOD") != "POST":
            return _reply(start_response, 405, "method not allowed")
        try:
            length = int(environ.get("CONTENT_LENGTH") or "")
        except ValueError:
            return _refuse(start_response, 400, peer, "no Content-Length")
        if length < 0:
            return _refuse(start_response, 400, peer, "bad Content-Length")
        if length > self.max_body:
            return _refuse(start_response, 413, peer, f"a body of {length} bytes")
        body = environ["wsgi.input"].read(length)
        why = self._unsigned(environ, body)
        if why:
            # Never the body: anyone can send one, and it may hold anything.
            return _refuse(start_response, 401, peer, f"{why} ({len(body)} bytes)")
        form: dict[str, list[str]] = {}
        if environ.get("CONTENT_TYPE", "").startswith("application/json"):
            why = _bad_event(body)  # the Events API (mentions) posts JSON
        else:
            why, form = self._malformed(body)
        if why:
            return _refuse(start_response, 400, peer, why)
        text = form.get("text", [""])[0]
        if "command" in form and len(text) > self.max_text:
            log.info("refused a %s command of %d characters from user %s", self.command,
                     len(text), form.get("user_id", ["?"])[0][:40])
            return _reply(start_response, 200, json.dumps({
                "response_type": "ephemeral",
                "text": f"That command is {len(text):,} characters long; gpubot reads at "
                        f"most {self.max_text:,}. Try `{self.command} help`."}),
                "application/json")
        environ["wsgi.input"] = io.BytesIO(body)
        environ["CONTENT_LENGTH"] = str(len(body))
        return self.inner(environ, start_response)

    def _unsigned(self, environ: WSGIEnvironment, body: bytes) -> str | None:
        """Why the request is not signed by Slack, or None."""
        stamp = environ.get("HTTP_X_SLACK_REQUEST_TIMESTAMP", "")
        signature = environ.get("HTTP_X_SLACK_SIGNATURE", "")
        if not stamp or not signature:
            return "no Slack signature"
        if not signature.isascii():  # hmac.compare_digest refuses to compare it at all
            return "a malformed signature"
        if not (stamp.isascii() and stamp.isdigit() and len(stamp) <= 12):
            return "a malformed timestamp"
        if abs(self._clock() - int(stamp)) > MAX_AGE:
            return "a stale timestamp"
        mac = hmac.new(self._secret, b"v0:" + stamp.encode() + b":" + body, sha256)
        if not hmac.compare_digest("v0=" + mac.hexdigest(), signature):
            return "a wrong signature"
        return None

    @staticmethod
    def _malformed(body: bytes) -> tuple[str | None, dict[str, list[str]]]:
        """Why a signed body is not a request gpubot can read, and the form."""
        try:
            text = body.decode("utf-8")
            form = parse_qs(text, keep_blank_values=True, strict_parsing=bool(text),
                            errors="strict", max_num_fields=MAX_FIELDS)
        except UnicodeDecodeError:
            return "a body that is not UTF-8", {}
        except ValueError:
            return "a body that is not a form", {}
        payload = form.get("payload")
        if payload is not None:
            why = _bad_payload(payload[0])
            if why:
                return why, form
        return None, form


def _bad_event(body: bytes) -> str | None:
    """Why an Events API body is not the object the bot's listeners read, or None."""
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        return "an event that is not JSON"
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        return "an event that is not an object with a type"
    event = value.get("event")
    if event is not None and not (isinstance(event, dict) and all(
            isinstance(event.get(k, ""), str)
            for k in ("type", "user", "channel", "text", "ts", "thread_ts"))):
        return "an event whose fields are not strings"
    return None


def _bad_payload(text: str) -> str | None:
    """Why an interactive ``payload`` is not the shape the bot's listeners read."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return "a payload that is not JSON"
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        return "a payload that is not an object with a type"
    for key in ("user", "channel", "container", "message", "team"):
        part = value.get(key)
        if part is not None and (not isinstance(part, dict) or not all(
                isinstance(v, str | bool | int | None) for k, v in part.items()
                if k in ("id", "name", "ts", "message_ts", "channel_id", "is_ephemeral"))):
            return f"a payload whose {key} is not an object of strings"
    for key in ("response_url", "trigger_id"):
        if value.get(key) is not None and not isinstance(value.get(key), str):
            return f"a payload whose {key} is not a string"
    actions = value.get("actions")
    if actions is not None and not (isinstance(actions, list) and all(
            isinstance(a, dict) and isinstance(a.get("action_id", ""), str)
            and isinstance(a.get("value", ""), str) for a in actions)):
        return "a payload whose actions are not a list of objects"
    return None


def _refuse(start_response: StartResponse, status: int, peer: str, why: str) -> list[bytes]:
    log.info("refused a request from %s: %s", peer, why)
    return _reply(start_response, status, json.dumps({"error": "invalid request"}),
                  "application/json")


_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 405: "Method Not Allowed",
            413: "Payload Too Large"}


def _reply(start_response: StartResponse, status: int, body: str,
           content_type: str = "text/plain; charset=utf-8") -> list[bytes]:
    data = body.encode()
    start_response(f"{status} {_REASONS[status]}", [("Content-Type", content_type),
                                                    ("Content-Length", str(len(data)))])
    return [data]


# -- the server ----------------------------------------------------------------------------------


class _Channel(HTTPChannel):
    """Remembers when the request being read began."""

    request_started: float | None = None

    def received(self, data: bytes) -> bool:
        if self.request is None and self.request_started is None and data:
            self.request_started = time.monotonic()
        done = super().received(data)
        if self.request is None:  # read in full (or refused): the next one starts afresh
            self.request_started = None
        return bool(done)


class GuardedServer(TcpWSGIServer):
    channel_class = _Channel

    def __init__(self, application: Any, *, read_deadline: float = READ_DEADLINE,
                 **kw: Any) -> None:
        kw.setdefault("connection_limit", CONNECTION_LIMIT)
        kw.setdefault("cleanup_interval", 1)
        self.read_deadline = read_deadline
        super().__init__(application, adj=Adjustments(**kw))

    def maintenance(self, now: Any) -> None:
        """waitress closes idle connections; also close requests read for too long."""
        super().maintenance(now)
        cutoff = time.monotonic() - self.read_deadline
        for channel in list(self._channels()):
            started = getattr(channel, "request_started", None)
            if started is not None and started < cutoff and not channel.requests:
                log.info("closed a connection from %s: its request took over %gs to arrive",
                         channel.addr[0] if channel.addr else "?", self.read_deadline)
                channel.will_close = True

    def readable(self) -> bool:
        if self.accepting and len(cast(Any, self)._map) >= self.adj.connection_limit:
            # Not waitress's overflow state (which stops accepting until connections
            # time out on their own): make room, and accept again on the next pass.
            self._shed()
            now = time.time()
            if now >= self.next_channel_cleanup:
                self.next_channel_cleanup = int(now) + self.adj.cleanup_interval
                self.maintenance(now)
            return False
        return bool(super().readable())

    def _channels(self) -> list[Any]:
        channels: Any = self.active_channels  # the stubs type it as one channel
        return list(channels.values())

    def _shed(self) -> None:
        """At the limit: close the slowest unfinished requests, then the longest idle
        connections (a tenth of the limit at once), so that new clients get in."""
        waiting = [c for c in self._channels() if not c.requests and not c.will_close]
        waiting.sort(key=lambda c: (getattr(c, "request_started", None) is None,
                                    getattr(c, "request_started", None) or c.last_activity))
        # Marked only: the loop closes them on its next pass (closing a socket while the
        # loop gathers the ones to poll would hand select() a dead descriptor).
        for channel in waiting[: max(1, self.adj.connection_limit // 10)]:
            channel.will_close = True
