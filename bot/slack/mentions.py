"""``@gpubot why-pending ml-team/train-0``: every ``/gpu`` command as a mention, in a channel
or inside a thread (where on-call talks about an incident, and where Slack lets no slash
command be typed). The answer, card and proof, goes to that thread.

A mention takes the slash command's path (``SlackBot.handle``): the same parsing, rate
limit and channel -> namespace access. What the asker alone should see (usage, refusals,
"Diagnosing ...") is an ephemeral message in the thread. A redelivered event (Slack
retries with ``X-Slack-Retry-Num`` and the same ``event_id``) is dropped by the bot's
``drop_repeats`` middleware before it reaches this listener.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from slack_bolt import App

if TYPE_CHECKING:
    from bot.slack.app import SlackBot

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


class Mentions:
    """The ``app_mention`` listener of a ``SlackBot``."""

    def __init__(self, bot: SlackBot, names_ttl: float = 600.0) -> None:
        self.bot = bot
        self.names_ttl = names_ttl
        self._names: dict[str, tuple[float, str]] = {}  # channel ID -> (when, name)

    def register(self, app: App) -> None:
        app.event("app_mention")(self.on_mention)

    def on_mention(self, body: dict[str, Any], event: dict[str, Any]) -> None:
        """Bolt acknowledges events itself once this returns: the rest (a channel-name
        lookup may take a Web API call) runs on the bot's I/O pool."""
        if event.get("bot_id") or event.get("subtype"):
            return  # another bot, or an edit: never answered (no loops, no reruns)
        user, channel = str(event.get("user") or ""), str(event.get("channel") or "")
        ts = str(event.get("ts") or "")
        if not (user and channel and ts):
            log.info("app_mention without user, channel or ts: ignored")
            return
        received = self.bot._clock()
        text = command_text(str(event.get("text") or ""), _bot_user(body))
        thread = str(event.get("thread_ts") or ts)
        try:
            self.bot.io.submit(self._handle, text, user, channel, thread, received)
        except RuntimeError:  # shutting down: no new work
            log.info("app_mention while stopping: ignored")

    def _handle(self, text: str, user: str, channel: str, thread: str,
                received: float) -> None:
        from bot.slack.app import Request

        req = Request(user, channel, self.channel_name(channel), None, received,
                      thread_ts=thread)

        def reply(text: str, blocks: Sequence[dict[str, Any]] | None = None) -> None:
            self.bot._respond(req, text, blocks)  # already off the listener thread

        try:
            self.bot.handle(text, req, reply, prefix=MENTION_PREFIX)
        except Exception:  # a pool task's error would vanish in its Future: log it
            log.exception("app_mention from %s in %s failed", user, channel)

    def channel_name(self, channel: str) -> str:
        """The channel's name, when the channel map names channels (``#gpu-ops``): an event
        carries only the ID, a slash command both. Looked up with conversations.info
        (channels:read, groups:read) and remembered; unknown ("") if that fails, so a
        channel mapped only by name is refused, never let through."""
        channel_map = self.bot.policy.channel_map or {}
        if channel in channel_map or not any(key.startswith("#") for key in channel_map):
            return ""  # the ID decides, or names do not matter
        now = self.bot._clock()
        known = self._names.get(channel)
        if known is not None and now - known[0] < self.names_ttl:
            return known[1]
        try:
            info = self.bot._call("conversations_info", channel=channel)
            name = str((info.get("channel") or {}).get("name") or "")
        except Exception:  # SlackApiError (counted and logged in _call): name unknown
            name = ""
        self._names[channel] = (now, name)
        return name


def _bot_user(body: dict[str, Any]) -> str | None:
    """The bot's own user ID, from the event's authorizations (Events API)."""
    for auth in body.get("authorizations") or []:
        if isinstance(auth, dict) and auth.get("is_bot") and auth.get("user_id"):
            return str(auth["user_id"])
    return None
