"""Approval requests: their record in the store, the rules checked at click time, the run.

A request is one record in the ``approvals`` collection. Its ``state`` moves
``pending -> running -> done | failed``, or ``pending -> denied | expired``, and every move
is a compare-and-swap on the record's version: of any number of clicks, Slack retries and
bot replicas, exactly one moves a request out of ``pending``, and only that one acts.

Rules (``check``), in order, each refusal a sentence for the clicker:
  the request exists; it is still pending (else who decided it, and when); it has not
  expired; the clicker is an approver (a user ID, or a member of a user group ``S...``);
  the clicker did not ask for it (unless self-approval is allowed).
Before acting (``Runner.run``): every step's preconditions again (same pod UID, problem
still there), then per step a server-side dry run, the write, and its verification.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from bot.live.errors import ApiForbidden, LiveError
from bot.store import AuditLog, Record, Store

from . import units
from .cluster import Cluster
from .units import Outcome, Plan

log = logging.getLogger("gpubot.actions")
audit_log = logging.getLogger("gpubot.audit")

COLLECTION = "approvals"
PENDING, RUNNING, DONE, FAILED, DENIED, EXPIRED = (
    "pending", "running", "done", "failed", "denied", "expired")
FINAL = (DONE, FAILED, DENIED, EXPIRED)
PRUNE_EVERY = 50  # requests created between two prunes
KEEP_SECONDS = 7 * 86400.0


@dataclass(frozen=True)
class Policy:
    approvers: tuple[str, ...] = ()  # Slack user IDs (U..., W...) and user-group IDs (S...)
    allow_self_approval: bool = False
    ttl: float = 900.0  # seconds a request stays open
    verify_timeout: float = 180.0

    @property
    def users(self) -> set[str]:
        return {a for a in self.approvers if not a.startswith("S")}

    @property
    def groups(self) -> list[str]:
        return [a for a in self.approvers if a.startswith("S")]


def new_request(plan: Plan, *, requester: str, channel: str, thread_ts: str | None,
                source: str, pending_pods: Iterable[tuple[str, str]] = (),
                ttl: float, now: float | None = None, request_id: str = "") -> dict[str, Any]:
    """``request_id``: the Slack request it came from (the operator log's, bot/oplog.py):
    the command whose card offered the action, or the action command itself."""
    now = time.time() if now is None else now
    return {
        "id": secrets.token_hex(8), "action": plan.action, "target": plan.target,
        "plan": plan.to_json(), "requester": requester, "channel": channel,
        "thread_ts": thread_ts or "", "source": source, "request_id": request_id,
        "pending_pods": [list(p) for p in pending_pods],
        "created": now, "expires": now + ttl, "state": PENDING,
    }


def check(req: Mapping[str, Any] | None, user: str, policy: Policy,
          members: Callable[[str], set[str]], now: float, *, deny: bool = False) -> str | None:
    """Why ``user`` may not approve (or ``deny``) this request now (None: they may). The
    requester may always withdraw their own request with Deny."""
    if req is None:
        return "This request is unknown (it may have been cleaned up). Ask again."
    state = req.get("state")
    by = f"<@{req.get('decided_by')}>"
    if state == EXPIRED:
        return "This request expired already, unanswered. Ask again if it is still needed."
    if state == DENIED:
        return f"This request was denied by {by} already: nothing was run."
    if state == RUNNING:
        return f"This request was approved by {by} already and is running."
    if state in (DONE, FAILED):
        return f"This request was approved by {by} already and has run ({state})."
    if now >= float(req.get("expires", 0)):
        return ("This request expired (after "
                f"{(float(req['expires']) - float(req['created'])) / 60:g} min). Ask again.")
    if deny and user == req.get("requester"):
        return None
    if not is_approver(user, policy, members):
        return ("You are not an approver for gpubot actions. Approvers: "
                + (", ".join(_mention(a) for a in policy.approvers) or "none configured"))
    if user == req.get("requester") and not policy.allow_self_approval:
        return "You asked for this action: another approver must approve it."
    return None


def is_approver(user: str, policy: Policy, members: Callable[[str], set[str]]) -> bool:
    if user in policy.users:
        return True
    return any(user in members(g) for g in policy.groups)


def _mention(approver: str) -> str:
    return f"<!subteam^{approver}>" if approver.startswith("S") else f"<@{approver}>"


class Requests:
    """The approvals collection, with state changes that only one caller can win."""

    def __init__(self, store: Store, collection: str = COLLECTION) -> None:
        self.store = store
        self.collection = collection  # silences of alert groups keep theirs apart
        self._created = 0

    def create(self, req: dict[str, Any]) -> None:
        if not self.store.create(self.collection, req["id"], req):
            raise RuntimeError(f"request id {req['id']} exists")  # 64 random bits
        self._created += 1
        if self._created % PRUNE_EVERY == 0:
            self.prune(float(req["created"]))

    def prune(self, now: float, keep: float = KEEP_SECONDS) -> int:
        """Forget decided or expired requests older than ``keep`` (the audit log keeps
        their story):
        a ConfigMap per request must not pile up for ever."""
        gone = 0
        for rec in self.store.list(self.collection, limit=10_000):
            done = rec.data.get("state") in FINAL or now > float(rec.data.get("expires", now))
            if done and now - rec.created > keep:
                gone += self.store.delete(self.collection, rec.key, rec.version)
        return gone

    def get(self, rid: str) -> Record | None:
        return self.store.get(self.collection, rid)

    def move(self, rid: str, expect: str, changes: Mapping[str, Any]) -> dict[str, Any] | None:
        """Apply ``changes`` if the request is in state ``expect``; the new data if this
        call made the change, None if another did first (or the state is different)."""
        while True:
            rec = self.get(rid)
            if rec is None or rec.data.get("state") != expect:
                return None
            data = {**rec.data, **changes}
            if self.store.update(self.collection, rid, data, rec.version):
                return data
            # Lost a race: read again; the state has most likely moved on.

    def update(self, rid: str, changes: Mapping[str, Any]) -> dict[str, Any] | None:
        """Merge ``changes`` whatever the state (progress notes of the one runner)."""
        while True:
            rec = self.get(rid)
            if rec is None:
                return None
            data = {**rec.data, **changes}
            if self.store.update(self.collection, rid, data, rec.version):
                return data


class Auditor:
    """Every request, decision and result: in the store, as a JSON log line, and as a
    Kubernetes Event on the affected node."""

    def __init__(self, store: Store, cluster: Cluster | None) -> None:
        self.log = AuditLog(store)
        self.cluster = cluster

    def __call__(self, event: str, req: Mapping[str, Any], *, event_on_object: bool = True,
                 **extra: Any) -> None:
        entry = {
            "event": event, "at": time.time(), "request": req.get("id"),
            "action": req.get("action"), "target": req.get("target"),
            "objects": Plan.from_json(req["plan"]).objects if req.get("plan") else [],
            "requester": req.get("requester"), "approver": req.get("decided_by"),
            "channel": req.get("channel"), "state": req.get("state"),
            "request_id": req.get("request_id") or "", **extra,
        }
        try:
            self.log.append(entry)
        except Exception as err:  # StoreError: the log line below still records it
            log.error("cannot store the audit entry: %s", err)
        audit_log.info(json.dumps({"audit": entry}, sort_keys=True, default=str))
        if self.cluster is None or not req.get("plan") or not event_on_object:
            return
        text = f"gpubot {event}: {req.get('action')} {req.get('target')}"
        if req.get("requester"):
            text += f", asked by Slack user {req.get('requester')}"
        if req.get("decided_by"):
            text += f", {req.get('state')} by Slack user {req.get('decided_by')}"
        if extra.get("result"):
            text += f": {extra['result']}"
        nodes = {s["node"] for s in req["plan"].get("steps") or []}
        if req.get("target") == units.ALL:
            nodes = set(list(sorted(nodes))[:1])  # one event per request, not per node
        for node in sorted(nodes):
            try:
                obj = self.cluster.node(node)
            except LiveError:
                obj = None
            if obj is not None:
                self.cluster.event(obj, f"Gpubot{event.capitalize()}", text,
                                   warning=event in ("failed", "refused"))


@dataclass
class RunResult:
    ok: bool
    lines: list[str]  # one per step done (or refused), for the thread and the card
    refused: str | None = None  # preconditions or dry run refused: nothing was changed
    forbidden: str | None = None  # the RBAC rule that is missing, when a 403 stopped it
    seconds: float = 0.0
    node: str | None = None  # the node that did not recover


class Runner:
    """Runs an approved plan: preconditions, dry run, write, verification, step by step."""

    def __init__(self, cluster: Cluster, *, verify_timeout: float = 180.0,
                 poll: float = 1.0) -> None:
        self.cluster = cluster
        self.verify_timeout = verify_timeout
        self.poll = poll

    def run(self, plan: Plan, progress: Callable[[str], None] = lambda _: None) -> RunResult:
        start = time.monotonic()
        lines: list[str] = []
        acted = False  # a real write was made: a later error is a failure, not a refusal
        rolling = plan.target == units.ALL  # healthy nodes are restarted too
        try:
            for step in plan.steps:  # every precondition first: a changed world refuses all
                why = units.recheck(self.cluster, step, same_problem=not rolling)
                if why:
                    return RunResult(False, lines, refused=why)
            for n, step in enumerate(plan.steps):
                if n:  # later steps: checked again just before their turn
                    why = units.recheck(self.cluster, step, same_problem=not rolling)
                    if why:
                        lines.append(f"stopped before {step.node}: {why}")
                        return RunResult(False, lines, seconds=time.monotonic() - start)
                units.execute(self.cluster, step, dry_run=True)
                acted = True
                units.execute(self.cluster, step, dry_run=False)
                if len(plan.steps) > 1:
                    progress(f"{step.node}: {_done(step)}, verifying ({n + 1}/{len(plan.steps)})")
                outcome: Outcome = units.verify(self.cluster, step, timeout=self.verify_timeout,
                                                poll=self.poll)
                lines.append(outcome.text)
                if not outcome.ok:
                    rest = len(plan.steps) - n - 1
                    if rest:
                        lines.append(f"stopped: {rest} node(s) not restarted")
                    return RunResult(False, lines, seconds=time.monotonic() - start,
                                     node=step.node)
        except LiveError as err:
            took = time.monotonic() - start
            rule = _rule(err) if isinstance(err, ApiForbidden) else None
            if not acted:
                return RunResult(False, lines, refused=str(err), forbidden=rule, seconds=took)
            lines.append(f"stopped: {err}")
            return RunResult(False, lines, forbidden=rule, seconds=took)
        return RunResult(True, lines, seconds=time.monotonic() - start)


def _done(step: units.Step) -> str:
    return f"deleted {step.pod}" if step.action == "restart-plugin" else step.action + "ed"


def _rule(err: ApiForbidden) -> str:
    r = err.rule
    return (f"{','.join(r.get('verbs', []))} {','.join(r.get('resources', []))}"
            + (f" (API group {r['apiGroups'][0]})" if r.get("apiGroups", [""])[0] else ""))
