"""``gpubot serve``: the Slack bot, on a snapshot or a live cluster.

    gpubot serve --snapshot examples/plugin-crashloop-cuda-mismatch       # Socket Mode
    gpubot serve --kubeconfig ~/.kube/config --context prod --mode http --port 3000

Settings: flags > environment > ``--config`` YAML file > defaults (``bot.slack.config``).
Secrets only from the environment: SLACK_BOT_TOKEN, SLACK_APP_TOKEN (Socket Mode),
SLACK_SIGNING_SECRET (HTTP mode). SIGTERM/SIGINT: stop taking requests, let running
diagnoses answer, exit 0.

Exit codes: 0 stopped cleanly, 1 the cluster or snapshot cannot be opened, 2 bad settings.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING, TextIO

from handlers.errors import GpubotError
from handlers.view import ClusterView, ViewError

if TYPE_CHECKING:
    from bot.digest.slack import DigestRunning
    from bot.live.cache import WatchCache
    from bot.sentinel.wiring import Running
    from bot.slack.app import SlackBot
    from bot.slack.config import Settings
    from bot.slack.server import BotServer
    from handlers.runtime.source import MetricsSource

EXIT_OK, EXIT_NOT_FOUND, EXIT_USAGE = 0, 1, 2

log = logging.getLogger("gpubot.serve")

DESCRIPTION = """\
Run the Slack bot: /gpu commands, @mentions, Alertmanager's alerts (POST /alertmanager) and
the sentinel's incidents, answered from a live cluster or a snapshot. Settings: flags, then
the environment (GPUBOT_*), then --config FILE, then defaults (docs/configuration.md);
tokens only from the environment: SLACK_BOT_TOKEN, and SLACK_APP_TOKEN (Socket Mode) or
SLACK_SIGNING_SECRET (HTTP mode). /healthz, /readyz and /metrics are on --host:--port.
Stops on SIGTERM or SIGINT once the running diagnoses have answered.
"""
EXAMPLES = """examples:
  gpubot serve --snapshot examples/plugin-crashloop-cuda-mismatch   try it on an example
  gpubot serve --kubeconfig ~/.kube/config --context prod            Socket Mode, a cluster
  gpubot serve --mode http --host 0.0.0.0 --port 8080                Slack POSTs to /slack/events
  gpubot serve --config gpubot.yaml --log-level DEBUG
  in a pod: gpubot serve                     the service account, settings from the env
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The ``serve`` subcommand's flags (bot/cli.py adds the subparser)."""
    src = p.add_mutually_exclusive_group()
    src.add_argument("--snapshot", metavar="PATH",
                     help="serve a snapshot (files or a cluster-info dump) instead of a cluster")
    src.add_argument("--kubeconfig", metavar="FILE",
                     help="kubeconfig of the live cluster (default: $KUBECONFIG, "
                          "~/.kube/config, or the in-cluster service account)")
    p.add_argument("--context", metavar="CTX", help="kubeconfig context (default: current)")
    p.add_argument("--mode", choices=("socket", "http"),
                   help="socket: Socket Mode, no public URL (default); http: Slack POSTs "
                        "to /slack/events")
    p.add_argument("--host", metavar="H", help="address for /healthz /readyz /metrics "
                                               "(and /slack/events) (default 127.0.0.1)")
    p.add_argument("--port", metavar="N", type=int, help="port (default 8080)")
    p.add_argument("--config", metavar="FILE",
                   help="YAML settings file (every setting also has an environment variable)")
    p.add_argument("--log-level", metavar="LEVEL", help="DEBUG, INFO (default), WARNING")


def _settings(args: argparse.Namespace, env: dict[str, str]) -> Settings:
    from bot.slack.config import load_settings

    overrides = {k: getattr(args, k, None) for k in (
        "snapshot", "kubeconfig", "context", "mode", "host", "port", "log_level")}
    return load_settings(getattr(args, "config", None), env, overrides).validate()


def open_cluster(settings: Settings, *, settle: bool = False
                 ) -> tuple[ClusterView, Callable[[], bool] | None, Callable[[], None]]:
    """(the view the bot reads, a readiness probe or None, close); ``settle``: see
    ``_warm_when_synced``."""
    from bot.slack.reads import SharedReads
    if settings.snapshot:
        from bot.snapshot import load_snapshot

        snap = load_snapshot(settings.snapshot)
        return snap, None, lambda: None
    from bot.live import open_live_view

    live = open_live_view(settings.kubeconfig, settings.context,
                          timeout=settings.kube_timeout, callers=settings.workers)
    if settings.watch:
        cache = live.watch(namespaces={"ConfigMap": settings.operator_namespace})
        threading.Thread(target=_warm_when_synced, args=(live, cache, settle), daemon=True,
                         name="gpubot-warm").start()

    def probe() -> bool:
        if live.cache is not None and not live.cache.settled():
            return False  # ready once diagnoses read from the cache
        try:
            live.get("Namespace", "default")
        except ViewError as err:
            # Forbidden still proves the API server answers; unreachable or rejected does not.
            return type(err).__name__ not in ("ApiUnreachable", "ApiUnauthorized",
                                              "KubeconfigError")
        return True

    def close() -> None:
        if live.cache is not None:
            live.cache.stop()
        live.close()

    return SharedReads(live, ttl=settings.coalesce_ttl), probe, close


def _warm_when_synced(view: ClusterView, cache: WatchCache, settle: bool) -> None:
    """Once every kind is synced, build what warm diagnoses remember (``handlers.warm``);
    ``settle``: then set the collector's policy for a big cache (``settle_gc``)."""
    from bot.live.cache import settle_gc
    from handlers.view import Reader
    from handlers.warm import warm

    while not cache.wait_synced(1.0):
        if cache.stopped:
            return
    started = time.monotonic()
    try:
        warmed = warm(Reader(view))
    except Exception:  # a warm-up that fails costs speed, never the bot
        log.exception("warming the diagnosis memos failed")
        return
    if settle:
        settle_gc()
    log.info("watch cache synced; %d GPU nodes and %d kinds of pending pod warmed in %.1f s",
             warmed.gpu_nodes, len(warmed.pending), time.monotonic() - started)


def _metrics_and_alerts(bot: SlackBot, settings: Settings) -> None:
    """Prometheus for the diagnoses and POST /alertmanager, when configured."""
    from bot.alerts.service import open_alerts
    from bot.metrics.prometheus import open_prometheus
    from bot.sentinel.wiring import sentinel_routes
    from handlers.runtime.checks import duration_seconds
    from handlers.runtime.source import MetricsError

    if duration_seconds(settings.idle_window) is None:
        raise GpubotError(f"GPUBOT_IDLE_WINDOW must be a PromQL duration such as 1h or 30m, "
                          f"not {settings.idle_window!r}")
    from bot.fleet.opening import open_metrics

    def prometheus(url: str | None) -> MetricsSource | None:
        return open_prometheus(
            url, {"GPUBOT_PROMETHEUS_TOKEN": settings.prometheus_token or "",
                  "GPUBOT_PROMETHEUS_PASSWORD": settings.prometheus_password or ""},
            timeout=settings.prometheus_timeout, username=settings.prometheus_user,
            ca_file=settings.prometheus_ca_file, insecure=settings.prometheus_insecure,
            idle_window=settings.idle_window, idle_threshold=settings.idle_threshold)

    try:
        if settings.clusters:  # each cluster its own Prometheus (bot/fleet/opening.py)
            open_metrics(bot.fleet, settings, prometheus)
        else:
            bot.prometheus = prometheus(settings.prometheus_url)
    except MetricsError as e:
        raise GpubotError(str(e)) from None
    bot.alerts = open_alerts(bot, settings)
    sentinel_routes(settings)  # checked now: the sentinel itself starts once serving


def _sentinel(bot: SlackBot, settings: Settings) -> Running | None:
    """The sentinel's thread, when it can run (``bot.sentinel`` then reads it). A failure to
    start it is logged: the bot serves without it."""
    from bot.sentinel.wiring import open_sentinel

    try:
        running = open_sentinel(bot, settings)
    except Exception:
        log.exception("sentinel off: it could not start")
        return None
    if running is not None:
        bot.sentinels = running.sentinels  # one per cluster watched
    return running


def _digest(bot: SlackBot, settings: Settings, running: Running | None
            ) -> DigestRunning | None:
    """The daily digest's thread when ``digest_time`` is set (it reads the sentinel's
    incidents); a failure to start it is logged: the bot serves without it."""
    from bot.digest.slack import start_digest

    try:
        return start_digest(bot, settings, running.sentinel if running else None)
    except Exception:
        log.exception("digest off: it could not start")
        return None


def _log_startup(bot: SlackBot, settings: Settings, source: str) -> None:
    """The operator log's first records: what runs where, and what every channel may see.
    The team comes from auth.test (its failure is logged by the poster, and said here)."""
    from bot import oplog
    from bot.version import version

    bot.poster.auth_test()
    team = bot.poster.team or "unknown (auth.test failed)"
    store = settings.store if settings.store != "sqlite" else (
        f"sqlite {settings.store_path or '~/.local/state/gpubot/state.db'}")
    if settings.store == "kubernetes":
        store += f" in {settings.store_namespace or 'its own namespace'}"
    fields = {"event": "startup", "version": version(), "team": team,
              "team_id": bot.poster.team_id or "", "mode": settings.mode, "cluster": source,
              "store": store, "actions": bot.approvals is not None,
              "alerts": bot.alerts is not None}
    oplog.log.info("gpubot %s serving %s in %s mode for Slack team %s; store: %s",
                   fields["version"], source, settings.mode, team, store, extra=fields)
    if settings.channel_namespaces is None:
        oplog.log.warning(
            "no channel map (GPUBOT_CHANNEL_NAMESPACES): every channel the bot is in may "
            "query every namespace", extra={"event": "channel_scope", "scope": "all"})


def _logging(level: str, secrets: list[str], log_format: str = "text") -> None:
    from bot.slack import redact

    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    if log_format == "json":
        from bot.logformat import JsonFormatter

        for handler in logging.getLogger().handlers:
            handler.setFormatter(JsonFormatter())
    redact.install(secrets)


def serve(args: argparse.Namespace, *, env: dict[str, str] | None = None,
          err: TextIO | None = None, ready: Callable[[BotServer], None] | None = None,
          stop: threading.Event | None = None, whole_process: bool = False) -> int:
    """Run until SIGTERM/SIGINT (or ``stop`` is set). ``ready(server)`` is called once
    serving (tests use it to learn the port). ``whole_process``: the bot is the program
    (``gpubot serve``), so it may set process-wide policy (the collector's, once the watch
    cache is warm: ``bot.live.cache.settle_gc``); tests that serve in a thread do not."""
    err = err or sys.stderr
    from bot.slack.app import SlackBot
    from bot.slack.config import ConfigError, unknown_env
    from bot.slack.server import BotServer

    env = dict(os.environ) if env is None else env
    try:
        settings = _settings(args, env)
    except ConfigError as e:
        err.write(f"gpubot: {e}\n")
        return EXIT_USAGE
    _logging(settings.log_level, settings.secrets(), settings.log_format)
    from bot.fleet.opening import open_fleet

    try:
        fleet = open_fleet(settings, lambda one: open_cluster(one, settle=whole_process))
    except ViewError as e:
        err.write(f"gpubot: {e}\n")
        return EXIT_NOT_FOUND
    view, close_view = fleet.default.view, fleet.close
    assert view is not None  # the first cluster opens, or open_fleet raises
    probe = None if fleet.named else fleet.default.probe
    from bot.slack.approvals import open_approvals
    from bot.store import StoreError

    try:
        approvals = open_approvals(settings, view)
    except StoreError as e:  # diagnoses do not need the store: serve them, say what is off
        log.error("actions are off: %s", e)
        err.write(f"gpubot: actions are off: {e}\n")
        approvals = None
    bot = SlackBot(settings, fleet, cluster_probe=probe, approvals=approvals)
    try:
        _metrics_and_alerts(bot, settings)
    except GpubotError as e:
        err.write(f"gpubot: {e}\n")
        bot.close(0)
        close_view()
        return EXIT_USAGE
    try:
        server = BotServer(bot)
    except OSError as e:
        err.write(f"gpubot: cannot listen on {settings.host}:{settings.port}: {e.strerror}\n")
        bot.close(0)
        close_view()
        return EXIT_USAGE
    stop = stop or threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        log.info("signal %s: stopping", signal.Signals(signum).name)
        stop.set()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
    try:
        server.start()
    except Exception as e:  # Socket Mode could not connect (bad app token, no network)
        log.error("cannot start: %s", e)
        err.write(f"gpubot: cannot connect to Slack: {type(e).__name__}: {e}\n")
        server.stop(0)
        close_view()
        return EXIT_USAGE
    _log_startup(bot, settings, view.source)
    for typo in unknown_env(env):
        log.warning("%s", typo)
    running = _sentinel(bot, settings)
    digest = _digest(bot, settings, running)
    if ready is not None:
        ready(server)
    stop.wait()
    if digest is not None:
        digest.stop()
    if running is not None:
        running.stop()  # before the server: it posts through the bot's Slack client
    server.stop(timeout=max(5.0, min(settings.deadline, 30.0)))
    close_view()
    log.info("stopped")
    return EXIT_OK
