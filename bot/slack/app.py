"""The bot: the Bolt app with every listener and the guards in front of each, and the
parts they share; readiness and shutdown.

    bot = SlackBot(settings, view)          # view: a ClusterView (snapshot or live),
                                            # or a bot.fleet.Fleet of several clusters
    bot.app                                 # the slack_bolt.App, for an adapter
    bot.connect_socket_mode()               # Socket Mode (HTTP mode: serve bot.app)

Who does what (each module says more):

    listeners.py   /gpu COMMAND and the card's Re-check; action buttons while actions are off
    mentions.py    @gpubot COMMAND (app_mention), onto the slash command's path
    approvals.py   /gpu cordon|uncordon|restart-plugin|audit, a finding's action button,
                   Approve / Deny
    guards.py      what runs in front of the listeners (``_build_app`` says which)
    diagnoses.py   a guarded command diagnosed in the pool and answered with a card
    poster.py      every call to Slack's Web API and to response_url
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from slack_bolt import App
from slack_bolt.logger.messages import warning_client_prioritized_and_token_skipped
from slack_sdk import WebClient

from bot.fleet import Fleet
from bot.slack.access import AccessPolicy, RateLimiter
from bot.slack.approvals import APPROVE, DENY, Approvals, ParseAction, action_command
from bot.slack.approvals import HELP as APPROVAL_HELP
from bot.slack.blocks import Renderer
from bot.slack.clusters import ChooseCluster, Guards
from bot.slack.config import Settings
from bot.slack.dedupe import Dedupe
from bot.slack.diagnoses import Diagnoses
from bot.slack.guards import (
    ChannelAccess,
    CommandSize,
    DropRepeats,
    ParseCommand,
    RateLimit,
    Read,
)
from bot.slack.listeners import Listeners
from bot.slack.mentions import ActionsNeedTheSlashCommand, Mentions
from bot.slack.metrics import Metrics
from bot.slack.pool import DiagnosisPool
from bot.slack.poster import Poster, make_client
from bot.slack.sentinel import SentinelStatus
from handlers.runtime.source import MetricsSource
from handlers.view import ClusterView

if TYPE_CHECKING:
    from bot.sentinel.service import Sentinel

log = logging.getLogger("gpubot.slack")

RECHECK = "gpubot_recheck"
ACTION = re.compile(r"^gpubot_action_\d+$")


class SlackBot:
    def __init__(
        self,
        settings: Settings,
        view: ClusterView | Fleet,
        *,
        metrics: Metrics | None = None,
        client: WebClient | None = None,
        renderer: Renderer | None = None,
        cluster_probe: Callable[[], bool] | None = None,
        clock: Callable[[], float] = time.monotonic,
        approvals: Approvals | None = None,
    ) -> None:
        self.settings = settings
        self.approvals = approvals  # actions behind an approval (bot/slack/approvals.py)
        # The clusters it reads (bot/fleet); ``view`` is the first's: approvals, the store,
        # the sentinel and the digest read it.
        self.fleet = view if isinstance(view, Fleet) else Fleet.single(view)
        default = self.fleet.default.view
        assert default is not None, "the first cluster of a fleet must be open"
        self.view: ClusterView = default
        self.metrics = metrics or Metrics()
        self.renderer = renderer or Renderer(runbooks=settings.runbooks())
        self.cluster_probe = cluster_probe
        self._clock = clock
        # Follow-ups that must not hold up an ack (ephemeral notes, mentions, approvals).
        self.io = ThreadPoolExecutor(4, thread_name_prefix="gpubot-slack-io")
        # Bolt's pool, for anything it runs asynchronously (lazy listeners: none today).
        self.listener_executor = ThreadPoolExecutor(4, thread_name_prefix="gpubot-listener")
        self.poster = Poster(client or make_client(settings, self.metrics), self.metrics,
                             settings.slack_retries, self.io)
        self.pool = DiagnosisPool(settings.workers, settings.queue_size,
                                  max_stuck=settings.max_stuck)
        self.metrics.watch_pool(lambda: self.pool.queued, lambda: self.pool.running,
                                lambda: self.pool.stuck)
        self.metrics.watch_cluster(self.view)
        self.policy = AccessPolicy(settings.channel_namespaces,
                                   restrict_cluster_commands=settings.restrict_cluster_commands,
                                   clusters=self.fleet.names if self.fleet.named else ())
        self.diagnoses = Diagnoses(settings, self.fleet, self.metrics, self.poster, self.renderer,
                                   self.pool, self.policy, clock=clock,
                                   extra_help=APPROVAL_HELP if approvals is not None else ())
        self.diagnoses.sentinel_status = SentinelStatus(
            settings, self.policy, self.renderer, self.poster, self.io,
            lambda: self.sentinels,
            unopened=lambda: {h.name: h.error or "not opened" for h in self.fleet
                              if h.view is None} if self.sentinels else {}).message
        self.metrics.watch_sentinel(lambda: self.sentinels)
        # One of each guard: the rate limit counts a user's commands whatever path they took.
        self.rate_limit = RateLimit(RateLimiter(settings.rate_limit), self.metrics)
        self.command_size = CommandSize(self.metrics)
        self.parse = ParseCommand(self.metrics)
        self.access = ChannelAccess(self.policy, self.metrics)
        self.choose = ChooseCluster(self.fleet, getattr(settings, "channel_clusters", None),
                                    self.metrics)
        self.listeners = Listeners(self.diagnoses, self.poster, self.metrics,
                                   slash=settings.command, clock=clock)
        self.mentions = Mentions(self.poster, self.io, self.policy,
                                 Guards(self.choose, self.access),
                                 self.diagnoses.answer, clock=clock)
        if approvals is not None:
            approvals.attach(self.poster, self.metrics, settings.command)
        self.socket_handler: Any = None
        self.alerts: Any = None  # bot.alerts.receiver.AlertReceiver (POST /alertmanager)
        # The sentinels' loops (bot/sentinel), when gpubot serve runs them, by cluster ("" for
        # the one cluster): their watchers, books and ticks are what /gpu sentinel and
        # /metrics read.
        self.sentinels: dict[str, Sentinel] = {}
        self._auth: tuple[float, bool] | None = None
        self._cluster: tuple[float, bool] | None = None
        self.app = self._build_app()

    @property
    def prometheus(self) -> MetricsSource | None:
        """Where the metric-reading commands read (``gpubot serve`` sets it if configured)."""
        return self.diagnoses.prometheus

    @prometheus.setter
    def prometheus(self, source: MetricsSource | None) -> None:
        self.diagnoses.prometheus = source

    @property
    def sentinel(self) -> Sentinel | None:
        """The first cluster's sentinel (the only one's without ``clusters``), or None."""
        return next(iter(self.sentinels.values()), None)

    @sentinel.setter
    def sentinel(self, sentinel: Sentinel | None) -> None:
        self.sentinels = {"": sentinel} if sentinel is not None else {}

    # -- wiring -----------------------------------------------------------------------------

    def _build_app(self) -> App:
        s = self.settings
        http = s.mode == "http"
        app = App(
            client=self.poster.client,
            signing_secret=s.signing_secret or "socket-mode-has-no-signing-secret",
            token_verification_enabled=False,  # auth.test runs in check_slack(), not here
            request_verification_enabled=http,
            # Our listeners only check, queue and ack (milliseconds; the diagnosis runs in
            # self.pool), so Bolt runs them in the request's own thread and answers when they
            # return: no hop through Bolt's 5-thread listener pool, no 10 ms ack polling.
            process_before_response=True,
            listener_executor=self.listener_executor,
            logger=_bolt_logger(),
        )
        app.middleware(DropRepeats(Dedupe(s.dedupe_ttl), self.metrics))
        on = self.listeners
        slash = Read(on.read_command)
        # /gpu cordon|uncordon|restart-plugin|audit first: the diagnosis listener takes the rest.
        if self.approvals is None:
            app.command(s.command, matchers=[action_command])(on.on_action_command_off)
            app.action(ACTION)(on.on_action_off)
        else:
            a = self.approvals
            # Action requests never counted channel refusals in gpubot_commands_total.
            node_level = ChannelAccess(self.policy, self.metrics, count_refusals=False)
            app.command(s.command, matchers=[action_command], middleware=[
                slash, ParseAction(), self.rate_limit, node_level])(a.on_command)
            app.action(ACTION, middleware=[Read(a.read_finding), node_level,
                                           self.rate_limit])(a.on_finding)
            app.action(APPROVE)(a.on_approve)  # the rules are checked when clicked
            app.action(DENY)(a.on_deny)
        # Rate limit before parsing: parsing is the cost.
        app.command(s.command, middleware=[
            slash, self.rate_limit, self.command_size, self.parse, self.choose,
            self.access])(on.on_command)
        app.event("app_mention", middleware=[
            Read(self.mentions.read), self.rate_limit, self.command_size,
            ActionsNeedTheSlashCommand(s.command), self.parse])(self.mentions.on_mention)
        app.action(RECHECK, middleware=[Read(on.read_recheck), self.rate_limit,
                                        self.choose, self.access])(on.on_recheck)
        app.error(on.on_error)
        return app

    def connect_socket_mode(self) -> None:
        """Open the Socket Mode connection (returns once connected, keeps it up after)."""
        from slack_bolt.adapter.socket_mode import SocketModeHandler

        self.socket_handler = SocketModeHandler(self.app, app_token=self.settings.app_token,
                                                logger=logging.getLogger("gpubot.slack.socket"))
        self.socket_handler.connect()

    def close(self, timeout: float = 10.0) -> None:
        if self.socket_handler is not None:
            try:
                self.socket_handler.close()
            except Exception:  # closing a dead socket must not stop the shutdown
                log.debug("closing Socket Mode", exc_info=True)
        if self.alerts is not None:
            self.alerts.close(timeout)
        self.pool.shutdown(timeout)
        if self.approvals is not None:
            self.approvals.close()
        close_metrics = getattr(self.prometheus, "close", None)
        if close_metrics is not None:
            close_metrics()
        self.io.shutdown(wait=True)
        self.listener_executor.shutdown(wait=False)

    # -- readiness --------------------------------------------------------------------------

    def check_slack(self, max_age: float = 60.0) -> bool:
        """Socket Mode: connected. HTTP mode: auth.test answered ok (cached ``max_age``)."""
        if self.settings.mode == "socket":
            ok = bool(self.socket_handler is not None and self.socket_handler.client.is_connected())
        else:
            now = self._clock()
            if self._auth is None or now - self._auth[0] > max_age:
                self._auth = (now, self.poster.auth_test())
            ok = self._auth[1]
        self.metrics.slack_connected.set(1 if ok else 0)
        return ok

    def check_cluster(self, max_age: float = 10.0) -> bool:
        if self.cluster_probe is None and self.fleet.named:
            ok = self.fleet.ready()
        elif self.cluster_probe is None:
            ok = True
        else:
            now = self._clock()
            if self._cluster is None or now - self._cluster[0] > max_age:
                try:
                    self._cluster = (now, bool(self.cluster_probe()))
                except Exception:
                    log.warning("cluster probe failed", exc_info=True)
                    self._cluster = (now, False)
            ok = self._cluster[1]
        self.metrics.cluster_reachable.set(1 if ok else 0)
        return ok


class _KnownNoise(logging.Filter):
    """Bolt reads SLACK_BOT_TOKEN from the environment even when given a ``client``
    (slack_bolt/app/app.py: ``token = token or os.environ.get(...)``), then warns at every
    start that the token is unused. It is the client's own token: nothing to act on."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != warning_client_prioritized_and_token_skipped()


def _bolt_logger() -> logging.Logger:
    logger = logging.getLogger("gpubot.slack.bolt")
    if not any(isinstance(f, _KnownNoise) for f in logger.filters):
        logger.addFilter(_KnownNoise())
    return logger
