"""``/gpu sentinel``: the incidents the bot opened on its own, and the detectors' settings, as
the asking channel may see them.

It reads what the sentinel keeps in memory (``Sentinel.open_now``, the store's open incidents
as it last read them, ``interval`` seconds ago at most, and its watcher): the answer needs no
store or Slack call, so it goes with the command's acknowledgement, as help does. Channel
scope, as for commands: an incident about workloads is shown where the channel may query
every namespace it names; one about nodes where cluster commands may run. Routes (they name
namespaces) only where every namespace may be queried.

Several clusters (``gpubot serve`` with ``clusters``): one sentinel per cluster watched;
each incident names its cluster, and each cluster's line says whether its API server
answers.

A link to an incident's thread needs the workspace's address, which Slack gives in auth.test:
asked once, off the listener thread, the first time a card would be linked (HTTP mode's
readiness check asks it anyway); until then the answer names the card's channel.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Executor
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from markupsafe import Markup

from bot.slack.access import AccessPolicy
from bot.slack.blocks import Renderer
from bot.slack.config import ENV, Settings
from bot.slack.poster import Poster
from bot.slack.request import Request
from handlers.sentinel.detectors import REGISTRY
from handlers.timefmt import span_text

if TYPE_CHECKING:
    from bot.sentinel.incidents import Incident
    from bot.sentinel.service import Sentinel

MAX_SHOWN = 20
_CHANNEL_ID = re.compile(r"^[CG][A-Z0-9]{2,}$")


def off_reason(settings: Settings) -> str:
    """Why ``gpubot serve`` runs no sentinel, and how to turn it on (bot/sentinel/wiring.py
    says the same in its log)."""
    if not settings.sentinel:
        return f"it is turned off ({ENV['sentinel']}=false): set it to true and restart the bot"
    if settings.snapshot:
        return ("the bot reads a snapshot: the sentinel watches a live cluster (serve with "
                "--kubeconfig/--context, or in the cluster)")
    if not settings.watch:
        return (f"the watch cache is off ({ENV['watch']}=false): the sentinel reads the "
                "cluster through it; set it to true and restart the bot")
    if not (settings.sentinel_channel or settings.alert_channel or settings.sentinel_routes):
        return (f"its incident cards have no channel: set {ENV['sentinel_channel']} (or "
                f"{ENV['alert_channel']}, or {ENV['sentinel_routes']}) and restart the bot")
    return "it could not start: the bot's log says why (look for \"sentinel off\")"


def _stamp(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M UTC")


def _hours(h: float) -> str:
    return f"{h:.2f}" if h < 10 else f"{h:.1f}"


def _channel(channel: str | None) -> Markup | str:
    """A channel ID as Slack's mention (a link to it), a name as written."""
    if channel and _CHANNEL_ID.match(channel):
        return Markup(f"<#{channel}>")
    return channel or ""


class SentinelStatus:
    """``sentinels()``: the running sentinels by cluster (``""``: the one cluster); several
    clusters: each incident names its cluster, and each cluster says how its sentinel is
    (watching, waiting for its cache, or its API server not answering)."""

    def __init__(self, settings: Settings, policy: AccessPolicy, renderer: Renderer,
                 poster: Poster, io: Executor,
                 sentinels: Callable[[], Mapping[str, Sentinel]], *,
                 unopened: Callable[[], Mapping[str, str]] = dict,
                 clock: Callable[[], float] = time.time) -> None:
        self.settings = settings
        self.policy = policy
        self.renderer = renderer
        self.poster = poster
        self.io = io
        self.sentinels = sentinels
        self.unopened = unopened  # clusters that could not be opened -> why: no sentinel
        self.clock = clock
        self._asked = threading.Event()  # auth.test asked for the workspace's address

    def message(self, req: Request) -> dict[str, Any]:
        """The answer to ``/gpu sentinel`` in ``req``'s channel (ephemeral)."""
        sentinels = dict(self.sentinels())
        s = next(iter(sentinels.values()), None)  # the detectors' settings are the same
        allowed = self.policy.allowed(req.channel, req.channel_name)
        ctx: dict[str, Any] = {"off": None, "starting": False, "incidents": [], "hidden": 0,
                               "beyond": 0, "as_of": "", "leading": False,
                               "clusters": [self._state(name, x) for name, x in sentinels.items()
                                            if name] + [
                                   {"name": name, "state": f"not opened ({why}): nothing "
                                    "watches it until gpubot restarts and can open it"}
                                   for name, why in self.unopened().items()]}
        read = [x for x in sentinels.values() if x.open_read is not None]
        if s is None:
            ctx["off"] = off_reason(self.settings)
        elif not read:
            ctx["starting"] = True
        else:
            now = self.clock()
            every = [(name, i) for name, x in sentinels.items() for i in x.open_now]
            shown = [(name, i) for name, i in every if self._visible(i, req, name or None)]
            shown.sort(key=lambda ni: (-ni[1].gpus, ni[1].since))
            ctx.update(incidents=[self._row(i, now, name) for name, i in shown[:MAX_SHOWN]],
                       beyond=max(len(shown) - MAX_SHOWN, 0),
                       hidden=len(every) - len(shown),
                       as_of=_stamp(min(float(x.open_read or 0) for x in read)),
                       leading=any(x.leading for x in read))
            if any(i.posted.get("ts") for _, i in shown) and self.poster.workspace is None:
                self._learn_workspace()
        msg = self.renderer.render_template(
            "slack/sentinel.j2", **ctx, detectors=self._detectors(s),
            channel=_channel(self.settings.sentinel_channel or self.settings.alert_channel),
            routes=[r for r in (self.settings.sentinel_routes or "").split(";") if r.strip()]
            if allowed is None else None,
            interval=span_text(self.settings.sentinel_interval),
            quiet_for=span_text(self.settings.quiet_for))[0]
        return {"text": msg.text, "blocks": msg.blocks, "response_type": "ephemeral"}

    def _state(self, name: str, s: Sentinel) -> dict[str, str]:
        """How one cluster's sentinel is: its API server not answering (its incidents stay
        as they were: nothing is resolved unseen), not synced yet, or watching."""
        why = s.unreadable()
        if why is not None:
            state = f"not answering ({why}): its incidents stay as they were until it answers"
        elif s.open_read is None:
            state = "waiting for its watch cache to sync"
        else:
            state = f"watching, as of {_stamp(s.open_read)}"
        return {"name": name, "state": state}

    def _visible(self, inc: Incident, req: Request, cluster: str | None) -> bool:
        """Whether the channel may see ``inc``: the namespaces it names, in its cluster."""
        allowed = self.policy.allowed(req.channel, req.channel_name, cluster)
        nodes_ok = allowed is None or (bool(allowed) and not self.policy.restrict_cluster_commands)
        if allowed is None:
            return True
        namespaces = inc.namespaces
        return set(namespaces) <= allowed if namespaces else nodes_ok

    def _row(self, inc: Incident, now: float, cluster: str = "") -> dict[str, Any]:
        posted = inc.posted or {}
        channel, ts = posted.get("channel"), posted.get("ts")
        url = None
        if channel and ts and self.poster.workspace:
            # Slack's permalink: the workspace's address, the channel, p + the ts's digits.
            url = f"{self.poster.workspace}archives/{channel}/p{str(ts).replace('.', '')}"
        return {"title": inc.title, "group": inc.group, "detector": inc.detector,
                "cluster": cluster,
                "gpus": f"{inc.gpus:g}", "gpu_hours": _hours(inc.gpu_hours(now)),
                "since": _stamp(inc.since), "lasted": span_text(inc.duration(now)),
                "members": inc.members_total, "reopened": inc.reopened, "url": url,
                "channel": _channel(str(channel)) if channel and ts else None}

    def _detectors(self, s: Sentinel | None) -> list[dict[str, Any]]:
        polling = s is not None and bool(s.watcher.polled)
        error = s.watcher.metrics_error if s is not None else None
        out = []
        for d in REGISTRY.values():
            limit = (s.thresholds.get(d.setting) if s is not None else None) or float(
                getattr(self.settings, d.setting, d.default))
            if not d.needs_metrics:
                state = "on" if s is not None else "off"
            elif not self.settings.prometheus_url:
                state = f"off: no Prometheus ({ENV['prometheus_url']})"
            elif not polling:
                state = "off"
            else:
                state = f"on, every {span_text(s.poll_every)}" if s is not None else "on"
                if error:
                    state += f"; Prometheus did not answer: {error}"
            out.append({"name": d.name, "title": d.title, "setting": d.setting,
                        "threshold": span_text(limit), "state": state})
        return out

    def _learn_workspace(self) -> None:
        if self._asked.is_set():
            return
        self._asked.set()
        with contextlib.suppress(RuntimeError):  # shutting down
            self.io.submit(self.poster.auth_test)
