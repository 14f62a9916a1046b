"""Wiring: the alert receiver of a running SlackBot (``gpubot serve``).

Enabled when ``GPUBOT_ALERT_TOKEN`` is set; cards go to ``GPUBOT_ALERT_CHANNEL`` unless a
route in ``GPUBOT_ALERT_ROUTES`` matches. The groupKey -> card map lives in the store:
``GPUBOT_STORE=sqlite`` (a file, ``GPUBOT_STORE_PATH``) or ``kubernetes`` (ConfigMaps in
``GPUBOT_STORE_NAMESPACE``, shared by replicas).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from prometheus_client import Counter, Gauge

from bot.alerts.notifier import AlertNotifier, Pacer
from bot.alerts.receiver import AlertReceiver
from bot.alerts.routing import RouteError, parse_routes
from bot.alerts.threads import AlertThreads, SlackPort
from bot.slack.access import Refusal
from bot.slack.blocks import Message, Rendered
from bot.slack.commands import Command
from bot.slack.config import ConfigError, Settings
from bot.slack.pool import Deadline
from bot.store import Store, StoreError, api_client_of, open_configured
from handlers.errors import GpubotError
from handlers.model import Diagnosis

if TYPE_CHECKING:
    from bot.slack.app import SlackBot

log = logging.getLogger("gpubot.alerts")


class NotAllowed(GpubotError):
    """The channel's namespace map does not let it see this diagnosis."""


def _open_store(settings: Settings, view: object) -> Store:
    """The store the settings name: SQLite (a file) or Kubernetes (ConfigMaps, through the
    live view's API client: several replicas share it)."""
    try:
        return open_configured(settings, api_client_of(view))
    except (StoreError, OSError) as err:
        raise ConfigError(f"cannot open the store for alert threads ({settings.store}): "
                          f"{err}") from None


def open_alerts(bot: SlackBot, settings: Settings, *, store: Store | None = None,
                pace: float = 1.0, workers: int = 2, max_groups: int = 256
                ) -> AlertReceiver | None:
    """The receiver, or None when no alert token is set. Raises ConfigError."""
    if not settings.alert_token:
        return None
    try:
        routes = parse_routes(settings.alert_routes)
    except RouteError as err:
        raise ConfigError(str(err)) from None
    if not settings.alert_channel and not routes:
        raise ConfigError("GPUBOT_ALERT_TOKEN is set but no channel for alert cards: set "
                          "GPUBOT_ALERT_CHANNEL (or GPUBOT_ALERT_ROUTES)")
    approvals = getattr(bot, "approvals", None)
    if store is None and approvals is not None:
        store = approvals.store  # one store per bot: the approvals' when actions are on
    owned = store is None
    if store is None:
        store = _open_store(settings, bot.view)
    pacer = Pacer(pace)

    def post(channel: str, m: Message, thread_ts: str | None) -> str:
        pacer.wait(channel)
        return bot.poster.post(channel, m, thread_ts, unfurl=False)

    def update(channel: str, ts: str, m: Message) -> None:
        pacer.wait(channel)
        bot.poster.update(channel, ts, m)

    def diagnose(cmd: Command, channel: str) -> Diagnosis:
        # The channel map holds for alerts too: no namespace's data in a channel that may
        # not query it (the card itself carries only the alert's own labels).
        resolved = bot.policy.resolve(cmd, channel, "", "alertmanager")
        if isinstance(resolved, Refusal):
            raise NotAllowed(resolved.message)
        deadline = Deadline(settings.deadline)
        deadline.start()
        return bot.diagnoses.diagnose(resolved, deadline, bot.policy.allowed(channel, ""))

    def render(cmd: Command, diag: Diagnosis) -> Rendered:
        return bot.renderer.render(diag, argv=cmd.argv(), source=bot.view.source,
                                   command_prefix=settings.command)

    threads = AlertThreads(store, SlackPort(post, update), bot.renderer, diagnose, render)
    notifier = AlertNotifier(threads.handle, max_groups=max_groups, workers=workers)
    registry = bot.metrics.registry
    webhooks = Counter("gpubot_alert_webhooks", "Alertmanager webhooks, by outcome.",
                       ("outcome",), registry=registry)
    Gauge("gpubot_alert_groups_queued", "Alert groups waiting for Slack.",
          registry=registry).set_function(lambda: notifier.queued)
    return AlertReceiver(notifier, settings.alert_token, settings.alert_channel, routes,
                         on_close=store.close if owned else None,
                         count=lambda outcome: webhooks.labels(outcome=outcome).inc())
