"""The diagnosis path's listeners and their readers: ``/gpu COMMAND`` and the verdict card's
Re-check; and what the action buttons and commands answer while actions are off.

``app.py`` registers them with their guards; by the time a listener runs, the request has
been read, guarded and parsed, and it only hands the command to ``Diagnoses``.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from typing import Any

from slack_bolt import Ack, BoltContext, BoltRequest

from bot.slack import messages
from bot.slack.approvals import ACTIONS_OFF
from bot.slack.commands import CommandError, parse_args
from bot.slack.diagnoses import Diagnoses
from bot.slack.metrics import Metrics
from bot.slack.poster import Poster
from bot.slack.request import Asked, Request, asked, field

log = logging.getLogger("gpubot.slack")


class Listeners:
    def __init__(self, diagnoses: Diagnoses, poster: Poster, metrics: Metrics, *,
                 slash: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.diagnoses = diagnoses
        self.poster = poster
        self.metrics = metrics
        self.slash = slash
        self._clock = clock

    # -- readers ----------------------------------------------------------------------------

    def read_command(self, req: BoltRequest) -> Asked:
        """A ``/gpu`` command: its answers to the asker are its ack (ephemeral)."""
        body, ack = req.body, req.context.ack

        def answer(text: str, blocks: Sequence[dict[str, Any]] | None = None) -> object:
            return ack(text=text, blocks=blocks, response_type="ephemeral")

        request = Request(field(body, "user_id"), field(body, "channel_id"),
                          field(body, "channel_name"), field(body, "response_url") or None,
                          self._clock())
        return Asked(request, answer, text=field(body, "text"), prefix=self.slash)

    def read_recheck(self, req: BoltRequest) -> Asked | None:
        """A Re-check click: the command and codes the card carries in the button's value.
        Answers go to the response_url off the listener thread."""
        body = req.body
        request = Request(field(body, "user", "id"), field(body, "channel", "id"),
                          field(body, "channel", "name"), field(body, "response_url") or None,
                          self._clock(), card_ts=field(body, "container", "message_ts")
                          or field(body, "message", "ts"),
                          thread_ts=field(body, "container", "thread_ts") or None,
                          kind="recheck")
        action = (body.get("actions") or [{}])[0]
        try:
            value = json.loads(action.get("value") or "")
            argv = value["q"]
            if not (isinstance(argv, list) and all(isinstance(a, str) for a in argv)
                    and 0 < len(argv) <= 12):
                raise ValueError("q")
            before = value.get("c")
            codes = tuple(str(c) for c in before) if isinstance(before, list) else None
            cmd = parse_args(list(argv))
        except (ValueError, KeyError, TypeError, CommandError):
            self.metrics.count("recheck", "usage_error")
            request.finished("recheck", "usage_error")
            self.poster.later(request, messages.bad_button())
            return None
        request = replace(request, card_codes=codes)
        return Asked(request, partial(self.poster.later, request), prefix=self.slash,
                     name=cmd.name, command=cmd)

    # -- listeners --------------------------------------------------------------------------

    def on_command(self, context: BoltContext) -> None:
        self.diagnoses.answer(asked(context))

    def on_recheck(self, ack: Ack, context: BoltContext) -> None:
        ack()
        self.diagnoses.recheck(asked(context))

    def on_action_command_off(self, ack: Ack) -> None:
        """``/gpu cordon ...`` while actions are off."""
        ack(text=ACTIONS_OFF, response_type="ephemeral")

    def on_action_off(self, ack: Ack, body: dict[str, Any]) -> None:
        """A finding's action button while actions are off: a note saying so."""
        ack()
        action = (body.get("actions") or [{}])[0]
        req = Request(field(body, "user", "id"), field(body, "channel", "id"),
                      field(body, "channel", "name"), field(body, "response_url") or None,
                      self._clock(), kind="action")
        label = field(action, "text", "text") or "this action"
        try:
            value = json.loads(action.get("value") or "{}")
        except ValueError:  # logged below as a plain "action"
            value = None
        value = value if isinstance(value, dict) else {}
        self.metrics.count("action", "not_enabled")
        req.finished(str(value.get("a") or "action"), "not_enabled",
                     target=str(value.get("n") or ""))
        self.poster.later(req, messages.approvals_disabled(label))

    def on_error(self, error: Exception, body: dict[str, Any]) -> None:
        log.error("unhandled error in a listener for %s: %s",
                  field(body, "command") or field(body, "type") or "a request",
                  type(error).__name__, exc_info=error)
