"""The HTTP side of ``gpubot serve``: waitress (a production WSGI server) on one address.

    GET  /healthz        200 while the process runs
    GET  /readyz         200 when Slack is connected and the cluster is reachable, else 503
    GET  /metrics        Prometheus text format (gpubot_* metrics)
    POST /slack/events   HTTP mode only: slash commands and interactivity, signed by Slack
    POST /alertmanager   Alertmanager's webhook, in both modes (bot/alerts)

Why waitress: Bolt's sync ``App`` is a WSGI app, the diagnosis code is blocking, and
waitress is pure Python (no compiler on the image), multi-threaded, production-grade (it
buffers slow clients before a worker thread sees the request, caps body sizes) and stops
cleanly from another thread, which tests and SIGTERM both need. ``app.start()`` is a
single-threaded development server on 0.0.0.0, so it is not used.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from waitress import wasyncore

from bot.slack.app import SlackBot
from bot.slack.frontdoor import MAX_BODY, FrontDoor, GuardedServer

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment

log = logging.getLogger("gpubot.server")

EVENTS_PATH = "/slack/events"
ALERTS_PATH = "/alertmanager"  # bot/alerts/receiver.py, when GPUBOT_ALERT_TOKEN is set
LOOP_TIMEOUT = 0.5  # seconds; bounds how long stop() waits if the wake-up pipe is gone


class WSGIApp:
    """Routes the four paths; /slack/events goes to Bolt's WSGI adapter (HTTP mode)."""

    def __init__(self, bot: SlackBot) -> None:
        self.bot = bot
        self.slack: Callable[..., Iterable[bytes]] | None = None
        if bot.settings.mode == "http":
            from slack_bolt.adapter.wsgi import SlackRequestHandler

            self.slack = FrontDoor(SlackRequestHandler(bot.app, path=EVENTS_PATH),
                                   bot.settings.signing_secret or "",
                                   command=bot.settings.command, max_body=MAX_BODY)

    def __call__(self, environ: WSGIEnvironment,
                 start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        method = environ.get("REQUEST_METHOD", "GET")
        if path == EVENTS_PATH and self.slack is not None:
            return self.slack(environ, start_response)
        if path == ALERTS_PATH:
            if self.bot.alerts is None:
                return _reply(start_response, 404, b"alert receiver off: set GPUBOT_ALERT_TOKEN\n")
            return self.bot.alerts(environ, start_response)  # type: ignore[no-any-return]
        if method not in ("GET", "HEAD"):
            return _reply(start_response, 405, b"method not allowed\n")
        if path == "/healthz":
            return _reply(start_response, 200, b"ok\n")
        if path == "/readyz":
            slack, cluster = self.bot.check_slack(), self.bot.check_cluster()
            body = json.dumps({"slack": slack, "cluster": cluster}).encode() + b"\n"
            return _reply(start_response, 200 if slack and cluster else 503, body,
                          "application/json")
        if path == "/metrics":
            return _reply(start_response, 200, self.bot.metrics.render(),
                          self.bot.metrics.content_type)
        return _reply(start_response, 404, b"not found\n")


def _drop_closed(socket_map: dict[int, Any]) -> None:
    """Forget the map's file descriptors that are closed, so the next poll can run."""
    for fd in list(socket_map):
        try:
            os.fstat(fd)
        except OSError:
            socket_map.pop(fd, None)


def _reply(start_response: StartResponse, status: int, body: bytes,
           content_type: str = "text/plain; charset=utf-8") -> list[bytes]:
    reason = {200: "OK", 404: "Not Found", 405: "Method Not Allowed",
              503: "Service Unavailable"}[status]
    start_response(f"{status} {reason}", [("Content-Type", content_type),
                                          ("Content-Length", str(len(body)))])
    return [body]


class BotServer:
    """waitress serving ``WSGIApp`` in a thread; Socket Mode connected when configured."""

    def __init__(self, bot: SlackBot, host: str | None = None, port: int | None = None,
                 threads: int | None = None) -> None:
        self.bot = bot
        s = bot.settings
        self.server: Any = GuardedServer(
            WSGIApp(bot), host=host or s.host, port=port if port is not None else s.port,
            threads=threads or s.http_threads, ident="gpubot", max_request_body_size=MAX_BODY,
            channel_timeout=30, clear_untrusted_proxy_headers=True,
        )
        self._thread: threading.Thread | None = None
        self.stopped = threading.Event()

    @property
    def host(self) -> str:
        return str(self.server.effective_host)

    @property
    def port(self) -> int:
        return int(self.server.effective_port)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> BotServer:
        self._thread = threading.Thread(target=self._serve, name="gpubot-http", daemon=True)
        self._thread.start()
        log.info("serving /healthz /readyz /metrics%s on %s",
                 f" {EVENTS_PATH}" if self.bot.settings.mode == "http" else "", self.url)
        if self.bot.settings.mode == "socket":
            self.bot.connect_socket_mode()
            log.info("Socket Mode connected")
        else:
            self.bot.check_slack()
        return self

    def _serve(self) -> None:
        """waitress's I/O loop, one poll at a time so that ``stop`` needs no cross-thread call.

        waitress's own ``run`` only ends when its map is emptied, which from another thread
        means writing to its wake-up pipe; if waitress has closed that pipe after an error,
        the write fails and the server never stops. Here the loop checks ``stopped`` and
        closes every socket itself, in the thread that owns them.
        """
        srv = self.server
        try:
            while srv._map and not self.stopped.is_set():
                try:
                    wasyncore.loop(timeout=LOOP_TIMEOUT, map=srv._map, count=1)
                except OSError as err:  # a socket closed under select() by another thread
                    if err.errno != errno.EBADF:
                        raise
                    _drop_closed(srv._map)
        finally:
            wasyncore.close_all(srv._map)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop taking requests, let running diagnoses answer (up to ``timeout``), close."""
        if self.stopped.is_set():
            return
        self.stopped.set()
        srv = self.server
        if self._thread is None:
            wasyncore.close_all(srv._map)
        else:
            try:
                srv.pull_trigger()  # wake the loop now rather than at its next timeout
            except OSError:
                log.debug("waitress's wake-up pipe is closed; the loop stops on its timeout")
            self._thread.join(timeout)
        srv.task_dispatcher.shutdown(timeout=timeout)
        self.bot.close(timeout)

    def __enter__(self) -> BotServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
