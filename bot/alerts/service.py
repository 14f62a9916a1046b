"""Wiring: the alert receiver of a running SlackBot (``gpubot serve``).

Enabled when ``GPUBOT_ALERT_TOKEN`` is set; cards go to ``GPUBOT_ALERT_CHANNEL`` unless a
route in ``GPUBOT_ALERT_ROUTES`` matches. The groupKey -> card map lives in the store:
``GPUBOT_STORE=sqlite`` (a file, ``GPUBOT_STORE_PATH``) or ``kubernetes`` (ConfigMaps in
``GPUBOT_STORE_NAMESPACE``, shared by replicas). With approvers (``GPUBOT_APPROVERS``) the
cards offer Silence (``silences.py``), under the actions' rules and in their audit trail.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from prometheus_client import Counter, Gauge

from bot.actions.requests import Policy
from bot.alerts.notifier import AlertNotifier
from bot.alerts.receiver import AlertReceiver
from bot.alerts.routing import RouteError, parse_routes
from bot.alerts.silences import DURATIONS, SILENCE, SILENCE_APPROVE, SILENCE_DENY, Silences
from bot.alerts.threads import AlertThreads
from bot.slack.approvals import GroupMembers
from bot.slack.config import ConfigError, Settings
from bot.slack.guards import Read
from bot.slack.threads import ChannelDiagnoses, Pacer, paced_port
from bot.store import Store, StoreError, api_client_of, open_configured

if TYPE_CHECKING:
    from bot.slack.app import SlackBot

log = logging.getLogger("gpubot.alerts")


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
    # The channel map holds for alerts too: no namespace's data in a channel that may not
    # query it (the card itself carries only the alert's own labels).
    channels = ChannelDiagnoses(settings, bot.policy, bot.diagnoses, bot.renderer,
                                lambda: bot.view.source, "alertmanager")
    silences = _open_silences(bot, settings, store)
    threads = AlertThreads(store, paced_port(bot.poster, Pacer(pace)), bot.renderer,
                           channels.diagnose, channels.render,
                           alertmanager_url=settings.alertmanager_url,
                           silence_durations=tuple(DURATIONS) if silences else (),
                           cluster_label=settings.alert_cluster_label
                           if bot.fleet.named else None)
    if silences is not None:
        silences.on_silenced = threads.silenced
    notifier = AlertNotifier(threads.handle, max_groups=max_groups, workers=workers,
                             key_of=threads.key_of)
    registry = bot.metrics.registry
    webhooks = Counter("gpubot_alert_webhooks", "Alertmanager webhooks, by outcome.",
                       ("outcome",), registry=registry)
    Gauge("gpubot_alert_groups_queued", "Alert groups waiting for Slack.",
          registry=registry).set_function(lambda: notifier.queued)

    def close() -> None:
        if silences is not None:
            silences.close()
        if owned:
            store.close()

    return AlertReceiver(notifier, settings.alert_token, settings.alert_channel, routes,
                         on_close=close,
                         count=lambda outcome: webhooks.labels(outcome=outcome).inc())


def _open_silences(bot: SlackBot, settings: Settings, store: Store) -> Silences | None:
    """The cards' Silence menu and its approvals, listening on the bot's Bolt app; None
    without approvers (a silence, like an action, needs one)."""
    if not settings.approvers:
        return None
    approvals = getattr(bot, "approvals", None)
    members = approvals.members if approvals is not None else GroupMembers(bot.poster.call)
    policy = Policy(tuple(settings.approvers), settings.allow_self_approval,
                    settings.approval_ttl, settings.verify_timeout)
    silences = Silences(store, policy, bot.poster, bot.metrics, members,
                        alertmanager_url=settings.alertmanager_url,
                        alertmanager_token=settings.alertmanager_token)
    bot.app.action(SILENCE, middleware=[Read(silences.read_select),
                                        bot.rate_limit])(silences.on_select)
    bot.app.action(SILENCE_APPROVE)(silences.on_approve)  # the rules are checked when clicked
    bot.app.action(SILENCE_DENY)(silences.on_deny)
    silences.start()  # a stopped bot's half-done silences
    return silences
