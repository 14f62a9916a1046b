"""Operator logs: one record per handled event (a slash command, a mention, a Re-check, an
action click, an alert webhook), on the ``gpubot.events`` logger.

Each record carries its fields as ``extra=`` attributes, so ``GPUBOT_LOG_FORMAT=json``
(``bot.logformat``) writes them as keys of the line's JSON object; the text format gets
the same fields compactly in the message::

    command why-pending ml-team/train-0 user=U1 channel=C1 outcome=ok 840ms
        codes=INSUFFICIENT_GPU request_id=3f9a0c1d2b4e

``request_id`` is made when a request is read and travels with what it starts: the
verdict card's action buttons carry it, and the approval request and every audit record of
that action store it (``bot.actions.requests``), so a log search for one id finds the
command, the click and the audit trail.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Iterable
from typing import Any

log = logging.getLogger("gpubot.events")

# Outcomes under other names in gpubot_commands_total: the log says what happened to the
# asker in the words an operator searches for.
OUTCOME = {"answered": "ok", "help": "ok", "refused": "denied"}


def new_request_id() -> str:
    return secrets.token_hex(6)


def event(kind: str, *, command: str, outcome: str, request_id: str, target: str = "",
          user: str = "", channel: str = "", duration: float | None = None,
          codes: Iterable[str] = (), level: int = logging.INFO, **more: Any) -> None:
    """Log one handled event. ``duration`` in seconds (logged as ``duration_ms``); ``more``:
    fields of this kind of event (an approval's id, an alert's name)."""
    outcome = OUTCOME.get(outcome, outcome)
    ms = None if duration is None else max(0, round(duration * 1000))
    found = list(dict.fromkeys(codes))
    fields: dict[str, Any] = {
        "event": kind, "command": command, "target": target, "user": user,
        "channel": channel, "outcome": outcome, "duration_ms": ms, "codes": found,
        "request_id": request_id, **more}
    words = [kind, command]
    if target:
        words.append(target)
    words += [f"{k}={v}" for k, v in (("user", user), ("channel", channel),
                                       ("outcome", outcome)) if v]
    if ms is not None:
        words.append(f"{ms}ms")
    if found:
        words.append("codes=" + ",".join(found))
    words += [f"{k}={v}" for k, v in more.items() if v not in (None, "", [], ())]
    words.append(f"request_id={request_id}")
    log.log(level, " ".join(words), extra=fields)
