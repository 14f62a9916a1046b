"""Approval-gated actions in Slack: the request, the approval card, the decision, the proof.

    /gpu restart-plugin NODE | --all      /gpu cordon NODE      /gpu uncordon NODE
    /gpu audit [N]
    a finding's action button on a verdict card (``gpubot_action_N``)

A request is planned against the cluster (``bot.actions.units.preflight``), stored
(``bot.actions.requests``), and shown as an approval card: what will happen to which
objects, the blast radius, who asked, when it expires, and Approve / Deny buttons with a
confirm dialog. A card from a finding goes in the verdict card's thread; one from a
command goes in the channel and its thread gets the progress.

A request is read here (``ParseAction``, ``read_finding``), then passes the rate limit and
the channel map (``guards``, attached in ``app.py``). A click is acknowledged at once; the
rules are checked on the server when it is clicked (``requests.check``), and every refusal
is an ephemeral message to the clicker. The one click that moves the request out of
``pending`` (a compare-and-swap in the store) runs it: the card says who approved it and
when, the thread gets the verification ("GPUs back on gpu-node-7 after 41 s (8/8);
ml-team/train-0 scheduled") or what did not recover. Every step is audited.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from slack_bolt import Ack, BoltContext, BoltRequest
from slack_sdk.errors import SlackApiError

from bot import oplog
from bot.actions import units
from bot.actions.cluster import Cluster
from bot.actions.requests import (
    COLLECTION,
    DONE,
    FAILED,
    PENDING,
    RUNNING,
    Auditor,
    Policy,
    Requests,
    Runner,
    new_request,
)
from bot.actions.units import ALL, ActionError, Plan
from bot.live.errors import LiveError
from bot.slack.blocks import Message
from bot.slack.commands import Command, CommandError, tokenize
from bot.slack.decisions import Click, decide
from bot.slack.guards import Guard
from bot.slack.kit import button, date, hhmm, mention, section, when
from bot.slack.metrics import Metrics
from bot.slack.mrkdwn import code, escape
from bot.slack.poster import Poster, error_name
from bot.slack.request import Asked, Request, asked, field
from bot.store import Store, StoreError

log = logging.getLogger("gpubot.slack.approvals")

APPROVE = "gpubot_approve"
DENY = "gpubot_deny"
WORDS = ("restart-plugin", "cordon", "uncordon", "audit")
ACTIONS_OFF = (":lock: Actions are off on this gpubot: it reads a snapshot, no approvers are "
               "configured (GPUBOT_APPROVERS), or its store could not be opened (see its log).")
# /gpu help entries while actions are on (the shape of help_message's route entries).
HELP = (
    {"usage": "restart-plugin NODE|--all", "example": "restart-plugin gpu-node-7",
     "summary": "restart a node's device plugin (every node, one at a time, with --all) "
                "once an approver agrees; the thread shows whether the GPUs came back"},
    {"usage": "cordon NODE  ·  uncordon NODE", "example": "cordon gpu-node-7",
     "summary": "stop (or allow again) new pods landing on a node, once an approver agrees"},
    {"usage": "audit [N]", "example": "audit 20",
     "summary": "the last N action requests, decisions and results"},
)
USAGE = ("restart-plugin NODE  ·  restart-plugin --all  ·  cordon NODE  ·  uncordon NODE  ·  "
         "audit [N]")
# An action acts on nodes: it may be asked for where node-level commands may run.
NODE_LEVEL = Command("nodes")


def asks_for_an_action(text: str) -> bool:
    """``restart-plugin``, ``cordon``, ``uncordon``, ``audit``: not a diagnosis."""
    try:
        words = tokenize(text)
    except CommandError:
        return False
    return bool(words) and words[0].lower() in WORDS


def action_command(body: dict[str, Any]) -> bool:
    """Bolt matcher: a ``/gpu`` command asking for an action."""
    return asks_for_an_action(field(body, "text"))


@dataclass(frozen=True)
class ActionAsked(Asked):
    """An action request as read: ``name`` is the action; what it acts on, and where
    it comes from."""

    target: str = ""  # a node, --all, or audit's N
    source: str = "command"  # or "finding CODE": the button of a verdict card's finding
    pending_pods: tuple[tuple[str, str], ...] = ()  # the diagnosis' pod, to report on after
    origin: str = ""  # the request id of the command whose card offered it (bot/oplog.py)


class ParseAction(Guard):
    """``/gpu restart-plugin NODE`` ...: read into an ActionAsked, or usage answered."""

    def admit(self, asked: Asked) -> Asked | None:
        try:
            name, target = _parse(tokenize(asked.text))
        except CommandError as err:
            asked.request.finished("action", "usage_error")
            asked.answer(f":warning: {err}\nTry: {code(f'{asked.prefix} {USAGE}')}")
            return None
        return ActionAsked(asked.request, asked.answer, text=asked.text, prefix=asked.prefix,
                           name=name, command=NODE_LEVEL, target=target)


class GroupMembers:
    """Members of Slack user groups (``usergroups.users.list``), cached ``ttl`` seconds."""

    def __init__(self, call: Callable[..., Any], ttl: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._call = call
        self.ttl = ttl
        self._clock = clock
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[float, set[str]]] = {}

    def __call__(self, group: str) -> set[str]:
        now = self._clock()
        with self._lock:
            hit = self._cache.get(group)
        if hit is not None and now - hit[0] < self.ttl:
            return hit[1]
        try:
            resp = self._call("usergroups_users_list", usergroup=group)
            users = {str(u) for u in resp.get("users") or []}
        except SlackApiError:
            # Unknown group or missing scope (usergroups:read): nobody is a member, for
            # now (not cached: the next click asks again). Poster.call logs the error.
            return set()
        with self._lock:
            self._cache[group] = (now, users)
        return users


class Approvals:
    def __init__(self, store: Store, cluster: Cluster | None, policy: Policy, *,
                 runner: Runner | None = None, workers: int = 4,
                 clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.cluster = cluster
        self.policy = policy
        self.requests = Requests(store)
        self.audit = Auditor(store, cluster)
        self.runner = runner or (Runner(cluster, verify_timeout=policy.verify_timeout)
                                 if cluster is not None else None)
        self._clock = clock
        # Planning and runs (a verification waits up to verify_timeout): off Bolt's threads.
        self.executor = ThreadPoolExecutor(workers, thread_name_prefix="gpubot-action")
        self._poster: Poster | None = None
        self._metrics: Metrics | None = None
        self.slash = "/gpu"
        self.members: Callable[[str], set[str]] = lambda group: set()

    # -- wiring -----------------------------------------------------------------------------

    def attach(self, poster: Poster, metrics: Metrics, slash: str) -> None:
        """Start answering in Slack: through ``poster``, counting in ``metrics``, hints
        written for ``slash``. Runs a crashed bot's leftovers to their end (``recover``)."""
        self._poster = poster
        self._metrics = metrics
        self.slash = slash
        self.members = GroupMembers(poster.call)
        self._submit(self.recover)

    def recover(self) -> int:
        """Runs that no bot can still be in (the one running it stopped mid-way): marked
        failed, said in their thread, so nobody waits for a result that will not come."""
        now = self._clock()
        found = 0
        for rec in self.store.list(COLLECTION, limit=1000):
            req = rec.data
            steps = len((req.get("plan") or {}).get("steps") or []) or 1
            longest = steps * (self.policy.verify_timeout + 60)
            if req.get("state") != RUNNING or now - float(req.get("decided_at", now)) < longest:
                continue
            note = ("interrupted: the bot stopped while running it; check the node(s) "
                    "before asking again")
            done = self.requests.move(req["id"], RUNNING, {"state": FAILED, "refused": None,
                                                           "result": [note]})
            if done is None:
                continue
            found += 1
            thread = req.get("thread_ts") or req.get("card_ts")
            what = f"{req.get('action')} {req.get('target')}"
            if thread:
                self._post(req["channel"], thread, f":x: {code(what)} was {note}.")
            self._record(FAILED, done, result=note)
        return found

    @property
    def poster(self) -> Poster:
        assert self._poster is not None, "Approvals.attach() was not called"
        return self._poster

    def close(self) -> None:
        self.executor.shutdown(wait=True, cancel_futures=False)
        self.store.close()

    def _submit(self, fn: Callable[..., object], *args: Any) -> None:
        def run() -> None:
            try:
                fn(*args)
            except Exception:
                log.exception("approval work failed")

        self.executor.submit(run)

    # -- requests -----------------------------------------------------------------------------

    def on_command(self, ack: Ack, context: BoltContext) -> None:
        """``/gpu restart-plugin NODE`` ..., read (``ParseAction``) and guarded."""
        a = asked(context)
        assert isinstance(a, ActionAsked)
        if a.name == "audit":
            ack(**self.audit_message(int(a.target or 10)))
            a.request.finished("audit", "ok", target=a.target)
            return
        if self.cluster is None:
            ack(text=":lock: Actions need a live cluster: this gpubot reads a snapshot.",
                response_type="ephemeral")
            a.request.finished(a.name, "not_enabled", target=a.target)
            return
        ack(text=f":hourglass_flowing_sand: Preparing an approval request for "
                 f"{code(f'{a.name} {a.target}')} ...", response_type="ephemeral")
        self._submit(self.request, a.name, a.target, a.request.user, a.request.channel, None,
                     a.source, [], a.request.id)

    def read_finding(self, req: BoltRequest) -> ActionAsked | None:
        """A finding's action button on a verdict card; answers are ephemeral messages in
        that card's thread."""
        body = req.body
        user, channel = field(body, "user", "id"), field(body, "channel", "id")
        action = (body.get("actions") or [{}])[0]
        try:
            value = json.loads(action.get("value") or "{}")
            name = units.FROM_FINDING[str(value["a"])]
            node = str(value["n"])
        except (ValueError, KeyError, TypeError, AttributeError):
            self.poster.ephemeral(channel, user,
                                  ":warning: This button cannot be read. Run the command again.")
            return None
        thread = (field(body, "message", "thread_ts") or field(body, "container", "message_ts")
                  or field(body, "message", "ts"))

        def answer(text: str, blocks: Sequence[dict[str, Any]] | None = None) -> None:
            self.poster.ephemeral(channel, user, text, thread_ts=thread, blocks=blocks)

        request = Request(user, channel, field(body, "channel", "name"),
                          field(body, "response_url") or None, time.monotonic(),
                          thread_ts=thread, kind="action")
        if self.cluster is None:
            answer(":lock: Actions need a live cluster: this gpubot reads a snapshot.")
            request.finished(name, "not_enabled", target=node)
            return None
        source = f"finding {value.get('c')}" if value.get("c") else "finding"
        return ActionAsked(request, answer, prefix=self.slash, name=name, command=NODE_LEVEL,
                           target=node, source=source,
                           pending_pods=tuple(_pods_of(str(value.get("t") or ""))),
                           origin=str(value.get("r") or ""))

    def on_finding(self, ack: Ack, context: BoltContext) -> None:
        """A finding's button, read and guarded: a request in the card's thread."""
        ack()
        a = asked(context)
        assert isinstance(a, ActionAsked)
        self._submit(self.request, a.name, a.target, a.request.user, a.request.channel,
                     a.request.thread_ts, a.source, list(a.pending_pods),
                     a.origin or a.request.id)

    def request(self, name: str, target: str, user: str, channel: str, thread: str | None,
                source: str, pending_pods: list[tuple[str, str]], request_id: str = "") -> None:
        """``request_id``: the operator log's id the approval request is audited with."""
        assert self.cluster is not None
        try:
            plan = units.preflight(self.cluster, name, target)
        except (ActionError, LiveError) as err:
            oplog.event("action", command=name, target=target, user=user, channel=channel,
                        outcome="cannot_ask", request_id=request_id)
            self._ephemeral(channel, user, thread,
                            f":x: Cannot ask for {code(f'{name} {target}')}: {escape(err)}")
            return
        req = new_request(plan, requester=user, channel=channel, thread_ts=thread,
                          source=source, pending_pods=pending_pods, ttl=self.policy.ttl,
                          now=self._clock(), request_id=request_id)
        try:
            self.requests.create(req)
        except StoreError as err:
            oplog.event("action", command=name, target=target, user=user, channel=channel,
                        outcome="error", request_id=request_id)
            self._ephemeral(channel, user, thread, f":x: Cannot store the request: "
                                                   f"{escape(err)}")
            return
        # Audited before the card is out: a quick approval must not be logged first.
        self._record("requested", req, source=source, problems=plan.problems)
        msg = card(req, self.policy)
        try:
            ts = self.poster.post(channel, Message("approval", msg["text"], msg["blocks"]),
                                  thread)
        except SlackApiError as err:
            self._ephemeral(channel, user, thread, f":warning: Cannot post the approval card "
                                                   f"here ({escape(error_name(err))}).")
            return
        with contextlib.suppress(StoreError):  # the clicks carry the card's ts anyway
            self.requests.update(req["id"], {"card_ts": ts})

    # -- decisions ------------------------------------------------------------------------------

    def on_approve(self, ack: Ack, body: dict[str, Any]) -> None:
        ack()
        self._submit(self.decide, body, True)

    def on_deny(self, ack: Ack, body: dict[str, Any]) -> None:
        ack()
        self._submit(self.decide, body, False)

    def decide(self, body: dict[str, Any], approve: bool) -> None:
        try:
            self._decide(body, approve)
        except StoreError as err:  # nothing runs without its record: say so to the clicker
            self._ephemeral(field(body, "channel", "id"), field(body, "user", "id"), None,
                            f":x: Cannot record the decision, nothing was run: {escape(err)}")

    def _decide(self, body: dict[str, Any], approve: bool) -> None:
        click = Click.read(body, approve, self._clock())
        moved = decide(click, self.requests, self.policy, self.members, self)
        if moved is None:
            return
        user, channel, card_ts, now = click.user, click.channel, click.card_ts, click.now
        thread = moved.get("thread_ts") or card_ts
        if not approve:
            self._update_card(channel, card_ts, moved, [f":no_entry_sign: Denied by <@{user}> "
                                                        f"at {hhmm(now)}. Nothing was done."])
            self._record("denied", moved)
            return
        self._record("approved", moved)
        self._run(moved, channel, card_ts, thread, user)

    def _run(self, req: dict[str, Any], channel: str, card_ts: str, thread: str,
             user: str) -> None:
        assert self.runner is not None
        plan = Plan.from_json(req["plan"])
        head = f":white_check_mark: Approved by <@{user}> at {hhmm(req['decided_at'])}."
        self._update_card(channel, card_ts, req, [head, ":gear: Running ..."])

        def progress(line: str) -> None:
            self._post(channel, thread, f":gear: {escape(line)}")

        result = self.runner.run(plan, progress)
        lines = [escape(x) for x in result.lines]
        if result.ok and req.get("pending_pods") and self.cluster is not None:
            pods = [(str(p[0]), str(p[1])) for p in req["pending_pods"]]
            lines[-1] += "; " + "; ".join(escape(x) for x in self._pending(pods))
        if result.refused:
            text = f":no_entry: Not run: {escape(result.refused)}"
            if result.forbidden:
                text = (f":no_entry: Not run: the bot's service account may not "
                        f"{escape(result.forbidden)}. {escape(result.refused)}")
            lines.append(text)
            self._ephemeral(channel, user, thread, text)
        icon = ":white_check_mark:" if result.ok else ":x:"
        summary = "\n".join(lines) or "nothing to report"
        if not result.ok and not result.refused and (result.node or plan.target != ALL):
            node = result.node or plan.target
            summary += f"\nNext: {code(f'{self.slash} doctor {node}')}"
        self._post(channel, thread, f"{icon} {summary}")
        state = DONE if result.ok else FAILED
        try:
            final = self.requests.update(req["id"], {
                "state": state, "finished": self._clock(), "result": result.lines,
                "refused": result.refused, "seconds": round(result.seconds, 1)}) or req
        except StoreError as err:  # the thread and the audit log line still say it
            log.error("cannot record the result of request %s: %s", req["id"], err)
            final = {**req, "state": state}
        self._update_card(channel, card_ts, final, [head, f"{icon} {summary}"])
        self._record(state, final, result="; ".join(result.lines) or result.refused or "",
                   seconds=round(result.seconds, 1))

    def _pending(self, pods: list[tuple[str, str]]) -> list[str]:
        """The diagnosis' pending pods, given the scheduler a moment to place them."""
        assert self.cluster is not None
        deadline = time.monotonic() + min(10.0, self.policy.verify_timeout / 10)
        while True:
            report = units.pending_report(self.cluster, pods)
            if all(" scheduled " in r or r.endswith(" gone") for r in report) or (
                    time.monotonic() >= deadline):
                return report
            time.sleep(0.5)

    # -- audit ------------------------------------------------------------------------------------

    def audit_message(self, n: int) -> dict[str, Any]:
        n = max(1, min(n, 50))
        try:
            entries = self.audit.log.last(n)
        except StoreError as err:
            return {"text": f":x: Cannot read the audit log: {escape(err)}",
                    "response_type": "ephemeral"}
        if not entries:
            return {"text": "No gpubot actions recorded yet.", "response_type": "ephemeral"}
        lines = [f"*Last {len(entries)} gpubot action records* (newest first):"]
        for r in entries:
            e = r.data
            what = f"{e.get('action', '')} {e.get('target', '')}"
            line = (f"{when(float(e.get('at', r.created)))} *{escape(e.get('event', ''))}* "
                    f"{code(what)}")
            if e.get("requester"):
                line += f" asked by <@{escape(e['requester'])}>"
            if e.get("approver"):
                line += f", decided by <@{escape(e['approver'])}>"
            if e.get("clicker"):
                line += f", clicked by <@{escape(e['clicker'])}>"
            if e.get("result") or e.get("reason"):
                line += f": {escape(str(e.get('result') or e.get('reason'))[:300])}"
            lines.append(line)
        text = "\n".join(lines)
        return {"text": text[:3900], "response_type": "ephemeral"}

    def _record(self, event: str, req: dict[str, Any], **extra: Any) -> None:
        """The audit trail, ``gpubot_commands_total{command=ACTION, outcome=EVENT}`` and
        the operator log, with the request id the audit record carries."""
        if self._metrics is not None:
            self._metrics.count(str(req.get("action", "action")), event)
        self.audit(event, req, **extra)
        oplog.event("action", command=str(req.get("action", "")),
                    target=str(req.get("target", "")), outcome=event,
                    user=str(extra.get("clicker") or req.get("decided_by")
                             or req.get("requester") or ""),
                    channel=str(req.get("channel", "")), duration=extra.get("seconds"),
                    request_id=str(req.get("request_id") or ""), approval=req.get("id"))

    # -- Slack plumbing -------------------------------------------------------------------------

    def _ephemeral(self, channel: str, user: str, thread: str | None, text: str) -> None:
        self.poster.ephemeral(channel, user, text, thread_ts=thread)

    # bot/slack/decisions.py's DecisionPort
    def tell(self, click: Click, thread: str | None, text: str) -> None:
        self._ephemeral(click.channel, click.user, thread, text)

    def update_card(self, channel: str, ts: str, req: dict[str, Any],
                    status: list[str]) -> None:
        self._update_card(channel, ts, req, status)

    def record(self, event: str, req: dict[str, Any], **extra: Any) -> None:
        self._record(event, req, **extra)

    def _post(self, channel: str, thread: str, text: str) -> None:
        with contextlib.suppress(SlackApiError):
            self.poster.post(channel, Message("progress", text, [section(text)]), thread)

    def _update_card(self, channel: str, ts: str, req: dict[str, Any],
                     status: list[str]) -> None:
        if not ts:
            return
        msg = card(req, self.policy, status)
        with contextlib.suppress(SlackApiError):
            self.poster.update(channel, ts, Message("approval", msg["text"], msg["blocks"]))


# -- the card ------------------------------------------------------------------------------


def card(req: dict[str, Any], policy: Policy, status: list[str] | None = None
         ) -> dict[str, Any]:
    """The approval card: buttons while pending, else ``status`` lines in their place."""
    plan = Plan.from_json(req["plan"])
    title = f"Approval needed: {plan.action} {plan.target}"
    if req.get("state") != PENDING:
        title = f"{plan.action} {plan.target}: {req.get('state')}"
    objects = plan.objects
    shown = "\n".join(f"• {code(o)}" for o in objects[:10])
    if len(objects) > 10:
        shown += f"\n• ... and {len(objects) - 10} more"
    fields = [
        f"*What:* {escape(plan.what)}",
        f"*Objects:*\n{shown}",
        f"*Blast radius:* {escape(plan.blast_radius)}",
    ]
    problems = plan.problems
    if problems:
        fields.append("*Problem now:* " + escape("; ".join(problems[:5])))
    fields.append(f"*Asked by:* <@{escape(req['requester'])}>  ·  *Expires:* "
                  f"{date(float(req['expires']))}")
    approvers = ", ".join(mention(a) for a in policy.approvers) or "none configured"
    context = (f"Request {code(req['id'])}  ·  from {escape(req.get('source', 'command'))}"
               f"  ·  approvers: {approvers}"
               + ("" if not policy.allow_self_approval else "  ·  self-approval allowed"))
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": title[:150],
                                    "emoji": True}},
        section("\n".join(fields)),
        {"type": "context", "elements": [{"type": "mrkdwn", "text": context[:3000]}]},
    ]
    if req.get("state") == PENDING and not status:
        blocks.append({"type": "actions", "block_id": "gpubot_approval", "elements": [
            button("Approve", APPROVE, req["id"], "primary",
                    "Run it?", f"{plan.what}. {plan.blast_radius}", "Approve"),
            button("Deny", DENY, req["id"], "danger",
                    "Deny it?", "The request will be closed; nothing will be run.", "Deny"),
        ]})
    for line in status or []:
        blocks.append(section(line))
    return {"text": title, "blocks": blocks}


def _parse(words: list[str]) -> tuple[str, str]:
    name = words[0].lower()
    rest = words[1:]
    if name == "audit":
        if len(rest) > 1 or (rest and not rest[0].isdigit()):
            raise CommandError(f"audit takes one number, not {code(' '.join(rest))}")
        return name, rest[0] if rest else ""
    if len(rest) != 1 or (rest[0].startswith("-") and not (
            name == "restart-plugin" and rest[0] == ALL)):
        usage = "restart-plugin NODE|--all" if name == "restart-plugin" else f"{name} NODE"
        raise CommandError(f"{name} takes one node (usage: {code(usage)})")
    return name, rest[0]


def _pods_of(target: str) -> list[tuple[str, str]]:
    """The pod a why-pending diagnosis was about (``pod/ns/name`` or ``ns/name``)."""
    parts = target.split("/")
    if parts and parts[0].lower() == "pod":
        parts = parts[1:]
    if len(parts) == 2 and all(parts):
        return [(parts[0], parts[1])]
    return []


# -- setup ------------------------------------------------------------------------------------

def open_approvals(settings: Any, view: Any) -> Approvals | None:
    """Approvals for ``gpubot serve`` on a live cluster with approvers configured (else
    None: actions are off). ``view`` is the bot's view: a LiveView, or a wrapper holding
    one as ``.view``. Raises StoreError when the store cannot be opened."""
    from bot.store import api_client_of, open_configured

    api_client = api_client_of(view)
    if api_client is None:
        return None
    if not settings.approvers:
        log.info("actions are off: no approvers configured (GPUBOT_APPROVERS)")
        return None
    store = open_configured(settings, api_client)
    cluster = Cluster(api_client, timeout=settings.kube_timeout,
                      plugin_namespace=settings.plugin_namespace,
                      plugin_selector=settings.plugin_selector)
    policy = Policy(tuple(settings.approvers), settings.allow_self_approval, settings.approval_ttl,
                    settings.verify_timeout)
    log.info("actions: store %s, approvers %s", store, ", ".join(policy.approvers) or "none")
    return Approvals(store, cluster, policy)
