"""Who may ask what: the channel -> namespaces map, and a per-user rate limit.

With no map configured every channel may query every namespace. With a map, a channel
that is not in it may query nothing, ``*`` allows every namespace, and cluster commands
(``doctor``, ``nodes``: node-level state, no workload data) are allowed to every mapped
channel unless ``restrict_cluster_commands`` asks for ``*``.

Several clusters (``bot/fleet``): an entry ``prod:ml-team`` (or ``prod:*``) holds in
cluster ``prod`` only, a bare ``ml-team`` (or ``*``) in every cluster. A channel that may
read nothing in a cluster may not run cluster commands there either.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from bot.slack.commands import Command, Scope, target_namespace
from bot.slack.mrkdwn import code, escape

log = logging.getLogger("gpubot.slack.access")

ALL = "*"


@dataclass(frozen=True)
class Refusal:
    """A request the policy refuses; ``message`` is for the user (mrkdwn-safe)."""

    message: str
    reason: str  # for logs and metrics: namespace | channel | cluster | all-namespaces


class AccessPolicy:
    def __init__(self, channel_map: Mapping[str, frozenset[str]] | None,
                 *, restrict_cluster_commands: bool = False,
                 clusters: Sequence[str] = ()) -> None:
        self.channel_map = dict(channel_map) if channel_map else None
        self.restrict_cluster_commands = restrict_cluster_commands
        self.clusters = tuple(clusters)  # the fleet's names; () or one: a single cluster

    def allowed(self, channel_id: str, channel_name: str = "",
                cluster: str | None = None) -> frozenset[str] | None:
        """Namespaces the channel may query in ``cluster`` (None: in any of the fleet's);
        None: every namespace (no map, or ``*``)."""
        if self.channel_map is None:
            return None
        if cluster is None and len(self.clusters) > 1:
            each = [self.allowed(channel_id, channel_name, c) for c in self.clusters]
            if any(a is None for a in each):
                return None
            return frozenset().union(*(a for a in each if a is not None))
        if cluster is None and self.clusters:
            cluster = self.clusters[0]
        found: set[str] = set()
        keys = (channel_id, f"#{channel_name}" if channel_name else "", channel_name)
        for key in keys:
            if key and key in self.channel_map:
                for entry in self.channel_map[key]:
                    where, sep, ns = entry.rpartition(":")
                    if not sep:
                        found.add(entry)
                    elif where == cluster:
                        found.add(ns)
        if ALL in found:
            return None
        return frozenset(found)

    def clusters_for(self, channel_id: str, channel_name: str, namespace: str | None
                     ) -> list[str]:
        """The fleet's clusters where the channel may read ``namespace`` (None: any)."""
        out = []
        for c in self.clusters:
            allowed = self.allowed(channel_id, channel_name, c)
            if allowed is None or (allowed and (namespace is None or namespace in allowed)):
                out.append(c)
        return out

    def resolve(self, cmd: Command, channel_id: str, channel_name: str = "",
                user_id: str = "") -> Command | Refusal:
        """The command to run (with a default namespace filled in where the channel allows
        exactly one), or a Refusal. Every refusal is logged."""
        result = self._resolve(cmd, channel_id, channel_name)
        if isinstance(result, Refusal):
            log.warning("refused %s in channel %s (%s) for user %s: %s", cmd.line(),
                        channel_id, channel_name or "?", user_id or "?", result.reason)
        return result

    def _resolve(self, cmd: Command, channel_id: str, channel_name: str) -> Command | Refusal:
        scope = cmd.route.scope
        if scope is Scope.NONE:
            return cmd
        allowed = self.allowed(channel_id, channel_name, cmd.cluster)
        if allowed is None:
            return cmd
        where = escape(f"#{channel_name}") if channel_name else "this channel"
        if not allowed and cmd.cluster is not None and len(self.clusters) > 1:
            return Refusal(f"{where} may not query cluster {code(cmd.cluster)}: ask the bot's "
                           "admins to map it to the namespaces it may query there.", "cluster")
        if not allowed:
            return Refusal(f"{where} is not set up for gpubot queries: ask the bot's admins "
                           "to map it to the namespaces it may query.", "channel")
        listed = ", ".join(code(n) for n in sorted(allowed))
        if scope is Scope.CLUSTER:
            if self.restrict_cluster_commands:
                return Refusal(f"{code(cmd.name)} shows every GPU node, and {where} may only "
                               f"query {listed}.", "cluster")
            return cmd
        if scope is Scope.NAMESPACES and cmd.namespace is None:
            if len(allowed) == 1 and not cmd.all_namespaces:
                return replace(cmd, namespace=next(iter(allowed)))
            first = sorted(allowed)[0]
            return Refusal(f"{where} may only query {listed}: name one, e.g. "
                           f"{code(f'{cmd.name} -n {first}')}.", "all-namespaces")
        ns = target_namespace(cmd)
        if ns is None or ns not in allowed:
            return Refusal(f"{where} may only query {listed}; namespace {code(ns)} is not "
                           "one of them.", "namespace")
        return cmd


class RateLimiter:
    """At most ``limit`` commands per user in any ``window`` seconds (sliding window)."""

    def __init__(self, limit: int = 10, window: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.limit = limit
        self.window = window
        self._clock = clock
        self._lock = threading.Lock()
        self._seen: dict[str, deque[float]] = {}

    def check(self, user: str) -> float:
        """0 when ``user`` may go ahead (the call counts), else the seconds to wait."""
        if self.limit <= 0:
            return 0.0
        now = self._clock()
        with self._lock:
            q = self._seen.setdefault(user, deque())
            while q and now - q[0] >= self.window:
                q.popleft()
            if len(q) >= self.limit:
                return max(0.1, self.window - (now - q[0]))
            q.append(now)
            if len(self._seen) > 10_000:  # forget idle users
                for u in [u for u, d in self._seen.items() if not d or now - d[-1] > self.window]:
                    del self._seen[u]
            return 0.0
