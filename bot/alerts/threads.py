"""One living Slack thread per Alertmanager group, its state in the store.

``AlertThreads.handle(group, channel)`` is called for each (coalesced) webhook of a group:

- first time: claim the group in the store (create-if-absent, so two replicas never both
  post), post the card, record its ``ts`` at once, then the diagnosis in its thread;
- again: merge the alerts (by fingerprint); edit the card (``chat.update``) only when it
  reads differently; add to the thread only when alerts or the diagnosis' codes changed;
- resolved: the card says "Resolved" in place, with how long the group fired.

The card leads with the diagnosis' root cause (edited in when the diagnosis in the thread
changes it), then the severity, how long the group has fired, links to Alertmanager, the
Prometheus graph of the rule and the runbook, and a Silence menu when silences are on
(``bot/alerts/silences.py``).

The record (collection ``alert-threads``, keyed by a hash of the groupKey) holds the
channel, the card's ts, the alerts seen, the group's labels and Alertmanager URL, the
card's hash, and the codes and root cause of each diagnosis.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from bot.alerts.mapping import commands_for
from bot.alerts.payload import AlertGroup
from bot.runbook import valid_base
from bot.slack.blocks import Message, Renderer
from bot.slack.commands import Command
from bot.slack.threads import Diagnose, Render, SlackPort, diagnose_in_thread
from bot.store import Record, Store
from handlers.timefmt import age_text, parse_time, span_text

log = logging.getLogger("gpubot.alerts")

COLLECTION = "alert-threads"
MAX_ALERTS = 500  # kept per group (firing ones first)
MAX_DIAGNOSES = 5  # per group and change; the card says how many targets were left out
CLAIM_TIMEOUT = 120.0  # seconds before another replica's unfinished claim is taken over
_NEVER = "0001-01-01T00:00:00Z"  # Alertmanager's endsAt for a firing alert


class Retry(Exception):
    """Try this group again later (another replica is posting its card)."""


def group_id(group_key: str) -> str:
    return hashlib.sha256(group_key.encode()).hexdigest()[:40]


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]


class AlertThreads:
    def __init__(self, store: Store, slack: SlackPort, renderer: Renderer,
                 diagnose: Diagnose, render: Render,
                 clock: Callable[[], float] = time.time, *,
                 alertmanager_url: str | None = None,
                 silence_durations: Sequence[str] = (),
                 cluster_label: str | None = None) -> None:
        self.store = store
        self.slack = slack
        self.renderer = renderer
        self.diagnose = diagnose
        self.render = render
        self.clock = clock
        # Links and silences go here rather than to the webhook's externalURL when set.
        self.alertmanager_url = alertmanager_url
        self.silence_durations = tuple(silence_durations)  # the Silence menu; () hides it
        self.owner = uuid.uuid4().hex  # this replica: its own unfinished claim is its to finish
        # Several clusters: the label naming an alert's cluster. Its diagnoses read that
        # cluster, its card names it, and its record is the cluster's own (two clusters'
        # Alertmanagers may send the same groupKey).
        self.cluster_label = cluster_label

    def cluster_of(self, group: AlertGroup) -> str:
        if not self.cluster_label:
            return ""
        return (group.common_labels.get(self.cluster_label)
                or group.group_labels.get(self.cluster_label) or "")

    # -- the record -------------------------------------------------------------------------

    def key_of(self, group: AlertGroup) -> str:
        """The group's own key: its groupKey, in its cluster (two clusters' Alertmanagers
        may send the same groupKey)."""
        cluster = self.cluster_of(group)
        return group_id(f"{cluster}\0{group.group_key}" if cluster else group.group_key)

    def _claim(self, group: AlertGroup, channel: str) -> tuple[Record, bool]:
        """(the group's record, True when this call created it)."""
        key = self.key_of(group)
        for _ in range(5):
            rec = self.store.get(COLLECTION, key)
            if rec is not None:
                return rec, False
            data: dict[str, Any] = {"group_key": group.group_key, "channel": channel, "ts": None,
                                    "owner": self.owner, "claimed": self.clock(), "alerts": {},
                                    "card": "", "codes": {}}
            if self.store.create(COLLECTION, key, data):
                rec = self.store.get(COLLECTION, key)
                if rec is not None:
                    return rec, True
        raise Retry("the group's record keeps changing")

    def _save(self, rec: Record, data: dict[str, Any]) -> Record:
        if not self.store.update(COLLECTION, rec.key, data, rec.version):
            raise Retry("another replica updated the group first")
        new = self.store.get(COLLECTION, rec.key)
        if new is None:
            raise Retry("the group's record vanished")
        return new

    # -- one webhook --------------------------------------------------------------------------

    def handle(self, group: AlertGroup, channel: str) -> None:
        rec, mine = self._claim(group, channel)
        data = dict(rec.data)
        mine = mine or data.get("owner") == self.owner
        if data.get("ts") is None and not mine:
            if self.clock() - float(data.get("claimed") or 0) < CLAIM_TIMEOUT:
                raise Retry("another replica is posting this group's card")
            data["owner"] = self.owner  # its claim is stale: take the group over
        before = dict(data.get("alerts") or {})
        alerts = _merge(before, group)
        data.update(alerts=alerts, common_labels=dict(group.common_labels),
                    common_annotations=dict(group.common_annotations),
                    group_labels=dict(group.group_labels), external_url=group.external_url)
        status = "firing" if any(a["status"] == "firing" for a in alerts.values()) \
            else "resolved"
        ordered = _ordered(alerts)  # firing first
        targets = commands_for([a["labels"] for a in ordered if a["status"] == "firing"] or
                               [a["labels"] for a in ordered], self.cluster_label)
        commands = targets[:MAX_DIAGNOSES]
        card, card_hash = self._card(rec.key, data, status, commands, len(targets))
        channel = str(data.get("channel") or channel)
        if data.get("ts") is None:
            ts = self.slack.post(channel, card, None)
            # The card exists: never post it twice. Its diagnosis is still owed if what
            # follows fails and the group comes back.
            data.update(ts=ts, card=card_hash, status=status, owed=True)
            rec = self._save(rec, data)
            log.info("alert group %s: card %s in %s", group.group_key, ts, channel)
            changed = True
        else:
            ts = str(data["ts"])
            if card_hash != data.get("card"):
                self.slack.update(channel, ts, card)
                data["card"] = card_hash
            changed = _states(before) != _states(alerts)
            if changed:
                self.slack.post(channel, _note(self.renderer, before, alerts, status), ts)
        if status == "firing" and (changed or data.get("owed")):
            causes: dict[str, dict[str, str]] = dict(data.get("causes") or {})
            data["codes"] = diagnose_in_thread(self.slack, channel, ts, commands,
                                               dict(data.get("codes") or {}), self.diagnose,
                                               self.render, causes)
            data.update(causes=causes, status=status, owed=False)
            rec = self._save(rec, data)  # the thread has it: a failed edit must not repeat it
            card, card_hash = self._card(rec.key, data, status, commands, len(targets))
            if card_hash != data.get("card"):  # the card leads with the (new) root cause
                self.slack.update(channel, ts, card)
                data["card"] = card_hash
        data.update(status=status, owed=False)
        self._save(rec, data)

    def silenced(self, gid: str, silence: str, until: float, by: str) -> None:
        """A silence on the group was created (``bot/alerts/silences.py``): the card says
        so, until when and who approved it, in place of its Silence menu. Alertmanager
        sends nothing more for a silenced group, so the card is edited here."""
        for _ in range(5):
            rec = self.store.get(COLLECTION, gid)
            if rec is None or rec.data.get("ts") is None:
                return
            data = {**rec.data, "silenced": {"id": silence, "until": until, "by": by}}
            if self.store.update(COLLECTION, gid, data, rec.version):
                break
        else:
            raise Retry("the group's record keeps changing")
        status = str(data.get("status") or "firing")
        ordered = _ordered(data["alerts"])
        targets = commands_for([a["labels"] for a in ordered if a["status"] == "firing"] or
                               [a["labels"] for a in ordered], self.cluster_label)
        card, card_hash = self._card(gid, data, status, targets[:MAX_DIAGNOSES], len(targets))
        self.slack.update(str(data["channel"]), str(data["ts"]), card)
        rec = self.store.get(COLLECTION, gid)
        if rec is not None:  # the next webhook's edit compares with this card
            with contextlib.suppress(Retry):
                self._save(rec, {**rec.data, "card": card_hash})

    def _card(self, gid: str, data: Mapping[str, Any], status: str, commands: list[Command],
              targets: int) -> tuple[Message, str]:
        """The card, and a hash of what it says apart from how long the group has fired
        (edits follow changes; each edit brings the duration up to date)."""
        alerts: dict[str, dict[str, Any]] = data["alerts"]
        common = dict(data.get("common_labels") or {})
        annotations = dict(data.get("common_annotations") or {})
        names = sorted({a["labels"].get("alertname", "?") for a in alerts.values()})
        title = names[0] if len(names) == 1 else f"{len(names)} alerts"
        cluster = common.get(self.cluster_label or "") if self.cluster_label else None
        if cluster:
            title = f"{title} · cluster {cluster}"
        ordered = _ordered(alerts)
        first = ordered[0]
        summary = (annotations.get("summary")
                   or (first["annotations"].get("summary") if len(alerts) == 1 else "")
                   or f"{title}: {len(alerts)} alert{'s' if len(alerts) > 1 else ''}")
        description = annotations.get("description") or annotations.get("message") or ""
        starts = [t for t in (parse_time(a["startsAt"]) for a in alerts.values()) if t]
        ends = [t for t in (parse_time(a["endsAt"]) for a in alerts.values()
                            if a["endsAt"] and not a["endsAt"].startswith("0001")) if t]
        since = min(starts) if starts else None
        now = datetime.fromtimestamp(self.clock(), UTC)
        lasted = ""
        if status == "resolved" and since is not None:
            end = max(ends) if ends else now
            lasted = span_text((end - since).total_seconds())
        lines = [f"{a['status'].upper():8} " + " ".join(
            f"{k}={v}" for k, v in sorted(a["labels"].items())
            if k not in common or len(alerts) == 1) for a in ordered]
        causes = dict(data.get("causes") or {})
        found = [{"command": c.line(), **causes[c.line()]} for c in commands
                 if c.line() in causes]
        matchers = matchers_of(alerts)
        quiet = dict(data.get("silenced") or {})
        silenced = ({"id": str(quiet["id"]), "by": str(quiet["by"]),
                     "until": datetime.fromtimestamp(float(quiet["until"]), UTC).strftime(
                         "%Y-%m-%d %H:%M UTC"), "until_epoch": int(quiet["until"])}
                    if quiet and float(quiet.get("until") or 0) > self.clock() else None)
        am = self.alertmanager_url or str(data.get("external_url") or "")
        card_vars: dict[str, Any] = dict(
            status=status, title=title, summary=summary, description=description,
            severity=common.get("severity", ""),
            labels=sorted((k, v) for k, v in common.items()
                          if k not in ("alertname", "severity")),
            alerts=lines if len(alerts) > 1 or not common else [],
            firing=sum(a["status"] == "firing" for a in alerts.values()),
            resolved_count=sum(a["status"] == "resolved" for a in alerts.values()),
            since=since.strftime("%Y-%m-%d %H:%M UTC") if since else "",
            since_epoch=int(since.timestamp()) if since else 0,
            lasted=lasted, commands=[c.line() for c in commands], targets=targets,
            causes=found,
            alertmanager=alerts_link(am, matchers),
            graph=next((a.get("generatorURL", "") for a in ordered
                        if valid_base(a.get("generatorURL") or "")), ""),
            runbook_url=next((u for u in (annotations.get("runbook_url"),
                                          *(a["annotations"].get("runbook_url")
                                            for a in ordered)) if u and valid_base(u)), ""),
            runbook_code=next((c["code"] for c in found if c["code"]), ""),
            silenced=silenced,
            silence=[(d, f"{d}|{gid}") for d in self.silence_durations]
            if status == "firing" and matchers and valid_base(am) and not silenced else [])
        card_hash = _digest(card_vars)
        firing_for = age_text((now - since).total_seconds()) if since else ""
        card = self.renderer.render_template(
            "slack/alert.j2", **card_vars, firing_for=firing_for,
            as_of=now.strftime("%H:%M UTC"))[0]
        return card, card_hash


def matchers_of(alerts: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """The labels every alert of the group has, with the same value: the group's
    matchers (Alertmanager's commonLabels over every alert seen, its groupLabels among
    them). A silence on them silences the group's alerts and nothing that differs."""
    common: dict[str, str] | None = None
    for a in alerts.values():
        labels = dict(a["labels"])
        common = labels if common is None else {
            k: v for k, v in common.items() if labels.get(k) == v}
    return common or {}


def alerts_link(base: str, matchers: Mapping[str, str]) -> str:
    """Alertmanager's page of the group's alerts (its UI filters by matchers); "" when
    the URL could not be linked safely."""
    if not base or not valid_base(base):
        return ""
    expr = "{" + ",".join(f'{k}="{_quote_value(v)}"' for k, v in sorted(matchers.items())) + "}"
    return f"{base.rstrip('/')}/#/alerts?silenced=false&inhibited=false&filter={quote(expr)}"


def _quote_value(v: str) -> str:
    return v.replace("\\", "\\\\").replace('"', '\\"')


def _merge(known: dict[str, dict[str, Any]], group: AlertGroup) -> dict[str, dict[str, Any]]:
    out = dict(known)
    for a in group.alerts:
        out[a.fingerprint] = {"status": a.status, "labels": dict(a.labels),
                              "annotations": dict(a.annotations), "startsAt": a.starts_at,
                              "endsAt": "" if a.ends_at == _NEVER else a.ends_at,
                              "generatorURL": a.generator_url}
    if len(out) > MAX_ALERTS:  # keep the firing ones, then the newest
        keep = sorted(out, key=lambda k: (out[k]["status"] != "firing", out[k]["startsAt"]))
        out = {k: out[k] for k in keep[:MAX_ALERTS]}
    return out


def _ordered(alerts: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(alerts.values(), key=lambda a: (a["status"] != "firing",
                                                  sorted(a["labels"].items())))


def _states(alerts: dict[str, dict[str, Any]]) -> dict[str, str]:
    return {k: v["status"] for k, v in alerts.items()}


def _who(a: dict[str, Any]) -> str:
    labels = a["labels"]
    obj = "/".join(x for x in (labels.get("namespace"), labels.get("pod")) if x) or \
        labels.get("node") or labels.get("Hostname") or ""
    return f"{labels.get('alertname', '?')} {obj}".strip()


def _note(renderer: Renderer, before: dict[str, dict[str, Any]],
          after: dict[str, dict[str, Any]], status: str) -> Message:
    """What changed in the group since the last message in the thread."""
    new = [_who(a) for k, a in after.items() if k not in before and a["status"] == "firing"]
    again = [_who(a) for k, a in after.items() if k in before and a["status"] == "firing"
             and before[k]["status"] != "firing"]
    gone = [_who(a) for k, a in after.items() if a["status"] == "resolved"
            and before.get(k, {}).get("status") != "resolved"]
    parts = []
    if new:
        parts.append(f"{len(new)} new firing: " + ", ".join(new[:10]))
    if again:
        parts.append(f"{len(again)} firing again: " + ", ".join(again[:10]))
    if gone:
        parts.append(f"{len(gone)} resolved: " + ", ".join(gone[:10]))
    if status == "resolved":
        parts.append("every alert of the group is resolved")
    text = "; ".join(parts) or "the group changed"
    return renderer.render_template("slack/thread_note.j2", text=text)[0]
