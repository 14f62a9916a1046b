"""An Approve or Deny click on an approval card, decided: the one rule path that actions
(``bot/slack/approvals.py``) and alert silences (``bot/alerts/silences.py``) share.

    click = Click.read(body, approve, now)
    moved = decide(click, requests, policy, members, port)   # the request, or None
    # moved: this click took it out of pending (RUNNING when approved, else DENIED)

The rules are ``bot.actions.requests.check``'s, asked at click time; a request found
expired is marked so; the move out of pending is a compare-and-swap, so of any number of
clicks and replicas exactly one gets the request back.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from bot.actions.requests import DENIED, EXPIRED, PENDING, RUNNING, Policy, Requests, check
from bot.slack.request import field


@dataclass(frozen=True)
class Click:
    user: str
    channel: str
    card_ts: str  # the approval card's message
    rid: str  # the request id the button carries
    approve: bool
    now: float

    @classmethod
    def read(cls, body: dict[str, Any], approve: bool, now: float) -> Click:
        return cls(field(body, "user", "id"), field(body, "channel", "id"),
                   field(body, "container", "message_ts") or field(body, "message", "ts"),
                   str(((body.get("actions") or [{}])[0]).get("value") or ""), approve, now)


class DecisionPort(Protocol):
    """What a decision says, and where: the clicker, the approval card, the audit trail."""

    def tell(self, click: Click, thread: str | None, text: str) -> None: ...

    def update_card(self, channel: str, ts: str, req: dict[str, Any],
                    status: list[str]) -> None: ...

    def record(self, event: str, req: dict[str, Any], **extra: Any) -> None: ...


def decide(click: Click, requests: Requests, policy: Policy,
           members: Callable[[str], set[str]], port: DecisionPort) -> dict[str, Any] | None:
    """The request as this click moved it out of pending, or None once the clicker has been
    told why not (refused by a rule, expired, or decided by another click first)."""
    rec = requests.get(click.rid) if click.rid else None
    req = rec.data if rec else None
    thread = (req or {}).get("thread_ts") or click.card_ts
    why = check(req, click.user, policy, members, click.now, deny=not click.approve)
    if why and req is not None and req.get("state") == PENDING and click.now >= float(
            req.get("expires", 0)):
        expired = requests.move(click.rid, PENDING, {"state": EXPIRED})
        if expired is not None:
            port.update_card(click.channel, click.card_ts, expired,
                             [":hourglass: Expired unanswered."])
            port.record("expired", expired)
    if why:
        port.tell(click, thread, f":no_entry: {why}")
        if req is not None:
            # A refusal is the clicker's, not the node's: no Event on the object.
            port.record("refused", req, clicker=click.user, reason=why,
                        event_on_object=False)
        return None
    assert req is not None
    moved = requests.move(click.rid, PENDING, {
        "decided_by": click.user, "decided_at": click.now,
        "state": RUNNING if click.approve else DENIED})
    if moved is None:  # another click (or replica) decided first
        again = requests.get(click.rid)
        why = check(again.data if again else None, click.user, policy, members, click.now,
                    deny=not click.approve)
        port.tell(click, thread, f":no_entry: {why or 'Decided already.'}")
    return moved
