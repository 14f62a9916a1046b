"""Every call gpubot makes to Slack: the Web API (messages, edits, ephemerals, files,
conversations, user groups, auth.test) and replies to a ``response_url``.

    poster = Poster(make_client(settings, metrics), metrics, settings.slack_retries, io)
    ts = poster.post(channel, message, thread_ts=None)

One place for what every call needs: retries (a 429 after its Retry-After, connection and
server errors a couple of times), ``gpubot_slack_api_errors_total`` and one log line per
failure, and one error for every way a call can fail (``SlackApiError``), so callers
decide only whether a failure matters to them. The command path, approvals, mentions and
the alert threads all post through it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from concurrent.futures import Executor
from typing import Any

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

from bot.slack.blocks import MESSAGE_TEXT, Message, cut_mrkdwn
from bot.slack.config import Settings
from bot.slack.metrics import Metrics
from bot.slack.request import Request

log = logging.getLogger("gpubot.slack")

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


def error_name(err: BaseException) -> str:
    """Slack's error code (``not_in_channel``), or the exception's type."""
    if isinstance(err, SlackApiError):
        resp = getattr(err, "response", None)
        try:
            return str(resp["error"]) if resp is not None else str(err)
        except (KeyError, TypeError):
            return str(err)
    return type(err).__name__


class Poster:
    def __init__(self, client: WebClient, metrics: Metrics, retries: int,
                 io: Executor) -> None:
        self.client = client
        self.metrics = metrics
        self.retries = retries
        self.io = io  # for answers that must not hold up an ack (``later``)
        # The workspace's address (``https://team.slack.com/``), from auth.test: links.
        self.workspace: str | None = None
        self.team: str | None = None  # its name and ID, from auth.test: the startup log
        self.team_id: str | None = None

    def call(self, method: str, **kwargs: Any) -> Any:
        """``WebClient.<method>(**kwargs)``; any failure counted, logged and raised as a
        SlackApiError."""
        try:
            return getattr(self.client, method)(**kwargs)
        except SlackApiError as err:
            name = error_name(err)
            self.metrics.slack_api_errors.labels(method=method, error=name).inc()
            log.error("Slack %s failed: %s", method, name)
            raise
        except Exception as err:  # URLError, timeouts after the retries
            self.metrics.slack_api_errors.labels(method=method, error=type(err).__name__).inc()
            log.error("Slack %s failed: %s", method, type(err).__name__)
            raise SlackApiError(  # type: ignore[no-untyped-call]
                type(err).__name__, {"ok": False, "error": type(err).__name__}) from err

    def post(self, channel: str, m: Message, thread_ts: str | None = None, *,
             unfurl: bool = True) -> str:
        """chat.postMessage; the new message's ts. ``unfurl=False``: no link previews
        (a verdict's runbook links would bury the answer); else Slack's defaults."""
        args: dict[str, Any] = {"channel": channel, "text": m.text, "blocks": m.blocks}
        if not unfurl:
            args.update(unfurl_links=False, unfurl_media=False)
        if thread_ts:
            args["thread_ts"] = thread_ts
        resp = self.call("chat_postMessage", **args)
        return str(resp.get("ts"))

    def update(self, channel: str, ts: str, m: Message) -> None:
        """chat.update: the message at ``ts`` edited in place."""
        self.call("chat_update", channel=channel, ts=ts, text=m.text, blocks=m.blocks)

    def upload(self, channel: str, thread_ts: str, files: list[dict[str, Any]],
               comment: str | None = None) -> None:
        """Files in a thread (files.getUploadURLExternal, the upload,
        files.completeUploadExternal)."""
        args: dict[str, Any] = {"file_uploads": files, "channel": channel,
                                "thread_ts": thread_ts}
        if comment:
            args["initial_comment"] = comment
        self.call("files_upload_v2", **args)

    def ephemeral(self, channel: str, user: str, text: str, *, thread_ts: str | None = None,
                  blocks: Sequence[dict[str, Any]] | None = None) -> None:
        """chat.postEphemeral; a failure is counted and logged, and nothing more can be
        done about it."""
        args: dict[str, Any] = {"channel": channel, "user": user, "text": text}
        if blocks:
            args["blocks"] = list(blocks)
        if thread_ts:
            args["thread_ts"] = thread_ts
        with contextlib.suppress(SlackApiError):
            self.call("chat_postEphemeral", **args)

    def respond(self, req: Request, text: str,
                blocks: Sequence[dict[str, Any]] | None = None) -> None:
        """An ephemeral message to the asker: via the response_url (retried on 429), or
        chat.postEphemeral where the request came with none (a mention)."""
        text = cut_mrkdwn(text, MESSAGE_TEXT)  # whatever the user's arguments were
        if not req.response_url:
            self.ephemeral(req.channel, req.user, text, thread_ts=req.thread_ts,
                           blocks=blocks)
            return
        hook = WebhookClient(req.response_url, timeout=15,
                             retry_handlers=retry_handlers(self.metrics, self.retries))
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

    def later(self, req: Request, text: str,
              blocks: Sequence[dict[str, Any]] | None = None) -> None:
        """``respond`` off the listener thread (a button's ack carries no message, and an
        event's ack must not wait for Slack)."""
        try:
            self.io.submit(self.respond, req, text, blocks)
        except RuntimeError:  # shutting down
            self.respond(req, text, blocks)

    def auth_test(self) -> bool:
        """auth.test: the token works and Slack answers (readiness; failures not counted)."""
        try:
            resp = self.client.auth_test()
            if resp.get("ok") and str(resp.get("url") or "").startswith("https://"):
                self.workspace = str(resp["url"]).rstrip("/") + "/"
            if resp.get("ok"):
                self.team = str(resp.get("team") or "") or None
                self.team_id = str(resp.get("team_id") or "") or None
            return bool(resp.get("ok"))
        except Exception as err:  # SlackApiError, URLError: not ready, say why
            log.warning("auth.test failed: %s", error_name(err))
            return False
