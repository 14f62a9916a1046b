"""One living Slack thread per incident: the sentinel's publisher (``Publisher``).

``publish(incident, now)`` is handed every incident whose card is behind (``incident.rev``
ahead of ``incident.posted["rev"]``) and returns what it posted, kept as ``posted``:

- no card yet: route it (``sentinel_routes``, first match wins, else the sentinel's
  channel), claim it in the record, post the card and save its channel and ``ts`` at once
  (whatever fails after, the card is never posted twice), then diagnose in its thread;
- a card: edit it in place (``chat.update``) when it reads differently; a thread reply only
  when it resolved or re-opened, or members joined or left (those at most once a
  ``note_gap``: the card always says who is in it now, the thread does not narrate churn);
  the diagnosis runs again only when the members it diagnoses changed, and is posted only
  when its codes did (``bot.slack.threads.diagnose_in_thread``);
- resolved: the card says so, with how long it lasted and the GPU-hours it cost.

Several clusters: an incident's card names its cluster, its diagnosis reads that cluster
(``-c NAME``), and a route may match it (``cluster=prod=C0PROD``).

A re-opened incident is the same record, so the same card and thread. The diagnosis is the
same handlers as ``/gpu doctor NODE`` and ``/gpu why-pending POD`` under the channel's
namespace map, rendered as their answer (with the finding's action buttons); the card
names only members whose namespace the channel may query.
"""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Protocol

from bot.alerts.routing import Route, channel_for_any
from bot.sentinel.incidents import Incident, IncidentBook
from bot.slack.blocks import Message, Rendered, Renderer
from bot.slack.commands import Command, CommandError, parse_args
from bot.slack.threads import SlackPort, diagnose_in_thread
from handlers.model import Diagnosis
from handlers.sentinel.detectors import REGISTRY
from handlers.timefmt import span_text

log = logging.getLogger("gpubot.sentinel")

# What a sentinel route may match; ``cluster``: the fleet's cluster the incident is about.
ROUTE_KEYS = ("namespace", "pool", "node", "detector", "cluster")
CLAIM_TIMEOUT = 120.0  # seconds before another replica's unfinished card is taken over
MAX_SHOWN = 10  # members listed on the card
MAX_NAMED = 10  # members named in a thread note


class Diagnoser(Protocol):
    """A channel's diagnoses (``bot.slack.threads.ChannelDiagnoses``)."""

    def allowed(self, channel: str, cluster: str | None = None) -> frozenset[str] | None: ...

    def diagnose(self, cmd: Command, channel: str) -> Diagnosis: ...

    def render(self, cmd: Command, diag: Diagnosis) -> Rendered: ...


@dataclass(frozen=True)
class Words:
    """How a detector's incidents say how much."""

    severity: str
    hours: str  # "GPU-hours lost"
    noun: str  # what its members are

    def headline(self, inc: Incident, gpus: float) -> str:
        n = inc.members_total
        nodes = len({m["node"] for m in inc.members.values() if m.get("node")})
        if inc.detector == "gpu-capacity-lost":
            return f"{gpus:g} GPUs lost on {_count(n, 'node')}"
        if inc.detector == "gpu-stack-down":
            return f"{_count(n, 'pod')} down on {_count(nodes, 'node')}: {gpus:g} GPUs at stake"
        if inc.detector == "gpu-pending":
            return f"{_count(n, 'pod')} waiting for {gpus:g} GPUs"
        return f"{gpus:g} GPUs, {_count(n, 'member')}"


WORDS = {"gpu-capacity-lost": Words("critical", "GPU-hours lost", "node"),
         "gpu-stack-down": Words("critical", "GPU-hours at stake", "pod"),
         "gpu-pending": Words("warning", "GPU-hours waited", "pod")}
_DEFAULT_WORDS = Words("warning", "GPU-hours", "member")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]


def _stamp(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M UTC")


def _hours(h: float) -> str:
    return f"{h:.2f}" if h < 10 else f"{h:.1f}"


def _name(subject: str) -> str:
    """``node/gpu-1`` -> ``gpu-1``, ``pod/ml/train-0`` -> ``ml/train-0``."""
    return subject.split("/", 1)[-1]


class IncidentThreads:
    def __init__(self, book: IncidentBook, slack: SlackPort, renderer: Renderer,
                 diagnoser: Diagnoser, *, channel: str | None, routes: list[Route],
                 thresholds: Mapping[str, float], note_gap: float = 120.0) -> None:
        self.book = book
        self.slack = slack
        self.renderer = renderer
        self.diagnoser = diagnoser
        self.channel = channel
        self.routes = routes
        self.thresholds = dict(thresholds)
        self.note_gap = note_gap
        self.owner = uuid.uuid4().hex  # this replica: its own unfinished claim is its to finish

    def route(self, inc: Incident) -> str | None:
        values = {"namespace": inc.namespaces, "pool": inc.pools, "detector": [inc.detector],
                  "node": sorted({str(m["node"]) for m in inc.members.values()
                                  if m.get("node")}),
                  "cluster": [inc.cluster] if inc.cluster else []}
        return channel_for_any(values, self.routes, self.channel)

    # -- Publisher ----------------------------------------------------------------------------

    def publish(self, inc: Incident, now: float) -> Mapping[str, Any] | None:
        posted = {k: v for k, v in (inc.posted or {}).items() if k != "rev"}
        if not posted.get("ts"):
            started = self._first_card(inc, posted, now)
            if started is None:
                return None
            posted = started
            if posted.get("channel") is None:
                return posted  # nowhere to post: nothing owed
        else:
            self._follow_up(inc, posted, now)
        if inc.state == "open":
            self._diagnose(inc, posted)
        return posted

    # -- the card -----------------------------------------------------------------------------

    def _first_card(self, inc: Incident, posted: dict[str, Any], now: float
                    ) -> dict[str, Any] | None:
        channel = posted.get("channel") or self.route(inc)
        if channel is None:
            log.warning("incident %s (%s, %s): no channel: set GPUBOT_SENTINEL_CHANNEL or a "
                        "route that matches it", inc.key[:8], inc.detector, inc.group)
            return {"channel": None}
        owner = posted.get("owner")
        if owner and owner != self.owner and now - float(posted.get("claimed") or 0) \
                < CLAIM_TIMEOUT:
            return None  # another replica is posting it (a leader that just lost its lease)
        posted.update(channel=channel, owner=self.owner, claimed=now)
        if not self.book.mark_posted(inc, posted):
            return None  # the record is gone: the next tick knows better
        card = self.card(inc, channel, now)
        ts = self.slack.post(channel, card, None)
        posted.update(ts=ts, card=_digest([card.text, card.blocks]), members=sorted(inc.members),
                      state=inc.state, noted=now, owed=True, codes={})
        # The card exists: never post it twice, whatever fails from here on.
        self.book.mark_posted(inc, posted)
        log.info("incident %s (%s, %s): card %s in %s", inc.key[:8], inc.detector, inc.group,
                 ts, channel)
        return posted

    def _follow_up(self, inc: Incident, posted: dict[str, Any], now: float) -> None:
        channel, ts = str(posted["channel"]), str(posted["ts"])
        card = self.card(inc, channel, now)
        digest = _digest([card.text, card.blocks])
        if digest != posted.get("card"):
            self.slack.update(channel, ts, card)
            posted["card"] = digest
        before = set(posted.get("members") or [])
        after = set(inc.members)
        turned = posted.get("state") != inc.state
        if inc.state == "open" and turned:
            posted["owed"] = True  # re-opened: diagnose again
        due = now - float(posted.get("noted") or 0) >= self.note_gap
        if turned or (before != after and due):
            text = self._note(inc, channel, before, after, turned, now)
            self.slack.post(channel, self.renderer.render_template(
                "slack/thread_note.j2", text=text)[0], ts)
            posted.update(members=sorted(after), state=inc.state, noted=now)

    def card(self, inc: Incident, channel: str, now: float) -> Message:
        """The card as ``channel`` may see it."""
        words = WORDS.get(inc.detector, _DEFAULT_WORDS)
        allowed = self.diagnoser.allowed(channel, inc.cluster or None)
        members = sorted(inc.members.values(), key=lambda m: (-float(m["gpus"]),
                                                             str(m["summary"])))
        seen = [m for m in members if allowed is None or not m.get("namespace")
                or m["namespace"] in allowed]
        detector = REGISTRY.get(inc.detector)
        setting = detector.setting if detector else ""
        limit = self.thresholds.get(setting, detector.default if detector else 0.0)
        resolved = inc.state == "resolved"
        lines = [str(m["summary"]) for m in seen[:MAX_SHOWN]]
        return self.renderer.render_template(
            "slack/incident.j2", state=inc.state, title=inc.title, group=inc.group,
            cluster=inc.cluster,
            severity=words.severity,
            headline=words.headline(inc, inc.peak if resolved else inc.gpus),
            gpus=f"{inc.gpus:g}", peak=f"{inc.peak:g}", gpu_hours=_hours(inc.gpu_hours(now)),
            # Edited on changes only: what it counts is as of this edit, and says so.
            hours_label=words.hours if resolved else
            f"{words.hours} by {datetime.fromtimestamp(now, UTC).strftime('%H:%M UTC')}",
            since=_stamp(inc.since), lasted=span_text(inc.duration(now)),
            members=lines, members_heading=_count(inc.members_total, words.noun),
            noun=words.noun,
            # Beyond the record's members they are only counted; unseen ones are not named.
            hidden=inc.members_total - (len(members) - len(seen)) - len(lines),
            unseen=len(members) - len(seen),
            detector=inc.detector, threshold=f"{span_text(limit)} ({setting})",
            reopened=inc.reopened, commands=bool(inc.diagnose()))[0]

    def _note(self, inc: Incident, channel: str, before: set[str], after: set[str],
              turned: bool, now: float) -> str:
        parts: list[str] = []
        words = WORDS.get(inc.detector, _DEFAULT_WORDS)
        if turned and inc.state == "resolved":
            parts.append(f"resolved after {span_text(inc.duration(now))}: "
                         f"{_hours(inc.gpu_hours(now))} {words.hours}")
        elif turned:
            parts.append(f"back: re-opened ({_count(inc.reopened, 'time')})")
        allowed = self.diagnoser.allowed(channel, inc.cluster or None)
        for label, subjects in (("joined", after - before), ("left", before - after)):
            if subjects and inc.state == "open":
                parts.append(f"{len(subjects)} {label}: {self._names(inc, subjects, allowed)}")
        if inc.state == "open":
            parts.append(words.headline(inc, inc.gpus))
        return "; ".join(parts)

    @staticmethod
    def _names(inc: Incident, subjects: set[str], allowed: frozenset[str] | None) -> str:
        def seen(s: str) -> bool:
            ns = (inc.members.get(s) or {}).get("namespace")
            if ns is None and s.startswith("pod/"):
                ns = s.split("/")[1]  # a member that left: its namespace is in its name
            return allowed is None or not ns or ns in allowed

        named = sorted(_name(s) for s in subjects if seen(s))
        out = ", ".join(named[:MAX_NAMED])
        more = len(subjects) - min(len(named), MAX_NAMED)
        return out + (f" and {more} more" if more else "") if out else f"{more} not shown here"

    # -- the diagnosis ------------------------------------------------------------------------

    def _diagnose(self, inc: Incident, posted: dict[str, Any]) -> None:
        pairs = [list(p) for p in inc.diagnose()]
        if not posted.get("owed") and pairs == posted.get("diagnosed"):
            return
        commands = []
        for command, target in pairs:
            try:
                # No target: a command of the whole cluster (`nodes` for idle GPUs).
                cmd = parse_args([command, target] if target else [command])
                # Several clusters: the incident's own cluster is read, and its card says so.
                commands.append(replace(cmd, cluster=inc.cluster) if inc.cluster else cmd)
            except CommandError as err:  # a target /gpu cannot name: said in the log only
                log.warning("incident %s: cannot diagnose %s %s: %s", inc.key[:8], command,
                            target, err)
        channel, ts = str(posted["channel"]), str(posted["ts"])
        posted["codes"] = diagnose_in_thread(
            self.slack, channel, ts, commands, dict(posted.get("codes") or {}),
            self.diagnoser.diagnose, self.diagnoser.render)
        posted.update(diagnosed=pairs, owed=False)
