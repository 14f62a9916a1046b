"""Settings for ``gpubot serve``: defaults < YAML ``--config`` file < environment < flags.

Every setting has an environment variable (the bot runs without a config file). Secrets
(``SLACK_BOT_TOKEN``, ``SLACK_APP_TOKEN``, ``SLACK_SIGNING_SECRET``) come only from the
environment: a config file is usually a ConfigMap, not a Secret, so a token found in one is
refused. ``repr(settings)`` never shows a secret.

    GPUBOT_CHANNEL_NAMESPACES="C012AB3CD=ml-team,research;#gpu-ops=*"

maps channels (by ID, or by name with ``#``) to the namespaces they may query (``*``: all).
With no map every channel may query every namespace.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from bot.runbook import RunbookError, Runbooks, check_base, parse_overrides, valid_base
from handlers.errors import GpubotError

if TYPE_CHECKING:
    from bot.fleet.config import ClusterConfig


class ConfigError(GpubotError):
    """A setting is missing or malformed; ``str()`` names it and its variable."""


SECRET_ENV = {
    "bot_token": "SLACK_BOT_TOKEN",
    "app_token": "SLACK_APP_TOKEN",
    "signing_secret": "SLACK_SIGNING_SECRET",
    "alert_token": "GPUBOT_ALERT_TOKEN",  # bearer token Alertmanager sends to /alertmanager
    "prometheus_token": "GPUBOT_PROMETHEUS_TOKEN",
    "prometheus_password": "GPUBOT_PROMETHEUS_PASSWORD",
    # Bearer token for Alertmanager's API (silences), sent to alertmanager_url only.
    "alertmanager_token": "GPUBOT_ALERTMANAGER_TOKEN",
}

# setting -> environment variable (secrets above are environment-only)
ENV = {
    "mode": "GPUBOT_SLACK_MODE",
    "host": "GPUBOT_HOST",
    "port": "GPUBOT_PORT",
    "api_url": "SLACK_API_URL",
    "snapshot": "GPUBOT_SNAPSHOT",
    "kubeconfig": "GPUBOT_KUBECONFIG",
    "context": "GPUBOT_CONTEXT",
    "kube_timeout": "GPUBOT_KUBE_TIMEOUT",
    "watch": "GPUBOT_WATCH",
    "operator_namespace": "GPUBOT_OPERATOR_NAMESPACE",
    "workers": "GPUBOT_WORKERS",
    "queue_size": "GPUBOT_QUEUE_SIZE",
    "deadline": "GPUBOT_DEADLINE",
    "max_stuck": "GPUBOT_MAX_STUCK",
    "http_threads": "GPUBOT_HTTP_THREADS",
    "rate_limit": "GPUBOT_RATE_LIMIT",
    "channel_namespaces": "GPUBOT_CHANNEL_NAMESPACES",
    "restrict_cluster_commands": "GPUBOT_RESTRICT_CLUSTER_COMMANDS",
    "command": "GPUBOT_SLASH_COMMAND",
    "slack_retries": "GPUBOT_SLACK_RETRIES",
    "dedupe_ttl": "GPUBOT_DEDUPE_TTL",
    "coalesce_ttl": "GPUBOT_COALESCE_TTL",
    "log_level": "GPUBOT_LOG_LEVEL",
    # approval-gated actions (bot/slack/approvals.py) and the store (bot/store)
    "approvers": "GPUBOT_APPROVERS",
    "allow_self_approval": "GPUBOT_ALLOW_SELF_APPROVAL",
    "approval_ttl": "GPUBOT_APPROVAL_TTL",
    "verify_timeout": "GPUBOT_VERIFY_TIMEOUT",
    "plugin_namespace": "GPUBOT_PLUGIN_NAMESPACE",
    "plugin_selector": "GPUBOT_PLUGIN_SELECTOR",
    "store": "GPUBOT_STORE",
    "store_path": "GPUBOT_STORE_PATH",
    "store_namespace": "GPUBOT_STORE_NAMESPACE",
    "log_format": "GPUBOT_LOG_FORMAT",
    "runbook_base_url": "GPUBOT_RUNBOOK_BASE_URL",
    "runbook_overrides": "GPUBOT_RUNBOOK_OVERRIDES",
    # Prometheus and Alertmanager (bot/metrics, bot/alerts)
    "prometheus_url": "GPUBOT_PROMETHEUS_URL",
    "prometheus_timeout": "GPUBOT_PROMETHEUS_TIMEOUT",
    "prometheus_user": "GPUBOT_PROMETHEUS_USER",
    "prometheus_ca_file": "GPUBOT_PROMETHEUS_CA_FILE",
    "prometheus_insecure": "GPUBOT_PROMETHEUS_INSECURE",
    "idle_window": "GPUBOT_IDLE_WINDOW",
    "idle_threshold": "GPUBOT_IDLE_THRESHOLD",
    "alert_channel": "GPUBOT_ALERT_CHANNEL",
    "alert_routes": "GPUBOT_ALERT_ROUTES",
    "alertmanager_url": "GPUBOT_ALERTMANAGER_URL",
    "log_patterns_file": "GPUBOT_LOG_PATTERNS_FILE",
    "sentinel": "GPUBOT_SENTINEL",
    "sentinel_channel": "GPUBOT_SENTINEL_CHANNEL",
    "sentinel_routes": "GPUBOT_SENTINEL_ROUTES",
    "sentinel_interval": "GPUBOT_SENTINEL_INTERVAL",
    "lost_after": "GPUBOT_LOST_AFTER",
    "plugin_down_after": "GPUBOT_PLUGIN_DOWN_AFTER",
    "pending_after": "GPUBOT_PENDING_AFTER",
    "idle_after": "GPUBOT_IDLE_AFTER",
    "xid_after": "GPUBOT_XID_AFTER",
    "sentinel_metrics_interval": "GPUBOT_SENTINEL_METRICS_INTERVAL",
    "quiet_for": "GPUBOT_QUIET_FOR",
    "digest_time": "GPUBOT_DIGEST_TIME",
    "digest_channel": "GPUBOT_DIGEST_CHANNEL",
    # several clusters (bot/fleet/config.py)
    "clusters": "GPUBOT_CLUSTERS",
    "channel_clusters": "GPUBOT_CHANNEL_CLUSTERS",
    "alert_cluster_label": "GPUBOT_ALERT_CLUSTER_LABEL",
}
# Settings given as durations ("5m", "1h30m", or seconds), kept as seconds.
DURATIONS = frozenset({"sentinel_interval", "lost_after", "plugin_down_after", "pending_after",
                       "quiet_for", "idle_after", "xid_after", "sentinel_metrics_interval"})

MODES = ("socket", "http")


@dataclass(frozen=True)
class Settings:
    """Everything ``gpubot serve`` reads. Secrets are hidden from ``repr``."""

    mode: str = "socket"
    host: str = "127.0.0.1"
    port: int = 8080
    api_url: str | None = None  # Slack Web API base, e.g. http://127.0.0.1:9000/api/
    snapshot: str | None = None
    kubeconfig: str | None = None
    context: str | None = None
    kube_timeout: float = 10.0  # per API request
    watch: bool = True  # live mode: keep a list+watch cache of the hot kinds
    operator_namespace: str = "gpu-operator"  # the watch cache keeps its ConfigMaps
    workers: int = 16  # diagnoses running at once (I/O-bound: they wait on the API server)
    queue_size: int = 64  # diagnoses waiting for a worker; beyond it: "busy, try again"
    deadline: float = 60.0  # seconds a diagnosis may take, queue wait excluded
    max_stuck: int = 8  # hung workers replaced by fresh ones before capacity shrinks
    http_threads: int = 16  # waitress threads (requests in flight)
    rate_limit: int = 10  # commands per user per minute; 0 disables
    channel_namespaces: Mapping[str, frozenset[str]] | None = None  # None: no restriction
    restrict_cluster_commands: bool = False  # doctor/nodes only where "*" is allowed
    command: str = "/gpu"
    slack_retries: int = 3  # 429 and connection-error retries per Web API call
    dedupe_ttl: float = 600.0
    coalesce_ttl: float = 5.0  # identical cluster reads within this share one request
    log_level: str = "INFO"
    approvers: tuple[str, ...] | None = None  # Slack user/user-group (S...) IDs; None: off
    allow_self_approval: bool = False
    approval_ttl: float = 900.0  # seconds an approval request stays open
    verify_timeout: float = 180.0  # seconds to wait for an action's effect
    plugin_namespace: str | None = None  # where device-plugin pods live (None: anywhere)
    plugin_selector: str | None = None  # label selector for plugin pods of unknown layouts
    store: str = "sqlite"  # or "kubernetes" (ConfigMaps in store_namespace; many replicas)
    store_path: str | None = None  # sqlite file; None: ~/.local/state/gpubot/state.db
    store_namespace: str | None = None  # None: the pod's own namespace, or default
    log_format: str = "text"  # or json: one JSON object per line, for log collectors
    # Findings link to <runbook_base_url><CODE>.md, these codes to their own pages (a team's
    # wiki); neither: Slack names the page installed with gpubot (bot/runbook.py).
    runbook_base_url: str | None = None
    runbook_overrides: Mapping[str, str] | None = None
    prometheus_url: str | None = None
    prometheus_timeout: float = 5.0  # per query
    prometheus_user: str | None = None  # basic auth (password: GPUBOT_PROMETHEUS_PASSWORD)
    prometheus_ca_file: str | None = None
    prometheus_insecure: bool = False
    idle_window: str = "1h"  # GPU_IDLE_ALLOCATED: below the threshold for this long
    idle_threshold: float = 5.0  # percent utilisation
    alert_channel: str | None = None  # where alert cards go unless a route says otherwise
    alert_routes: str | None = None  # "label=value=CHANNEL;..." (bot/alerts/routing.py)
    # Alert cards' links and silences; None: the webhook's externalURL (bot/alerts/silences.py)
    alertmanager_url: str | None = None
    log_patterns_file: str | None = None  # the site's own known log lines (logs.yaml format)
    # The sentinel (bot/sentinel): incidents noticed from the watch cache, live clusters only.
    sentinel: bool = True
    sentinel_channel: str | None = None  # None: the alert channel; neither: no cards
    sentinel_routes: str | None = None  # "namespace=ml=C1;pool=a100=C2" (first match wins)
    sentinel_interval: float = 15.0  # seconds between timer evaluations
    lost_after: float = 300.0  # a node's GPUs missing from allocatable this long
    plugin_down_after: float = 300.0  # a plugin/driver/toolkit pod down this long
    pending_after: float = 900.0  # a GPU pod Pending this long
    # With Prometheus (polled every sentinel_metrics_interval): GPUs held idle this long (at
    # least idle_window), a GPU's Xid not cleared by a reset this long.
    idle_after: float = 3600.0
    xid_after: float = 60.0
    sentinel_metrics_interval: float = 60.0
    quiet_for: float = 900.0  # back within this long after resolving: the same incident
    digest_time: str | None = None  # "HH:MM" UTC; None: no daily digest
    digest_channel: str | None = None  # None: the sentinel channel
    # Several clusters (bot/fleet/config.py): None: one, from snapshot/kubeconfig/context.
    clusters: tuple[ClusterConfig, ...] | None = None
    channel_clusters: Mapping[str, str] | None = None  # channel -> its default cluster
    alert_cluster_label: str = "cluster"  # the alert label that names the cluster
    bot_token: str | None = field(default=None, repr=False)
    app_token: str | None = field(default=None, repr=False)
    signing_secret: str | None = field(default=None, repr=False)
    alert_token: str | None = field(default=None, repr=False)
    prometheus_token: str | None = field(default=None, repr=False)
    prometheus_password: str | None = field(default=None, repr=False)
    alertmanager_token: str | None = field(default=None, repr=False)

    def validate(self) -> Settings:
        if self.log_format not in ("text", "json"):
            raise ConfigError(f"log_format must be text or json, not {self.log_format!r} "
                              f"({ENV['log_format']})")
        if self.mode not in MODES:
            raise ConfigError(f"mode must be socket or http, not {self.mode!r} "
                              f"({ENV['mode']}, --mode)")
        if not self.bot_token:
            raise ConfigError("no bot token: set SLACK_BOT_TOKEN (xoxb-...)")
        if self.mode == "socket" and not self.app_token:
            raise ConfigError("Socket Mode needs an app-level token: set SLACK_APP_TOKEN "
                              "(xapp-..., scope connections:write), or use --mode http")
        if self.mode == "http" and not self.signing_secret:
            raise ConfigError("HTTP mode needs the signing secret: set SLACK_SIGNING_SECRET")
        if self.snapshot and (self.kubeconfig or self.context):
            raise ConfigError("give either a snapshot or a kubeconfig/context, not both")
        if self.clusters and (self.snapshot or self.kubeconfig or self.context):
            raise ConfigError("give either clusters or a snapshot/kubeconfig/context, not both")
        from bot.fleet.config import check as check_clusters

        if (why := check_clusters(self.clusters, self.channel_clusters,
                                  self.channel_namespaces)) is not None:
            raise ConfigError(f"{why} ({ENV['clusters']})")
        for name in ("workers", "queue_size", "http_threads"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1 ({ENV[name]})")
        if self.deadline <= 0:
            raise ConfigError(f"deadline must be positive ({ENV['deadline']})")
        if self.store not in ("sqlite", "kubernetes"):
            raise ConfigError(f"store must be sqlite or kubernetes, not {self.store!r} "
                              f"({ENV['store']})")
        for name in ("approval_ttl", "verify_timeout", *sorted(DURATIONS)):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive ({ENV[name]})")
        bad = [a for a in self.approvers or () if not _APPROVER.match(a)]
        if bad:
            raise ConfigError(f"approvers must be Slack user IDs (U..., W...) or user-group "
                              f"IDs (S...), not {', '.join(bad)} ({ENV['approvers']})")
        try:
            check_base(self.runbook_base_url, f"runbook_base_url ({ENV['runbook_base_url']})")
        except RunbookError as err:
            raise ConfigError(str(err)) from None
        if self.alertmanager_url is not None and not valid_base(self.alertmanager_url):
            raise ConfigError(f"alertmanager_url must be an http(s) URL without spaces, quotes "
                              f"or <>| ({ENV['alertmanager_url']}), got "
                              f"{self.alertmanager_url!r}")
        if self.digest_time is not None and not _HHMM.match(self.digest_time):
            raise ConfigError(f"digest_time must be HH:MM (24-hour, UTC), not "
                              f"{self.digest_time!r} ({ENV['digest_time']})")
        if not self.command.startswith("/"):
            raise ConfigError(f"command must start with '/' ({ENV['command']})")
        if self.log_patterns_file:
            from handlers.knowledge.logs import LogPatternError, use_user_file
            try:
                use_user_file(self.log_patterns_file)
            except LogPatternError as e:
                raise ConfigError(f"log_patterns_file: {e}") from None
        return self

    def runbooks(self) -> Runbooks:
        return Runbooks.of(self.runbook_base_url, self.runbook_overrides)

    def secrets(self) -> list[str]:
        """The secret values, for log redaction."""
        return [s for s in (self.bot_token, self.app_token, self.signing_secret,
                            self.alert_token, self.prometheus_token,
                            self.prometheus_password, self.alertmanager_token) if s]


def parse_channel_map(value: Any, where: str) -> dict[str, frozenset[str]] | None:
    """``"C1=a,b;#ops=*"`` or a mapping ``{C1: [a, b], "#ops": "*"}`` -> {channel: namespaces}.

    An empty string or mapping means "no map" (every channel may query everything)."""
    if value is None or value == "" or value == {}:
        return None
    out: dict[str, frozenset[str]] = {}
    if isinstance(value, str):
        for part in value.replace("\n", ";").split(";"):
            part = part.strip()
            if not part:
                continue
            channel, sep, nss = part.partition("=")
            if not sep or not channel.strip():
                raise ConfigError(f"{where}: {part!r} is not CHANNEL=NS[,NS...]")
            out[channel.strip()] = frozenset(n.strip() for n in nss.split(",") if n.strip())
        return out or None
    if isinstance(value, Mapping):
        for channel, nss in value.items():
            items = nss.split(",") if isinstance(nss, str) else nss
            if not isinstance(items, list | tuple) or not all(isinstance(n, str) for n in items):
                raise ConfigError(f"{where}: channel {channel!r} needs a list of namespaces")
            out[str(channel).strip()] = frozenset(n.strip() for n in items if n.strip())
        return out or None
    raise ConfigError(f"{where}: expected CHANNEL=NS,... or a mapping, got {type(value).__name__}")


_HHMM = re.compile(r"^([01]\d|2[0-3]):[0-5]\d$")
_APPROVER = re.compile(r"^[UWS][A-Z0-9]{2,20}$")


def parse_approvers(value: Any, where: str) -> tuple[str, ...]:
    """``"U012AB,S0ONCALL"`` or a YAML list -> ("U012AB", "S0ONCALL")."""
    if value is None or value == "":
        return ()
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list | tuple):
        raise ConfigError(f"{where}: approvers must be a comma-separated list of Slack IDs")
    return tuple(str(i).strip() for i in items if str(i).strip())


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")


def _coerce(name: str, value: Any, where: str) -> Any:
    default = getattr(Settings(), name)
    if name == "channel_namespaces":
        return parse_channel_map(value, where)
    if name in ("clusters", "channel_clusters"):
        from bot.fleet.config import parse_channel_clusters, parse_clusters

        try:
            return (parse_clusters if name == "clusters" else parse_channel_clusters)(value)
        except ValueError as err:
            raise ConfigError(f"{where}: {err}") from None
    if name == "approvers":
        return parse_approvers(value, where)
    if name == "runbook_overrides":
        try:
            return parse_overrides(value, where)
        except RunbookError as err:
            raise ConfigError(str(err)) from None
    if value is None:
        return None
    if name in DURATIONS and isinstance(value, str):
        from bot.durations import parse_duration
        try:
            return parse_duration(value)
        except ValueError as err:
            raise ConfigError(f"{where}: {name}: {err}") from None
    try:
        if isinstance(default, bool):
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in _TRUE:
                return True
            if text in _FALSE:
                return False
            raise ValueError(value)
        if isinstance(default, int):
            return int(value)
        if isinstance(default, float):
            return float(value)
    except (TypeError, ValueError):
        kind = "true/false" if isinstance(default, bool) else type(default).__name__
        raise ConfigError(f"{where}: {name} must be a {kind}, got {value!r}") from None
    return str(value)


def _did_you_mean(name: str, known: list[str], prefix: str = "") -> str:
    """"; did you mean X?" with the closest known names, else where they are all listed:
    a list of every setting buries the one that was meant. ``prefix``, shared by all, is
    left out of the comparison (it would make every name look close)."""
    close = difflib.get_close_matches(name.removeprefix(prefix),
                                      [k.removeprefix(prefix) for k in known], n=2, cutoff=0.75)
    if close:
        return f"; did you mean {' or '.join(prefix + c for c in close)}?"
    return " (docs/configuration.md lists every setting)"


# GPUBOT_* variables read outside Settings: not typos of a setting.
OTHER_ENV = frozenset({"GPUBOT_CONFIG", "GPUBOT_TEMPLATES"})


def unknown_env(env: Mapping[str, str]) -> list[str]:
    """A warning for each GPUBOT_* variable no setting reads (a typo would otherwise be
    ignored without a word), naming the closest known variable."""
    known = sorted({*ENV.values(), *SECRET_ENV.values(), *OTHER_ENV})
    return [f"{var} is not a gpubot setting; it is ignored{_did_you_mean(var, known, 'GPUBOT_')}"
            for var in sorted(env) if var.startswith("GPUBOT_") and var not in known]


def load_file(path: str | Path) -> dict[str, Any]:
    """A YAML config file: the setting names above as keys (``-`` or ``_``)."""
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text()) or {}
    except OSError as err:
        raise ConfigError(f"cannot read config file {p}: {err.strerror}") from err
    except yaml.YAMLError as err:
        raise ConfigError(f"config file {p} is not valid YAML: {err}") from err
    if not isinstance(data, dict):
        raise ConfigError(f"config file {p}: expected a mapping of settings")
    known = {f.name for f in fields(Settings)}
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = str(key).replace("-", "_")
        if name in SECRET_ENV:
            raise ConfigError(f"config file {p}: {key} is a secret; set {SECRET_ENV[name]} "
                              "in the environment (from a Kubernetes Secret) instead")
        if name not in known:
            raise ConfigError(f"config file {p}: unknown setting {key!r}"
                              f"{_did_you_mean(name, sorted(ENV))}")
        out[name] = _coerce(name, value, f"config file {p}")
    return out


# Variables renamed: still setting the old one would silently lose the setting.
RENAMED_ENV = {"GPUBOT_RUNBOOK_URL": ENV["runbook_base_url"]}


def load_env(env: Mapping[str, str]) -> dict[str, Any]:
    for old, new in RENAMED_ENV.items():
        if old in env:
            raise ConfigError(f"{old} is now {new}: rename it")
    out: dict[str, Any] = {}
    for name, var in ENV.items():
        if var in env:
            out[name] = _coerce(name, env[var], var)
    for name, var in SECRET_ENV.items():
        if env.get(var):
            out[name] = env[var]
    return out


def load_settings(
    config_file: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Settings:
    """Defaults, then the config file, then the environment, then ``overrides`` (flags;
    None values are ignored). Not validated: call ``.validate()``."""
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    if config_file is None and env.get("GPUBOT_CONFIG"):
        config_file = env["GPUBOT_CONFIG"]
    if config_file:
        values.update(load_file(config_file))
    values.update(load_env(env))
    for name, value in (overrides or {}).items():
        if value is not None:
            values[name] = _coerce(name, value, f"--{name.replace('_', '-')}")
    return replace(Settings(), **values)
