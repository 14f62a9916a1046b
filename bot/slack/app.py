"""The Bolt app: ``/gpu`` commands and the card's buttons, over the existing handlers.

    bot = SlackBot(settings, view)          # view: a ClusterView (snapshot or live)
    bot.app                                 # the slack_bolt.App, for an adapter
    bot.connect_socket_mode()               # Socket Mode (HTTP mode: serve bot.app)

A command is acknowledged at once (ephemeral "Diagnosing ...") and diagnosed in a bounded
pool (``pool.DiagnosisPool``) under a deadline. The answer is a verdict card posted in the
channel with ``chat.postMessage``; the proof goes in the card's thread (``thread_ts``);
a message cut to Block Kit's limits gets the full report attached as files. "Re-check"
edits the card in place with ``chat.update`` and says what changed. Buttons for actions
open an approval request (``approvals.py``) when the bot runs on a live cluster.

Each listener is a plain method, registered in ``_build_app``; the guards (dedupe, rate
limit, access) run before any work, in this order: repeated delivery, parse, rate limit,
channel -> namespace access.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from slack_bolt import Ack, App, BoltRequest, BoltResponse
from slack_bolt.logger.messages import warning_client_prioritized_and_token_skipped
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry import (
    ConnectionErrorRetryHandler,
    RateLimitErrorRetryHandler,
    RetryHandler,
    RetryState,
)
from slack_sdk.http_retry.builtin_handlers import ServerErrorRetryHandler
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.webhook import WebhookClient

from bot.metrics import METRIC_COMMANDS
from bot.slack import messages, scope
from bot.slack.access import AccessPolicy, RateLimiter, Refusal
from bot.slack.approvals import ACTIONS_OFF, Approvals
from bot.slack.approvals import HELP as APPROVAL_HELP
from bot.slack.blocks import (
    MESSAGE_TEXT,
    Changes,
    Message,
    Rendered,
    Renderer,
    cut_mrkdwn,
    diff_codes,
)
from bot.slack.commands import ROUTES, Command, CommandError, parse, parse_args
from bot.slack.commands import run as run_command
from bot.slack.config import Settings
from bot.slack.dedupe import Dedupe
from bot.slack.frontdoor import MAX_TEXT as MAX_COMMAND_TEXT
from bot.slack.mentions import Mentions
from bot.slack.metrics import Metrics
from bot.slack.mrkdwn import code
from bot.slack.pool import Deadline, DiagnosisPool
from bot.slack.reads import GuardedView, reading
from handlers.errors import GpubotError
from handlers.model import Diagnosis
from handlers.view import ClusterView, Reader

log = logging.getLogger("gpubot.slack")

RECHECK = "gpubot_recheck"
ACTION = re.compile(r"^gpubot_action_\d+$")
DEFAULT_API_URL = "https://slack.com/api/"


class _CountingRateLimitHandler(RateLimitErrorRetryHandler):
    """Waits for Retry-After on a 429 (slack_sdk's handler) and counts the retry."""

    def __init__(self, metrics: Metrics, max_retry_count: int) -> None:
        super().__init__(max_retry_count=max_retry_count)
        self.metrics = metrics

    def prepare_for_next_attempt(self, *, state: RetryState, request: HttpRequest,
                                 response: HttpResponse | None = None,
                                 error: Exception | None = None) -> None:
        self.metrics.slack_api_retries.labels(reason="rate_limited").inc()
        log.info("Slack answered 429 to %s; retrying after Retry-After", _method(request.url))
        super().prepare_for_next_attempt(state=state, request=request, response=response,
                                         error=error)


def _method(url: str) -> str:
    return url.rstrip("/").rsplit("/", 1)[-1].split("?")[0]


def retry_handlers(metrics: Metrics, retries: int) -> list[RetryHandler]:
    return [
        _CountingRateLimitHandler(metrics, max_retry_count=retries),
        ConnectionErrorRetryHandler(max_retry_count=min(retries, 2)),
        ServerErrorRetryHandler(max_retry_count=min(retries, 2)),
    ]


def make_client(settings: Settings, metrics: Metrics) -> WebClient:
    """The Web API client: ``SLACK_API_URL`` as base, 429s retried after Retry-After."""
    return WebClient(
        token=settings.bot_token,
        base_url=settings.api_url or DEFAULT_API_URL,
        timeout=15,
        retry_handlers=retry_handlers(metrics, settings.slack_retries),
        logger=logging.getLogger("gpubot.slack.web"),
    )


@dataclass(frozen=True)
class Request:
    """Where a command came from and where its answers go."""

    user: str
    channel: str
    channel_name: str
    response_url: str | None
    received: float
    card_ts: str | None = None  # a Re-check: the card to edit
    thread_ts: str | None = None  # asked in a thread (a mention): every answer goes there


def _str(d: Any, *path: str) -> str:
    for key in path:
        d = d.get(key) if isinstance(d, dict) else None
    return d if isinstance(d, str) else ""


class SlackBot:
    def __init__(
        self,
        settings: Settings,
        view: ClusterView,
        *,
        metrics: Metrics | None = None,
        client: WebClient | None = None,
        renderer: Renderer | None = None,
        cluster_probe: Callable[[], bool] | None = None,
        clock: Callable[[], float] = time.monotonic,
        approvals: Approvals | None = None,
    ) -> None:
        self.settings = settings
        self.approvals = approvals  # actions behind an approval (bot/slack/approvals.py)
        self.view = view
        self.metrics = metrics or Metrics()
        self.client = client or make_client(settings, self.metrics)
        self.renderer = renderer or Renderer(runbook_base=settings.runbook_url)
        self.cluster_probe = cluster_probe
        self._clock = clock
        self.pool = DiagnosisPool(settings.workers, settings.queue_size,
                                  max_stuck=settings.max_stuck)
        self.metrics.watch_pool(lambda: self.pool.queued, lambda: self.pool.running,
                                lambda: self.pool.stuck)
        self.metrics.watch_cluster(view)
        self.policy = AccessPolicy(settings.channel_namespaces,
                                   restrict_cluster_commands=settings.restrict_cluster_commands)
        self.limiter = RateLimiter(settings.rate_limit)
        self.dedupe = Dedupe(settings.dedupe_ttl)
        # Follow-ups that must not hold up an ack (ephemeral notes, approval answers).
        self.io = ThreadPoolExecutor(4, thread_name_prefix="gpubot-slack-io")
        # Bolt's pool, for anything it runs asynchronously (lazy listeners: none today).
        self.listener_executor = ThreadPoolExecutor(4, thread_name_prefix="gpubot-listener")
        self._rechecking: set[tuple[str, str]] = set()
        self._lock = threading.Lock()
        self.socket_handler: Any = None
        self.alerts: Any = None  # bot.alerts.receiver.AlertReceiver (POST /alertmanager)
        self.prometheus: Any = None  # handlers.runtime.source.MetricsSource, if configured
        self._auth: tuple[float, bool] | None = None
        self._cluster: tuple[float, bool] | None = None
        self.app = self._build_app()

    # -- wiring -----------------------------------------------------------------------------

    def _build_app(self) -> App:
        http = self.settings.mode == "http"
        app = App(
            client=self.client,
            signing_secret=self.settings.signing_secret or "socket-mode-has-no-signing-secret",
            token_verification_enabled=False,  # auth.test runs in check_slack(), not here
            request_verification_enabled=http,
            # Our listeners only check, queue and ack (milliseconds; the diagnosis runs in
            # self.pool), so Bolt runs them in the request's own thread and answers when they
            # return: no hop through Bolt's 5-thread listener pool, no 10 ms ack polling.
            process_before_response=True,
            listener_executor=self.listener_executor,
            logger=_bolt_logger(),
        )
        app.middleware(self.drop_repeats)
        app.command(self.settings.command)(self.on_command)
        Mentions(self).register(app)
        app.action(RECHECK)(self.on_recheck)
        app.action(ACTION)(self.on_action)
        if self.approvals is not None:
            self.approvals.attach(self, app)
        app.error(self.on_error)
        return app

    def connect_socket_mode(self) -> None:
        """Open the Socket Mode connection (returns once connected, keeps it up after)."""
        from slack_bolt.adapter.socket_mode import SocketModeHandler

        self.socket_handler = SocketModeHandler(self.app, app_token=self.settings.app_token,
                                                logger=logging.getLogger("gpubot.slack.socket"))
        self.socket_handler.connect()

    def close(self, timeout: float = 10.0) -> None:
        if self.socket_handler is not None:
            try:
                self.socket_handler.close()
            except Exception:  # closing a dead socket must not stop the shutdown
                log.debug("closing Socket Mode", exc_info=True)
        if self.alerts is not None:
            self.alerts.close(timeout)
        self.pool.shutdown(timeout)
        if self.approvals is not None:
            self.approvals.close()
        if self.prometheus is not None and hasattr(self.prometheus, "close"):
            self.prometheus.close()
        self.io.shutdown(wait=True)
        self.listener_executor.shutdown(wait=False)

    # -- readiness --------------------------------------------------------------------------

    def check_slack(self, max_age: float = 60.0) -> bool:
        """Socket Mode: connected. HTTP mode: auth.test answered ok (cached ``max_age``)."""
        if self.settings.mode == "socket":
            ok = bool(self.socket_handler is not None and self.socket_handler.client.is_connected())
        else:
            now = self._clock()
            if self._auth is None or now - self._auth[0] > max_age:
                try:
                    ok = bool(self.client.auth_test().get("ok"))
                except Exception as err:  # SlackApiError, URLError: not ready, say why
                    log.warning("auth.test failed: %s", _error_name(err))
                    ok = False
                self._auth = (now, ok)
            ok = self._auth[1]
        self.metrics.slack_connected.set(1 if ok else 0)
        return ok

    def check_cluster(self, max_age: float = 10.0) -> bool:
        if self.cluster_probe is None:
            ok = True
        else:
            now = self._clock()
            if self._cluster is None or now - self._cluster[0] > max_age:
                try:
                    self._cluster = (now, bool(self.cluster_probe()))
                except Exception:
                    log.warning("cluster probe failed", exc_info=True)
                    self._cluster = (now, False)
            ok = self._cluster[1]
        self.metrics.cluster_reachable.set(1 if ok else 0)
        return ok

    # -- guards -----------------------------------------------------------------------------

    def drop_repeats(self, req: BoltRequest, resp: BoltResponse,
                     next: Callable[[], BoltResponse]) -> BoltResponse | None:
        """A retried delivery, or a trigger_id seen before, is acknowledged and dropped."""
        retry = req.headers.get("x-slack-retry-num")
        body = req.body if isinstance(req.body, dict) else {}
        key = str(body.get("trigger_id") or body.get("event_id") or "")
        what = _str(body, "command") or _str(body, "type") or "request"
        if retry:
            self.metrics.duplicates.labels(why="retry_header").inc()
            log.info("dropped a retried delivery of %s (X-Slack-Retry-Num %s)", what, retry[0])
            return BoltResponse(status=200, body="")
        if key and not self.dedupe.first(key):
            self.metrics.duplicates.labels(why="trigger_id").inc()
            log.info("dropped a repeated delivery of %s (trigger_id seen before)", what)
            return BoltResponse(status=200, body="")
        next()
        return None

    def _limit(self, user: str, name: str) -> str | None:
        wait = self.limiter.check(user)
        if wait:
            self.metrics.count(name, "rate_limited")
            log.info("rate limit: user %s, %s refused for %.0fs", user, name, wait)
            return messages.rate_limited(self.limiter.limit, wait)
        return None

    # -- /gpu -------------------------------------------------------------------------------

    def on_command(self, ack: Ack, body: dict[str, Any]) -> None:
        if Approvals.handles(_str(body, "text")):  # restart-plugin, cordon, ..., audit
            if self.approvals is not None:
                self.approvals.on_command(ack, body)
            else:
                ack(text=ACTIONS_OFF, response_type="ephemeral")
            return
        req = Request(_str(body, "user_id"), _str(body, "channel_id"),
                      _str(body, "channel_name"), _str(body, "response_url") or None,
                      self._clock())

        def reply(text: str, blocks: Sequence[dict[str, Any]] | None = None) -> None:
            ack(text=text, blocks=blocks, response_type="ephemeral")

        self.handle(_str(body, "text"), req, reply)

    def handle(self, text: str, req: Request, reply: Callable[..., Any],
               prefix: str | None = None) -> None:
        """A command's text, from ``/gpu`` or a mention: the guards, then the pool.
        ``reply(text=..., blocks=...)`` answers the asker privately at once; hints show
        commands as ``prefix`` (default: the slash command) would take them."""
        slash = prefix or self.settings.command
        refused = self._limit(req.user, "unknown")  # before parsing: parsing is the cost
        if refused:
            reply(text=refused)
            return
        if len(text) > MAX_COMMAND_TEXT:  # a mention; /slack/events refuses these earlier
            self.metrics.count("unknown", "usage_error")
            reply(text=f"That command is {len(text):,} characters long; gpubot reads at most "
                       f"{MAX_COMMAND_TEXT:,}.")
            return
        if Approvals.handles(text):  # only a mention gets here: actions need the slash path
            asked = f"{self.settings.command} {' '.join(text.split()[:2])}"
            reply(text=f":point_right: Actions are asked for with the slash command: "
                       f"{code(asked)}")
            return
        try:
            cmd = parse(text)
        except CommandError as err:
            self.metrics.count("unknown", "usage_error")
            reply(text=messages.usage(slash, str(err), err.example or "help"))
            return
        log.info("%s %s from user %s in %s", slash, cmd.line(), req.user, req.channel)
        if cmd.name == "help":
            self.metrics.count("help", "help")
            msg = self.help_message(cmd.target, req, slash)
            reply(text=msg["text"], blocks=msg["blocks"])
            return
        try:
            resolved = self.policy.resolve(cmd, req.channel, req.channel_name, req.user)
        except GpubotError as err:  # a target parse_target refuses (checked in parse too)
            self.metrics.count(cmd.name, "usage_error")
            reply(text=messages.usage(slash, str(err), cmd.route.example))
            return
        if isinstance(resolved, Refusal):
            self.metrics.count(cmd.name, "refused")
            reply(text=f":no_entry: {resolved.message}")
            return
        if self._submit(resolved, req) is None:
            self.metrics.count(cmd.name, "busy")
            reply(text=messages.busy(self.pool.queued))
            return
        reply(text=messages.diagnosing(resolved.line(), self.view.source))

    def help_message(self, topic: str | None, req: Request,
                     command: str | None = None) -> dict[str, Any]:
        allowed = self.policy.allowed(req.channel, req.channel_name)
        routes = [r for r in ROUTES.values() if topic is None or r.name in (topic, "help")]
        msg = self.renderer.render_template(
            "slack/help.j2", command=command or self.settings.command, topic=topic,
            routes=[{"usage": r.usage, "summary": r.summary, "example": r.example}
                    for r in routes] + (list(APPROVAL_HELP) if self.approvals is not None
                                        and topic is None else []),
            allowed=(sorted(allowed) if allowed is not None
                     else None) if self.policy.channel_map is not None else None,
        )[0]
        return {"text": msg.text, "blocks": msg.blocks, "response_type": "ephemeral"}

    # -- buttons ----------------------------------------------------------------------------

    def on_recheck(self, ack: Ack, body: dict[str, Any]) -> None:
        ack()
        received = self._clock()
        action = (body.get("actions") or [{}])[0]
        req = Request(_str(body, "user", "id"), _str(body, "channel", "id"),
                      _str(body, "channel", "name"), _str(body, "response_url") or None,
                      received, card_ts=_str(body, "container", "message_ts")
                      or _str(body, "message", "ts"),
                      thread_ts=_str(body, "container", "thread_ts") or None)
        try:
            value = json.loads(action.get("value") or "")
            argv = value["q"]
            if not (isinstance(argv, list) and all(isinstance(a, str) for a in argv)
                    and 0 < len(argv) <= 12):
                raise ValueError("q")
            before = value.get("c")
            codes = [str(c) for c in before] if isinstance(before, list) else None
            cmd = parse_args(list(argv))
        except (ValueError, KeyError, TypeError, CommandError):
            self.metrics.count("recheck", "usage_error")
            self._later(req, messages.bad_button())
            return
        refused = self._limit(req.user, cmd.name)
        if refused:
            self._later(req, refused)
            return
        resolved = self.policy.resolve(cmd, req.channel, req.channel_name, req.user)
        if isinstance(resolved, Refusal):
            self.metrics.count(cmd.name, "refused")
            self._later(req, f":no_entry: {resolved.message}")
            return
        key = (req.channel, req.card_ts or "")
        with self._lock:
            if key in self._rechecking:
                self.metrics.duplicates.labels(why="recheck_running").inc()
                return
            self._rechecking.add(key)
        if self._submit(resolved, req, before=codes) is None:
            with self._lock:
                self._rechecking.discard(key)
            self.metrics.count(cmd.name, "busy")
            self._later(req, messages.busy(self.pool.queued))

    def on_action(self, ack: Ack, body: dict[str, Any]) -> None:
        """A finding's action button: an approval request, or (approvals not enabled) a
        note saying so."""
        if self.approvals is not None:
            self.approvals.on_finding(ack, body)
            return
        ack()
        action = (body.get("actions") or [{}])[0]
        req = Request(_str(body, "user", "id"), _str(body, "channel", "id"),
                      _str(body, "channel", "name"), _str(body, "response_url") or None,
                      self._clock())
        label = _str(action, "text", "text") or "this action"
        try:
            value = json.loads(action.get("value") or "{}")
            log.info("action %s on %s (for %s) clicked by %s: approvals not enabled",
                     value.get("a"), value.get("n"), value.get("t"), req.user)
        except (ValueError, AttributeError):
            log.info("action button with an unreadable value clicked by %s", req.user)
        self.metrics.count("action", "not_enabled")
        self._later(req, messages.approvals_disabled(label))

    def on_error(self, error: Exception, body: dict[str, Any]) -> None:
        log.error("unhandled error in a listener for %s: %s",
                  _str(body, "command") or _str(body, "type") or "a request",
                  type(error).__name__, exc_info=error)

    # -- the work ---------------------------------------------------------------------------

    def _submit(self, cmd: Command, req: Request, before: list[str] | None = None) -> Any:
        line = cmd.line()
        ran: list[float] = []
        allowed = self.policy.allowed(req.channel, req.channel_name)

        def work(deadline: Deadline) -> Diagnosis:
            diag = self.diagnose(cmd, deadline, allowed)
            ran.append(deadline.elapsed())
            return diag

        def deliver(diag: Diagnosis) -> None:
            try:
                self.metrics.diagnosis_seconds.labels(command=cmd.name).observe(
                    ran[0] if ran else 0.0)
                if req.card_ts:
                    self.update_card(cmd, diag, req, before)
                else:
                    self.post_answer(cmd, diag, req)
            finally:
                self._done_rechecking(req)

        def on_error(err: BaseException) -> None:
            self._done_rechecking(req)
            if isinstance(err, GpubotError):
                self.metrics.count(cmd.name, "not_found" if type(err).__name__ ==
                                   "TargetNotFound" else "usage_error")
                self._respond(req, messages.failed(line, scope.error_text(err, allowed)))
            else:
                self.metrics.count(cmd.name, "error")
                self._respond(req, messages.internal_error(line))

        def on_timeout(deadline: Deadline) -> None:
            self._done_rechecking(req)
            self.metrics.count(cmd.name, "timeout")
            self.metrics.diagnosis_seconds.labels(command=cmd.name).observe(deadline.seconds)
            self._respond(req, messages.timed_out(line, deadline.seconds, deadline.doing,
                                                  self.view.source))

        return self.pool.submit(line, work, deliver=deliver, on_error=on_error,
                                on_timeout=on_timeout, seconds=self.settings.deadline)

    def _done_rechecking(self, req: Request) -> None:
        if req.card_ts:
            with self._lock:
                self._rechecking.discard((req.channel, req.card_ts))

    def diagnose(self, cmd: Command, deadline: Deadline,
                 allowed: frozenset[str] | None = None) -> Diagnosis:
        """``allowed``: the namespaces the asking channel may query (None: all)."""
        view = GuardedView(self.view, deadline)
        metrics = self.prometheus if cmd.name in METRIC_COMMANDS else None
        with reading(self.view):  # a watch cache: one state of it
            diag = run_command(Reader(view, metrics=metrics), cmd)
        for problem in scope.visible_problems(view.problems, allowed):
            line = f"not read: {problem}"
            if line not in diag.unchecked:
                diag.unchecked.append(line)
        return diag

    def render(self, cmd: Command, diag: Diagnosis, req: Request,
               changes: Changes | None = None) -> Rendered:
        return self.renderer.render(diag, argv=cmd.argv(), source=self.view.source,
                                    requester=req.user or None, changes=changes,
                                    command_prefix=self.settings.command)

    def post_answer(self, cmd: Command, diag: Diagnosis, req: Request) -> None:
        """The card in the channel, the proof in its thread, files if anything was cut."""
        rendered = self.render(cmd, diag, req)
        try:
            ts = self._post(req.channel, rendered.card, thread_ts=req.thread_ts)
        except SlackApiError as err:
            self._cannot_post(cmd, req, rendered, err)
            return
        self._post_thread(req.channel, req.thread_ts or ts, rendered, cmd, diag)
        self.metrics.count(cmd.name, "answered")
        self.metrics.answer_seconds.labels(command=cmd.name).observe(self._clock() - req.received)
        if cmd.name == "nodes":  # drawing takes a second: not on the worker that answers
            threading.Thread(target=self.attach_chart, args=(req.channel, ts, diag),
                             daemon=True, name="gpubot-chart").start()

    def update_card(self, cmd: Command, diag: Diagnosis, req: Request,
                    before: list[str] | None) -> None:
        """Re-check: the card edited in place, saying what changed; new proof if it did."""
        changes = diff_codes(before, [f.code for f in diag.findings])
        changes.by = req.user or None
        rendered = self.render(cmd, diag, req, changes)
        assert req.card_ts is not None
        try:
            self._call("chat_update", channel=req.channel, ts=req.card_ts,
                       text=rendered.card.text, blocks=rendered.card.blocks)
        except SlackApiError as err:
            self._respond(req, messages.cannot_post(_error_name(err)))
            return
        if changes.added or changes.resolved or not changes.known:
            self._post_thread(req.channel, req.thread_ts or req.card_ts, rendered, cmd, diag)
        self.metrics.count("recheck", "answered")
        self.metrics.answer_seconds.labels(command="recheck").observe(
            self._clock() - req.received)

    def _post_thread(self, channel: str, ts: str, rendered: Rendered, cmd: Command,
                     diag: Diagnosis) -> None:
        for m in rendered.thread:
            # A failed part is counted and logged in _call; the card and the others stand.
            with contextlib.suppress(SlackApiError):
                self._post(channel, m, thread_ts=ts)
        if rendered.truncated:
            self.metrics.truncated.inc()
            self.attach_report(channel, ts, cmd, diag)

    def attach_chart(self, channel: str, thread_ts: str, diag: Diagnosis) -> None:
        """`nodes`: the supply-and-demand chart as a PNG in the thread."""
        from bot.chart import render_png
        from handlers.chart import chart_data

        try:
            png = render_png(chart_data(diag))
        except Exception:  # the answer stands without its picture
            log.warning("could not draw the nodes chart", exc_info=True)
            return
        try:
            self._call("files_upload_v2", file_uploads=[{
                "content": png, "filename": "gpubot-nodes.png",
                "title": "GPUs per model: supply and demand"}],
                channel=channel, thread_ts=thread_ts)
        except SlackApiError:
            pass  # counted and logged in _call
        except Exception:  # its own thread: nothing above it would log this
            log.warning("could not upload the nodes chart", exc_info=True)

    def attach_report(self, channel: str, thread_ts: str, cmd: Command, diag: Diagnosis) -> None:
        """The full report as files in the thread (files.getUploadURLExternal, upload,
        files.completeUploadExternal)."""
        from bot.render import render_json, render_text

        stem = re.sub(r"[^A-Za-z0-9._-]+", "-", f"gpubot-{cmd.name}-{diag.target}").strip("-")
        uploads: list[dict[str, Any]] = []
        try:
            uploads.append({"content": render_text(diag, source=self.view.source),
                            "filename": f"{stem}.txt", "title": f"{stem}.txt"})
        except Exception:  # no CLI template for this command: the JSON still says it all
            log.debug("no text report for %s", cmd.name, exc_info=True)
        uploads.append({"content": render_json(diag, source=self.view.source),
                        "filename": f"{stem}.json", "title": f"{stem}.json"})
        with contextlib.suppress(SlackApiError):
            self._call("files_upload_v2", file_uploads=uploads, channel=channel,
                       thread_ts=thread_ts,
                       initial_comment="The full report (the messages above were cut to "
                                       "Slack's limits).")

    def _post(self, channel: str, m: Message, thread_ts: str | None = None) -> str:
        args: dict[str, Any] = {"channel": channel, "text": m.text, "blocks": m.blocks,
                                "unfurl_links": False, "unfurl_media": False}
        if thread_ts:
            args["thread_ts"] = thread_ts
        resp = self._call("chat_postMessage", **args)
        return str(resp.get("ts"))

    def _call(self, method: str, **kwargs: Any) -> Any:
        try:
            return getattr(self.client, method)(**kwargs)
        except SlackApiError as err:
            name = _error_name(err)
            self.metrics.slack_api_errors.labels(method=method, error=name).inc()
            log.error("Slack %s failed: %s", method, name)
            raise
        except Exception as err:  # URLError, timeouts after the retries
            self.metrics.slack_api_errors.labels(method=method, error=type(err).__name__).inc()
            log.error("Slack %s failed: %s", method, type(err).__name__)
            raise SlackApiError(  # type: ignore[no-untyped-call]
                type(err).__name__, {"ok": False, "error": type(err).__name__}) from err

    def _cannot_post(self, cmd: Command, req: Request, rendered: Rendered,
                     err: SlackApiError) -> None:
        """The bot is not in the channel (or it is a DM): answer the asker privately."""
        name = _error_name(err)
        self.metrics.count(cmd.name, "error")
        blocks: Sequence[dict[str, Any]] = rendered.card.blocks
        self._respond(req, messages.cannot_post(name), blocks=[
            {"type": "section", "text": {"type": "mrkdwn", "text": messages.cannot_post(name)}},
            *[b for b in blocks if b.get("type") != "actions"]])

    def _respond(self, req: Request, text: str,
                 blocks: Sequence[dict[str, Any]] | None = None) -> None:
        """An ephemeral message to the asker via the response_url (retried on 429)."""
        text = cut_mrkdwn(text, MESSAGE_TEXT)  # whatever the user's arguments were
        if not req.response_url:
            with contextlib.suppress(SlackApiError):
                self._call("chat_postEphemeral", channel=req.channel, user=req.user, text=text,
                           blocks=list(blocks) if blocks else None, thread_ts=req.thread_ts)
            return
        hook = WebhookClient(req.response_url, timeout=15,
                             retry_handlers=retry_handlers(self.metrics,
                                                           self.settings.slack_retries))
        try:
            r = hook.send(text=text, blocks=list(blocks) if blocks else None,
                          response_type="ephemeral", replace_original=False)
            if r.status_code != 200:
                self.metrics.slack_api_errors.labels(method="response_url",
                                                     error=str(r.status_code)).inc()
                log.error("response_url answered %s", r.status_code)
        except Exception as err:
            self.metrics.slack_api_errors.labels(method="response_url",
                                                 error=type(err).__name__).inc()
            log.error("response_url failed: %s", type(err).__name__)

    def _later(self, req: Request, text: str) -> None:
        """``_respond`` off the listener thread (a button's ack carries no message)."""
        try:
            self.io.submit(self._respond, req, text)
        except RuntimeError:  # shutting down
            self._respond(req, text)


class _KnownNoise(logging.Filter):
    """Bolt reads SLACK_BOT_TOKEN from the environment even when given a ``client``
    (slack_bolt/app/app.py: ``token = token or os.environ.get(...)``), then warns at every
    start that the token is unused. It is the client's own token: nothing to act on."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != warning_client_prioritized_and_token_skipped()


def _bolt_logger() -> logging.Logger:
    logger = logging.getLogger("gpubot.slack.bolt")
    if not any(isinstance(f, _KnownNoise) for f in logger.filters):
        logger.addFilter(_KnownNoise())
    return logger


def _error_name(err: BaseException) -> str:
    if isinstance(err, SlackApiError):
        resp = getattr(err, "response", None)
        try:
            return str(resp["error"]) if resp is not None else str(err)
        except (KeyError, TypeError):
            return str(err)
    return type(err).__name__
