"""The checks in front of the listeners, as Bolt middleware (the shape of slack_bolt's
``middleware/ignoring_self_events``): each ends in ``next()``, or answers the asker alone
and ends the request with its ack.

    Read           first in front of every guarded listener: the body read into an Asked
    DropRepeats    every request (global): a retried or repeated delivery, dropped
    RateLimit      /gpu, mentions, Re-check, action requests: commands per user a minute
    CommandSize    /gpu, mentions: a command's text of at most frontdoor.MAX_TEXT
    ParseCommand   /gpu, mentions: the text parsed into a Command, usage errors answered
    ChannelAccess  /gpu, Re-check, action requests: the channel -> namespaces map (mentions
                   ask it off the listener thread, once the channel's name is known)

A guard reads the request from the context (``request.asked``) and, when it lets it on,
may leave an amended copy there: ``ParseCommand`` the command, ``ChannelAccess`` the
command with the namespace the channel allows.
"""

from __future__ import annotations

import logging
from abc import abstractmethod
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from slack_bolt import BoltContext, BoltRequest, BoltResponse
from slack_bolt.middleware import Middleware

from bot.slack import messages
from bot.slack.access import AccessPolicy, RateLimiter, Refusal
from bot.slack.commands import CommandError, parse
from bot.slack.dedupe import Dedupe
from bot.slack.frontdoor import MAX_TEXT
from bot.slack.metrics import Metrics
from bot.slack.request import ASKED, Asked, asked, field, target_of
from handlers.errors import GpubotError

log = logging.getLogger("gpubot.slack")


def _acked(context: BoltContext) -> BoltResponse:
    """The request's ack: the one a slash command's answer made, else an empty one."""
    ack = context.ack
    return ack.response if ack.response is not None else ack()


class Read(Middleware):
    """Puts what the request asks in the context; ``read`` returns None once it has
    answered (or chosen to ignore) the request itself."""

    def __init__(self, read: Callable[[BoltRequest], Asked | None]) -> None:
        self.read = read

    def process(self, *, req: BoltRequest, resp: BoltResponse,
                next: Callable[[], BoltResponse]) -> BoltResponse | None:
        found = self.read(req)
        if found is None:
            return _acked(req.context)
        req.context[ASKED] = found
        return next()

    @property
    def name(self) -> str:
        return f"Read({getattr(self.read, '__qualname__', self.read)})"


class Guard(Middleware):
    """A check on the Asked: ``admit`` returns it (amended, maybe) to go on with, or None
    once it has answered the asker."""

    def process(self, *, req: BoltRequest, resp: BoltResponse,
                next: Callable[[], BoltResponse]) -> BoltResponse | None:
        admitted = self.admit(asked(req.context))
        if admitted is None:
            return _acked(req.context)
        req.context[ASKED] = admitted
        return next()

    @abstractmethod
    def admit(self, asked: Asked) -> Asked | None:
        ...


class DropRepeats(Middleware):
    """A retried delivery (``X-Slack-Retry-Num``), or a trigger_id or event_id seen before,
    is acknowledged and dropped: no command runs twice."""

    def __init__(self, dedupe: Dedupe, metrics: Metrics) -> None:
        self.dedupe = dedupe
        self.metrics = metrics

    def process(self, *, req: BoltRequest, resp: BoltResponse,
                next: Callable[[], BoltResponse]) -> BoltResponse | None:
        retry = req.headers.get("x-slack-retry-num")
        body: dict[str, Any] = req.body if isinstance(req.body, dict) else {}
        key = str(body.get("trigger_id") or body.get("event_id") or "")
        what = field(body, "command") or field(body, "type") or "request"
        if retry:
            self.metrics.duplicates.labels(why="retry_header").inc()
            log.info("dropped a retried delivery of %s (X-Slack-Retry-Num %s)", what, retry[0])
            return BoltResponse(status=200, body="")
        if key and not self.dedupe.first(key):
            self.metrics.duplicates.labels(why="trigger_id").inc()
            log.info("dropped a repeated delivery of %s (trigger_id seen before)", what)
            return BoltResponse(status=200, body="")
        return next()


class RateLimit(Guard):
    """At most ``limiter.limit`` commands per user a minute; the rest are told when to
    try again."""

    def __init__(self, limiter: RateLimiter, metrics: Metrics) -> None:
        self.limiter = limiter
        self.metrics = metrics

    def admit(self, asked: Asked) -> Asked | None:
        user = asked.request.user
        wait = self.limiter.check(user)
        if not wait:
            return asked
        self.metrics.count(asked.name, "rate_limited")
        asked.request.finished(asked.name, "rate_limited")
        log.info("rate limit: user %s, %s refused for %.0fs", user, asked.name, wait)
        asked.answer(messages.rate_limited(self.limiter.limit, wait))
        return None


class CommandSize(Guard):
    """A command's text of at most ``max_text`` characters, so that no argument is parsed,
    echoed or logged at any length (over HTTP, ``frontdoor.FrontDoor`` refuses a long
    slash command before Bolt sees it; this holds for mentions and Socket Mode)."""

    def __init__(self, metrics: Metrics, max_text: int = MAX_TEXT) -> None:
        self.metrics = metrics
        self.max_text = max_text

    def admit(self, asked: Asked) -> Asked | None:
        if len(asked.text) <= self.max_text:
            return asked
        self.metrics.count("unknown", "usage_error")
        asked.request.finished("unknown", "usage_error")
        asked.answer(f"That command is {len(asked.text):,} characters long; gpubot reads at "
                     f"most {self.max_text:,}.")
        return None


class ParseCommand(Guard):
    """The text parsed into a Command; a usage error is answered with an example."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def admit(self, asked: Asked) -> Asked | None:
        try:
            cmd = parse(asked.text)
        except CommandError as err:
            self.metrics.count("unknown", "usage_error")
            asked.request.finished("unknown", "usage_error")
            asked.answer(messages.usage(asked.prefix, str(err), err.example or "help"))
            return None
        log.info("%s %s from user %s in %s", asked.prefix, cmd.line(), asked.request.user,
                 asked.request.channel)
        return replace(asked, command=cmd, name=cmd.name)


class ChannelAccess(Guard):
    """The channel -> namespaces map (``access.AccessPolicy``): a command reading what the
    channel may not see is refused; one naming no namespace gets the channel's only one.
    ``count_refusals=False``: a refusal leaves gpubot_commands_total alone (action
    requests, which never counted them)."""

    def __init__(self, policy: AccessPolicy, metrics: Metrics, *,
                 count_refusals: bool = True) -> None:
        self.policy = policy
        self.metrics = metrics
        self.count_refusals = count_refusals

    def admit(self, asked: Asked) -> Asked | None:
        cmd, req = asked.command, asked.request
        assert cmd is not None, "ChannelAccess needs a parsed command"
        try:
            resolved = self.policy.resolve(cmd, req.channel, req.channel_name, req.user)
        except GpubotError as err:  # a target parse_target refuses (checked in parse too)
            self.metrics.count(cmd.name, "usage_error")
            req.finished(cmd.name, "usage_error", target=target_of(cmd))
            asked.answer(messages.usage(asked.prefix, str(err), cmd.route.example))
            return None
        if isinstance(resolved, Refusal):
            if self.count_refusals:
                self.metrics.count(cmd.name, "refused")
            req.finished(cmd.name, "refused", target=target_of(cmd))
            asked.answer(f":no_entry: {resolved.message}")
            return None
        return replace(asked, command=resolved)
