"""Wiring: the sentinel of a running SlackBot (``gpubot serve``): one per cluster of the
fleet read live through its watch cache, each on its own thread, its cluster's view and
Prometheus; a cluster that is down holds up only its own.

On when ``sentinel`` is on (the default), the bot reads a live cluster through its watch
cache, and incident cards have a channel (``GPUBOT_SENTINEL_CHANNEL``, else
``GPUBOT_ALERT_CHANNEL``, or a route of ``GPUBOT_SENTINEL_ROUTES``). Incidents live in the
bot's store (the approvals' when actions are on); with the Kubernetes store, a Lease in the
store's namespace chooses the one replica that posts. Anything that fails while it runs (the
store, Slack, the API server) is logged and tried again on the next tick; the bot stays up.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bot.alerts.routing import Route, RouteError, parse_routes
from bot.sentinel.incidents import IncidentBook
from bot.sentinel.lease import KubeLease
from bot.sentinel.service import Always, Leader, Sentinel
from bot.sentinel.threads import ROUTE_KEYS, IncidentThreads
from bot.sentinel.watcher import Watcher
from bot.slack.blocks import Message
from bot.slack.config import ConfigError, Settings
from bot.slack.threads import ChannelDiagnoses, Pacer, SlackPort, paced_port
from bot.store import Store, StoreError, api_client_of, open_configured
from handlers.sentinel.detectors import REGISTRY

if TYPE_CHECKING:
    from bot.live.cache import WatchCache
    from bot.slack.app import SlackBot
    from handlers.runtime.source import MetricsSource
    from handlers.view import ClusterView

log = logging.getLogger("gpubot.sentinel")


@dataclass
class Running:
    """The sentinels' threads (one per watched cluster) and what they own, to stop them on
    shutdown."""

    sentinels: dict[str, Sentinel]  # cluster name ("" for the one cluster) -> its sentinel
    threads: list[threading.Thread]
    stopping: threading.Event
    lease: KubeLease | None
    store: Store | None  # closed on stop when the sentinel opened it

    @property
    def sentinel(self) -> Sentinel:
        """The first cluster's (the only one's, without ``clusters``)."""
        return next(iter(self.sentinels.values()))

    def stop(self, timeout: float = 10.0) -> None:
        self.stopping.set()
        for s in self.sentinels.values():
            s.wake()
        for t in self.threads:
            t.join(timeout)
        if self.lease is not None:
            self.lease.stop()
        if self.store is not None:
            self.store.close()


class Stopping(Exception):
    """The bot is stopping: what is left to post waits for the next start (or replica)."""


def _until(port: SlackPort, stopping: threading.Event) -> SlackPort:
    """``port`` refusing every call once ``stopping`` is set, so that a shutdown does not
    wait for a paced thread to be posted to its end."""
    def post(channel: str, m: Message, thread_ts: str | None) -> str:
        if stopping.is_set():
            raise Stopping("the bot is stopping")
        return port.post(channel, m, thread_ts)

    def update(channel: str, ts: str, m: Message) -> None:
        if stopping.is_set():
            raise Stopping("the bot is stopping")
        port.update(channel, ts, m)

    return SlackPort(post, update)


def live_cache(view: Any) -> tuple[ClusterView, WatchCache] | None:
    """(the LiveView reading from its watch cache, the cache) under the bot's view (wrappers
    hold the view they wrap as ``.view``), or None: a snapshot, or no watch cache."""
    while view is not None and not hasattr(view, "cache"):
        view = getattr(view, "view", None)
    if view is None or view.cache is None:
        return None
    return view, view.cache


def sentinel_routes(settings: Settings) -> list[Route]:
    """``GPUBOT_SENTINEL_ROUTES``, parsed. Raises ConfigError."""
    try:
        return parse_routes(settings.sentinel_routes, "GPUBOT_SENTINEL_ROUTES", ROUTE_KEYS)
    except RouteError as err:
        raise ConfigError(str(err)) from None


def thresholds(settings: Settings) -> dict[str, float]:
    return {d.setting: float(getattr(settings, d.setting, d.default))
            for d in REGISTRY.values()}


@dataclass(frozen=True)
class Watched:
    """A cluster the sentinel watches: its name ("" for the one cluster), its live view and
    watch cache, and its Prometheus."""

    name: str
    view: ClusterView
    cache: WatchCache
    metrics: MetricsSource | None


def watched_clusters(bot: SlackBot) -> list[Watched]:
    """Each cluster read live through its watch cache; the others are said in the log (a
    snapshot, no watch cache, or a cluster that could not be opened)."""
    out: list[Watched] = []
    for i, handle in enumerate(bot.fleet):
        name = handle.name if bot.fleet.named else ""
        found = live_cache(handle.view) if handle.view is not None else None
        if found is None:
            if bot.fleet.named:
                why = handle.error or "it needs a live cluster read through the watch cache"
                log.warning("sentinel: cluster %s not watched: %s", handle.name, why)
            continue
        # The first cluster's Prometheus is the bot's (a single cluster has only that one).
        metrics = handle.prometheus if handle.prometheus is not None or i else bot.prometheus
        out.append(Watched(name, found[0], found[1], metrics))
    return out


def open_sentinel(bot: SlackBot, settings: Settings, *, pace: float = 1.0,
                  note_gap: float = 120.0) -> Running | None:
    """The running sentinels, one per cluster watched live, or None when it is off or
    cannot run (said in the log). They share the store, the Lease (one replica posts for
    every cluster), Slack's pace and the channel; a cluster's incidents are its own (keyed
    by its name) and its cards name it. Raises ConfigError for routes that do not parse."""
    if not settings.sentinel:
        return None
    routes = sentinel_routes(settings)
    channel = settings.sentinel_channel or settings.alert_channel
    watched = watched_clusters(bot)
    if not watched:
        log.info("sentinel off: it needs a live cluster read through the watch cache")
        return None
    if channel is None and not routes:
        log.info("sentinel off: no channel for incident cards (GPUBOT_SENTINEL_CHANNEL, "
                 "GPUBOT_ALERT_CHANNEL or GPUBOT_SENTINEL_ROUTES)")
        return None
    approvals = getattr(bot, "approvals", None)
    store: Store | None = approvals.store if approvals is not None else None
    owned = store is None
    api_client = api_client_of(watched[0].view)
    if store is None:
        try:
            store = open_configured(settings, api_client)
        except (StoreError, OSError) as err:
            log.error("sentinel off: cannot open the store (%s): %s", settings.store, err)
            return None
    leader: Leader = Always()
    lease: KubeLease | None = None
    if settings.store == "kubernetes":
        lease = KubeLease(api_client, str(getattr(store, "namespace", "default")),
                          timeout=min(settings.kube_timeout, 5.0)).start()
        leader = lease
    limits = thresholds(settings)
    channels = ChannelDiagnoses(settings, bot.policy, bot.diagnoses, bot.renderer,
                                lambda: bot.view.source, "sentinel")
    stopping = threading.Event()
    port = _until(paced_port(bot.poster, Pacer(pace)), stopping)  # one pace for the workspace
    sentinels: dict[str, Sentinel] = {}
    threads: list[threading.Thread] = []
    for i, w in enumerate(watched):
        book = IncidentBook(store, quiet_for=settings.quiet_for, cluster=w.name,
                            legacy=i == 0 and w.name == bot.fleet.default.name)
        publisher = IncidentThreads(book, port, bot.renderer, channels, channel=channel,
                                    routes=routes, thresholds=limits, note_gap=note_gap)
        sentinel = Sentinel(Watcher(w.view, metrics=w.metrics), book, publisher, limits,
                            leader=leader, ready=w.cache.settled,
                            interval=settings.sentinel_interval,
                            unreadable=w.cache.failing)
        # The cache may have started already: the first tick once it settled scans everything.
        w.cache.listen(sentinel)
        thread = threading.Thread(target=sentinel.run, args=(stopping,), daemon=True,
                                  name=f"gpubot-sentinel{'-' + w.name if w.name else ''}")
        thread.start()
        sentinels[w.name] = sentinel
        threads.append(thread)
    log.info("sentinel on%s: incidents to %s%s, store %s, %s",
             f" for {', '.join(sentinels)}" if bot.fleet.named else "",
             channel or "routes only",
             f" and {len(routes)} route(s)" if routes else "", store,
             f"lease {lease.namespace}/{lease.name}" if lease else "one replica")
    return Running(sentinels, threads, stopping, lease, store if owned else None)
