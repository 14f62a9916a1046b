"""``@gpubot why-pending ml-team/train-0``: every ``/gpu`` command as a mention, in a channel
or inside a thread (where on-call talks about an incident, and where Slack lets no slash
command be typed). The answer, card and proof, goes to that thread.

A mention takes the slash command's path: the same guards (rate limit, size, parsing, the
channel -> namespaces map) and the same ``Diagnoses``. What the asker alone should see
(usage, refusals, "Diagnosing ...") is an ephemeral message in the thread. A redelivered
event (Slack retries with ``X-Slack-Retry-Num`` and the same ``event_id``) is dropped by
``guards.DropRepeats`` before it reaches this listener. The channel map is asked last, off
the listener thread: an event carries the channel's ID alone, and learning its name may
take a Web API call, which the event's ack must not wait for.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import replace
from functools import partial
from typing import Any

from slack_bolt import BoltContext, BoltRequest

from bot.slack.access import AccessPolicy
from bot.slack.approvals import asks_for_an_action
from bot.slack.guards import Guard
from bot.slack.mrkdwn import code
from bot.slack.poster import Poster
from bot.slack.request import Asked, Request, asked

log = logging.getLogger("gpubot.slack.mentions")

# How hints write a command for a mention (the manifest's bot name).
MENTION_PREFIX = "@gpubot"
# <@U0BOT> or <@U0BOT|gpubot>: Slack's form of a user mention in message text.
_MENTION = re.compile(r"<@([A-Z0-9]+)(?:\|[^>]*)?>")


def command_text(text: str, bot_user: str | None = None) -> str:
    """What follows the mention of the bot (its first mention when ``bot_user`` is not
    known): ``"<@U0BOT> why-pending x"`` and ``"hey <@U0BOT> why-pending x"`` both give
    ``"why-pending x"``."""
    for m in _MENTION.finditer(text):
        if bot_user is None or m.group(1) == bot_user:
            rest = text[m.end():].strip()
            again = _MENTION.match(rest)
            while again and again.group(1) == m.group(1):  # "@gpubot @gpubot nodes"
                rest = rest[again.end():].strip()
                again = _MENTION.match(rest)
            return rest
    return text.strip()


class ActionsNeedTheSlashCommand(Guard):
    """An action (``cordon``, ``restart-plugin`` ...) asked for in a mention: approvals
    take the slash command only, so the asker is shown that one."""

    def __init__(self, slash: str) -> None:
        self.slash = slash

    def admit(self, asked: Asked) -> Asked | None:
        if not asks_for_an_action(asked.text):
            return asked
        typed = f"{self.slash} {' '.join(asked.text.split()[:2])}"
        asked.answer(f":point_right: Actions are asked for with the slash command: "
                     f"{code(typed)}")
        return None


class Mentions:
    """The ``app_mention`` listener and its reader."""

    def __init__(self, poster: Poster, io: Executor, policy: AccessPolicy,
                 access: Guard, answer: Callable[[Asked], None], *,
                 clock: Callable[[], float] = time.monotonic, names_ttl: float = 600.0) -> None:
        self.poster = poster
        self.io = io
        self.policy = policy
        self.access = access
        self.answer = answer  # Diagnoses.answer: the slash command's path from here on
        self._clock = clock
        self.names_ttl = names_ttl
        self._names: dict[str, tuple[float, str]] = {}  # channel ID -> (when, name)

    def read(self, req: BoltRequest) -> Asked | None:
        """The mention's command; None (acked, nothing said) for another bot's message,
        an edit, or an event that says not who asked where."""
        body = req.body
        event = body.get("event")
        event = event if isinstance(event, dict) else {}
        if event.get("bot_id") or event.get("subtype"):
            return None  # another bot, or an edit: never answered (no loops, no reruns)
        user, channel = str(event.get("user") or ""), str(event.get("channel") or "")
        ts = str(event.get("ts") or "")
        if not (user and channel and ts):
            log.info("app_mention without user, channel or ts: ignored")
            return None
        request = Request(user, channel, "", None, self._clock(),
                          thread_ts=str(event.get("thread_ts") or ts), kind="mention")
        return Asked(request, partial(self.poster.later, request),
                     text=command_text(str(event.get("text") or ""), _bot_user(body)),
                     prefix=MENTION_PREFIX)

    def on_mention(self, context: BoltContext) -> None:
        """Bolt acknowledges the event once this returns: the rest runs on the I/O pool."""
        mention = asked(context)
        try:
            self.io.submit(self._answer, mention)
        except RuntimeError:  # shutting down: no new work
            log.info("app_mention while stopping: ignored")

    def _answer(self, mention: Asked) -> None:
        req = mention.request
        try:
            req = replace(req, channel_name=self.channel_name(req.channel))
            # Already off the listener thread: answers go out from here.
            admitted = self.access.admit(replace(mention, request=req,
                                                 answer=partial(self.poster.respond, req)))
            if admitted is not None:
                self.answer(admitted)
        except Exception:  # a pool task's error would vanish in its Future: log it
            log.exception("app_mention from %s in %s failed", req.user, req.channel)

    def channel_name(self, channel: str) -> str:
        """The channel's name, when the channel map names channels (``#gpu-ops``): an event
        carries only the ID, a slash command both. Looked up with conversations.info
        (channels:read, groups:read) and remembered; unknown ("") if that fails, so a
        channel mapped only by name is refused, never let through."""
        channel_map = self.policy.channel_map or {}
        if channel in channel_map or not any(key.startswith("#") for key in channel_map):
            return ""  # the ID decides, or names do not matter
        now = self._clock()
        known = self._names.get(channel)
        if known is not None and now - known[0] < self.names_ttl:
            return known[1]
        try:
            info = self.poster.call("conversations_info", channel=channel)
            name = str((info.get("channel") or {}).get("name") or "")
        except Exception:  # SlackApiError (counted and logged by the poster): name unknown
            name = ""
        self._names[channel] = (now, name)
        return name


def _bot_user(body: dict[str, Any]) -> str | None:
    """The bot's own user ID, from the event's authorizations (Events API)."""
    for auth in body.get("authorizations") or []:
        if isinstance(auth, dict) and auth.get("is_bot") and auth.get("user_id"):
            return str(auth["user_id"])
    return None
