"""Silence an alert group from its card, once an approver agrees.

    the card's "Silence…" menu (``gpubot_silence``): 1h, 4h or 24h
      -> an approval card in the card's thread: the matchers, the duration, who asked
      -> Approve / Deny (``gpubot_silence_approve`` / ``gpubot_silence_deny``)
      -> ``POST /api/v2/silences`` on Alertmanager; the thread gets the silence's id and link

The rules are the actions' (``bot.actions.requests.check``), checked when Approve is
clicked: an approver (a user ID or a member of a user group), not the one who asked unless
self-approval is allowed, before the request expires; exactly one click moves a request
out of ``pending`` (a compare-and-swap in the store). The matchers are the group's: the
labels all its alerts share (``threads.matchers_of``), never a regex. Every step goes to
the actions' audit trail (``/gpu audit``): requested, refused, denied, expired, approved,
created (with the silence id) or failed (with Alertmanager's answer).
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from slack_bolt import Ack, BoltContext, BoltRequest
from slack_sdk.errors import SlackApiError

from bot.actions.requests import (
    DONE,
    FAILED,
    PENDING,
    RUNNING,
    Auditor,
    Policy,
    Requests,
)
from bot.alerts.alertmanager import Alertmanager, AlertmanagerError
from bot.alerts.threads import COLLECTION as THREADS
from bot.alerts.threads import Retry, matchers_of
from bot.runbook import valid_base
from bot.slack.blocks import Message
from bot.slack.decisions import Click, decide
from bot.slack.kit import button, date, hhmm, mention, section
from bot.slack.metrics import Metrics
from bot.slack.mrkdwn import code, escape
from bot.slack.poster import Poster, error_name
from bot.slack.request import Asked, Request, asked, field
from bot.store import Store, StoreError

log = logging.getLogger("gpubot.alerts.silences")

SILENCE = "gpubot_silence"
SILENCE_APPROVE = "gpubot_silence_approve"
SILENCE_DENY = "gpubot_silence_deny"
COLLECTION = "silence-requests"
DURATIONS = {"1h": 3600.0, "4h": 4 * 3600.0, "24h": 24 * 3600.0}  # the card's menu
TIMEOUT = 10.0  # seconds Alertmanager has to create the silence


def matcher_text(matchers: Mapping[str, str]) -> str:
    return "{" + ", ".join(f'{k}="{v}"' for k, v in sorted(matchers.items())) + "}"


class Silences:
    def __init__(self, store: Store, policy: Policy, poster: Poster, metrics: Metrics,
                 members: Callable[[str], set[str]], *, alertmanager_url: str | None = None,
                 alertmanager_token: str | None = None, timeout: float = TIMEOUT,
                 clock: Callable[[], float] = time.time, workers: int = 2) -> None:
        self.store = store
        self.policy = policy
        self.poster = poster
        self.metrics = metrics
        self.members = members
        self.alertmanager_url = alertmanager_url  # else the group's webhook's externalURL
        # Sent to alertmanager_url only: never to a URL a webhook named.
        self.alertmanager_token = alertmanager_token
        self.timeout = timeout
        self.requests = Requests(store, COLLECTION)
        self.audit = Auditor(store, None)  # the actions' trail; no node to put an Event on
        self._clock = clock
        # The alert threads' ``silenced``, set by bot/alerts/service.py.
        self.on_silenced: Callable[[str, str, float, str], None] | None = None
        # Creating a silence waits on Alertmanager: off Bolt's threads.
        self.executor = ThreadPoolExecutor(workers, thread_name_prefix="gpubot-silence")

    def close(self) -> None:
        self.executor.shutdown(wait=True, cancel_futures=False)

    def _submit(self, fn: Callable[..., object], *args: Any) -> None:
        def run() -> None:
            try:
                fn(*args)
            except Exception:
                log.exception("silence work failed")

        self.executor.submit(run)

    def start(self) -> None:
        """Finish what a stopped bot left (``recover``), off the caller's thread."""
        self._submit(self.recover)

    def recover(self) -> int:
        """Requests approved by a bot that stopped before Alertmanager answered: marked
        failed and said in their thread. The silence may exist (the stop may have come after
        Alertmanager created it), so the thread says where to look before asking again."""
        now = self._clock()
        found = 0
        for rec in self.store.list(COLLECTION, limit=1000):
            req = rec.data
            if req.get("state") != RUNNING or now - float(
                    req.get("decided_at", now)) < self.timeout + 60:
                continue
            note = ("interrupted: the bot stopped while asking Alertmanager; look for a "
                    f"silence on {matcher_text(req.get('matchers') or {})} in Alertmanager "
                    "before asking again")
            done = self.requests.move(req["id"], RUNNING, {"state": FAILED, "error": note,
                                                           "finished": now})
            if done is None:  # another replica got there first
                continue
            found += 1
            if req.get("thread_ts"):
                self._post(req["channel"], req["thread_ts"], f":x: {escape(note)}")
            self._record(FAILED, done, result=note)
        return found

    # -- the request ------------------------------------------------------------------------

    def read_select(self, req: BoltRequest) -> Asked | None:
        """The card's menu: which group, for how long, asked by whom (rate-limited next)."""
        body = req.body
        user, channel = field(body, "user", "id"), field(body, "channel", "id")
        card_ts = field(body, "container", "message_ts") or field(body, "message", "ts")
        action = (body.get("actions") or [{}])[0]
        value = field(action, "selected_option", "value")
        duration, _, gid = value.partition("|")

        def answer(text: str, blocks: Sequence[dict[str, Any]] | None = None) -> None:
            self.poster.ephemeral(channel, user, text, thread_ts=card_ts or None,
                                  blocks=blocks)

        if duration not in DURATIONS or not gid:
            answer(":warning: This menu cannot be read. Wait for the card's next update.")
            return None
        request = Request(user, channel, field(body, "channel", "name"),
                          field(body, "response_url") or None, time.monotonic(),
                          card_ts=card_ts, thread_ts=card_ts)
        return Asked(request, answer, name="silence", text=f"{duration} {gid}")

    def on_select(self, ack: Ack, context: BoltContext) -> None:
        ack()
        a = asked(context)
        duration, gid = a.text.split(" ", 1)
        self._submit(self.request, gid, duration, a.request.user, a.request.channel,
                     a.request.card_ts or "")

    def request(self, gid: str, duration: str, user: str, channel: str, card_ts: str) -> None:
        def tell(text: str) -> None:
            self.poster.ephemeral(channel, user, text, thread_ts=card_ts or None)

        try:
            group = self.store.get(THREADS, gid)
        except StoreError as err:
            tell(f":x: Cannot read the alert group: {escape(err)}")
            return
        # The card's own channel and message only: a menu cannot name another group.
        if group is None or group.data.get("channel") != channel or (
                group.data.get("ts") != card_ts):
            tell(":warning: This alert group is unknown here (it may have been cleaned up).")
            return
        matchers = matchers_of(group.data.get("alerts") or {})
        if not matchers:
            tell(":warning: The group's alerts share no label: a silence would match every "
                 "alert. Silence them in Alertmanager instead.")
            return
        url = self.alertmanager_url or str(group.data.get("external_url") or "")
        if not url or not valid_base(url):
            tell(":lock: No Alertmanager URL to create the silence at: set "
                 "GPUBOT_ALERTMANAGER_URL (the webhook's externalURL is empty).")
            return
        now = self._clock()
        req: dict[str, Any] = {
            "id": secrets.token_hex(8), "action": "silence",
            "target": f"{matcher_text(matchers)} for {duration}",
            "requester": user, "channel": channel, "thread_ts": card_ts, "group": gid,
            "group_key": group.data.get("group_key", ""), "matchers": matchers,
            "duration": duration, "alertmanager": url, "source": "alert card",
            "created": now, "expires": now + self.policy.ttl, "state": PENDING,
        }
        try:
            self.requests.create(req)
        except StoreError as err:
            tell(f":x: Cannot store the request: {escape(err)}")
            return
        self._record("requested", req)
        msg = card(req, self.policy)
        try:
            ts = self.poster.post(channel, msg, card_ts)
        except SlackApiError as err:
            tell(f":warning: Cannot post the approval card here ({escape(error_name(err))}).")
            return
        with contextlib.suppress(StoreError):
            self.requests.update(req["id"], {"card_ts": ts})

    # -- the decision -----------------------------------------------------------------------

    def on_approve(self, ack: Ack, body: dict[str, Any]) -> None:
        ack()
        self._submit(self.decide, body, True)

    def on_deny(self, ack: Ack, body: dict[str, Any]) -> None:
        ack()
        self._submit(self.decide, body, False)

    def decide(self, body: dict[str, Any], approve: bool) -> None:
        try:
            self._decide(body, approve)
        except StoreError as err:  # nothing is created without its record
            self.poster.ephemeral(field(body, "channel", "id"), field(body, "user", "id"),
                                  f":x: Cannot record the decision, no silence was created: "
                                  f"{escape(err)}")

    def _decide(self, body: dict[str, Any], approve: bool) -> None:
        click = Click.read(body, approve, self._clock())
        moved = decide(click, self.requests, self.policy, self.members, self)
        if moved is None:
            return
        user, channel, card_ts, now = click.user, click.channel, click.card_ts, click.now
        thread = moved.get("thread_ts") or card_ts
        if not approve:
            self._update_card(channel, card_ts, moved, [
                f":no_entry_sign: Denied by <@{user}> at {hhmm(now)}. No silence was created."])
            self._record("denied", moved)
            return
        self._record("approved", moved)
        self._create(moved, channel, card_ts, thread, user, field(body, "user", "username")
                     or field(body, "user", "name"))

    def _create(self, req: dict[str, Any], channel: str, card_ts: str, thread: str,
                user: str, username: str) -> None:
        url = str(req["alertmanager"])
        am = Alertmanager(url, timeout=self.timeout, token=self.alertmanager_token
                          if self.alertmanager_url and url == self.alertmanager_url else None)
        starts = self._clock()
        ends = starts + DURATIONS[req["duration"]]
        comment = (f"gpubot: asked by Slack user {req['requester']} in the alert's thread "
                   f"(channel {req['channel']}, thread {req['thread_ts']}), approved by "
                   f"Slack user {user}. Alert group: {req.get('group_key', '')}")[:1000]
        head = f":white_check_mark: Approved by <@{user}> at {hhmm(req['decided_at'])}."
        try:
            sid = am.create_silence(req["matchers"], starts, ends,
                                    f"{username} (Slack {user})" if username else
                                    f"Slack {user}", comment)
        except AlertmanagerError as err:
            text = f":x: No silence was created: {escape(err)}"
            self._post(channel, thread, text)
            self._finish(req, FAILED, {"error": str(err)})
            self._update_card(channel, card_ts, {**req, "state": FAILED}, [head, text])
            self._record(FAILED, {**req, "state": FAILED}, result=str(err))
            return
        url = am.silence_link(sid)
        shown = f"<{url}|{escape(sid)}>" if valid_base(url) else code(sid)
        text = (f":mute: Silenced for {req['duration']} (until {date(ends)}): "
                f"{code(matcher_text(req['matchers']))}, silence {shown}, created by <@{user}> "
                f"for <@{escape(req['requester'])}>.")
        self._post(channel, thread, text)
        self._finish(req, DONE, {"silence": sid, "ends": ends})
        if self.on_silenced is not None and req.get("group"):
            try:  # the alert card says it is silenced, in place of its menu
                self.on_silenced(str(req["group"]), sid, ends, user)
            except (StoreError, SlackApiError, Retry) as err:
                log.warning("cannot mark alert group %s silenced on its card: %s",
                            req["group"], err)
        self._update_card(channel, card_ts, {**req, "state": DONE}, [head, text])
        self._record("created", {**req, "state": DONE}, silence=sid, result=f"silence {sid}",
                     ends=ends)

    def _finish(self, req: dict[str, Any], state: str, extra: dict[str, Any]) -> None:
        try:
            self.requests.update(req["id"], {"state": state, "finished": self._clock(),
                                             **extra})
        except StoreError as err:  # the thread and the audit log line still say it
            log.error("cannot record the result of silence request %s: %s", req["id"], err)

    # -- plumbing -----------------------------------------------------------------------------

    def _record(self, event: str, req: Mapping[str, Any], **extra: Any) -> None:
        """The actions' audit trail, and ``gpubot_commands_total{command="silence"}``."""
        self.metrics.count("silence", event)
        self.audit(event, req, group=req.get("group_key"), matchers=req.get("matchers"),
                   duration=req.get("duration"), **extra)

    # bot/slack/decisions.py's DecisionPort
    def tell(self, click: Click, thread: str | None, text: str) -> None:
        self.poster.ephemeral(click.channel, click.user, text, thread_ts=thread)

    def update_card(self, channel: str, ts: str, req: dict[str, Any],
                    status: list[str]) -> None:
        self._update_card(channel, ts, req, status)

    def record(self, event: str, req: dict[str, Any], **extra: Any) -> None:
        self._record(event, req, **extra)

    def _post(self, channel: str, thread: str, text: str) -> None:
        with contextlib.suppress(SlackApiError):
            self.poster.post(channel, Message("progress", text, [section(text)]), thread)

    def _update_card(self, channel: str, ts: str, req: Mapping[str, Any],
                     status: list[str]) -> None:
        if ts:
            with contextlib.suppress(SlackApiError):
                self.poster.update(channel, ts, card(req, self.policy, status))


def card(req: Mapping[str, Any], policy: Policy, status: list[str] | None = None) -> Message:
    """The approval card: Approve / Deny while pending, else ``status`` in their place."""
    matchers = matcher_text(req["matchers"])
    title = f"Approval needed: silence for {req['duration']}"
    if req.get("state") != PENDING:
        title = f"silence for {req['duration']}: {req.get('state')}"
    fields = [
        f"*What:* a silence in Alertmanager for {req['duration']} from the approval, on the "
        f"alert group's labels:\n{code(matchers)}",
        "*Silences:* every alert with all of these labels (this group's, and any new one "
        "that matches) stops notifying; Prometheus keeps evaluating them.",
        f"*Alertmanager:* {escape(req['alertmanager'])}",
        f"*Asked by:* <@{escape(req['requester'])}>  ·  *Expires:* "
        f"{date(float(req['expires']))}",
    ]
    approvers = ", ".join(mention(a) for a in policy.approvers) or "none configured"
    context = (f"Request {code(req['id'])}  ·  from the alert card  ·  approvers: {approvers}"
               + ("" if not policy.allow_self_approval else "  ·  self-approval allowed"))
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": title[:150],
                                    "emoji": True}},
        section("\n".join(fields)),
        {"type": "context", "elements": [{"type": "mrkdwn", "text": context[:3000]}]},
    ]
    if req.get("state") == PENDING and not status:
        blocks.append({"type": "actions", "block_id": "gpubot_silence_approval", "elements": [
            button("Approve", SILENCE_APPROVE, req["id"], "primary", "Create the silence?",
                    f"Silence {matchers} for {req['duration']}.", "Silence"),
            button("Deny", SILENCE_DENY, req["id"], "danger", "Deny it?",
                    "The request will be closed; no silence will be created.", "Deny"),
        ]})
    for line in status or []:
        blocks.append(section(line))
    return Message("approval", title, blocks)
