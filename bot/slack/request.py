"""What a request to the bot asks, who asked it where, and how to answer them alone.

The first middleware in front of each listener (a ``guards.Read``) turns the request's body
into an ``Asked`` and keeps it in Bolt's context; the guards after it and the listener read
it there (``asked(context)``), so that one guard serves slash commands, mentions and
buttons alike, whatever each needs to say its refusals privately.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from dataclasses import field as attribute
from typing import Any, Protocol

from slack_bolt import BoltContext

from bot import oplog
from bot.slack.commands import Command

ASKED = "gpubot_asked"  # the Asked's key in Bolt's context


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
    card_codes: tuple[str, ...] | None = None  # a Re-check: the codes the card showed
    # The operator log's (bot/oplog.py): what kind of event, its id, when it was read.
    kind: str = "command"  # command, mention, recheck, action
    id: str = attribute(default_factory=oplog.new_request_id)
    started: float = attribute(default_factory=time.monotonic)

    def finished(self, command: str, outcome: str, *, target: str = "",
                 codes: Iterable[str] = ()) -> None:
        """The operator log's record of this request: how it ended for the asker."""
        oplog.event(self.kind, command=command, outcome=outcome, request_id=self.id,
                    target=target, user=self.user, channel=self.channel,
                    duration=time.monotonic() - self.started, codes=codes)


class Answer(Protocol):
    """Says something to the asker alone: the ack of a slash command, else an ephemeral
    message (posted off the listener thread where it has to be)."""

    def __call__(self, text: str, blocks: Sequence[dict[str, Any]] | None = None) -> object:
        ...


@dataclass(frozen=True)
class Asked:
    """A request as its reader found it; guards hand on an amended copy."""

    request: Request
    answer: Answer
    text: str = ""  # the command as typed (a slash command, a mention)
    prefix: str = "/gpu"  # how hints write a command for this asker ("/gpu", "@gpubot")
    name: str = "unknown"  # what is asked, for gpubot_commands_total, once known
    command: Command | None = None  # once parsed; once admitted, with its namespace settled


def target_of(cmd: Command) -> str:
    """What a command is about, for the operator log: its arguments after the name."""
    return " ".join(cmd.argv()[1:])


def asked(context: BoltContext) -> Asked:
    """The Asked the listener's reader put in the context."""
    found = context.get(ASKED)
    assert isinstance(found, Asked), "a listener with guards needs a guards.Read first"
    return found


def field(d: Any, *path: str) -> str:
    """A string in a request body (``field(body, "user", "id")``), "" where there is none."""
    for key in path:
        d = d.get(key) if isinstance(d, dict) else None
    return d if isinstance(d, str) else ""
