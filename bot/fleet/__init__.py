"""The clusters one gpubot serves, by name: what the Slack bot and the CLI read instead of
a bare view.

    fleet = Fleet.single(view)                    # no clusters setting: today's one view
    fleet = open_fleet(settings)                  # bot/fleet/opening.py: one per cluster
    fleet.get("prod").view                        # a handlers.view.ClusterView
    fleet.default                                 # the first (actions and the store)

A cluster that cannot be opened or does not answer stays in the fleet with the reason
(``ClusterHandle.error``, ``reachable()``): it is reported as such and the others answer.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from handlers.errors import GpubotError
from handlers.view import ClusterView, ViewError

if TYPE_CHECKING:
    from handlers.runtime.source import MetricsSource

log = logging.getLogger("gpubot.fleet")

DEFAULT_NAME = "default"
REACHABLE_TTL = 10.0  # seconds a reachability answer is reused


class ClusterUnavailable(GpubotError):
    """A cluster the asker named cannot be read now; ``str()`` says which and why."""


class UnknownCluster(GpubotError):
    """A cluster name that is not in the fleet."""


@dataclass
class ClusterHandle:
    """One cluster: its view (None when it could not be opened), its Prometheus and store
    namespace, and how to tell whether it answers."""

    name: str
    view: ClusterView | None
    close: Callable[[], None] = lambda: None
    probe: Callable[[], bool] | None = None  # ready: reachable and its cache synced
    prometheus: MetricsSource | None = None
    store_namespace: str | None = None
    error: str | None = None  # why it could not be opened
    context: str | None = None  # its kubeconfig context, for commands run there (fits elsewhere)
    clock: Callable[[], float] = time.monotonic
    _reached: tuple[float, str | None] | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def source(self) -> str:
        return self.view.source if self.view is not None else f"cluster {self.name}"

    def unreachable(self) -> str | None:
        """Why the cluster cannot be read now, or None; a live cluster's answer is asked
        (one cheap read) at most every ``REACHABLE_TTL`` seconds."""
        if self.view is None:
            return self.error or "not opened"
        now = self.clock()
        with self._lock:
            if self._reached is not None and now - self._reached[0] < REACHABLE_TTL:
                return self._reached[1]
        why: str | None = None
        try:
            self.view.get("Namespace", "default")
        except ViewError as err:
            # Forbidden still proves the API server answers; unreachable or rejected does not.
            if getattr(err, "fatal", False) or type(err).__name__ in (
                    "ApiUnreachable", "ApiUnauthorized", "KubeconfigError"):
                why = str(err)
        with self._lock:
            self._reached = (now, why)
        return why

    def readable(self) -> ClusterView:
        """The view, or ClusterUnavailable saying why it cannot be read."""
        why = self.unreachable()
        if why is not None or self.view is None:
            raise ClusterUnavailable(f"cluster {self.name} is unreachable: {why}")
        return self.view


class Fleet:
    """Clusters by name, in the order configured; ``named``: the config lists clusters
    (answers then say which cluster they read)."""

    def __init__(self, handles: Sequence[ClusterHandle], *, named: bool = True) -> None:
        if not handles:
            raise ValueError("a fleet needs a cluster")
        self.handles = {h.name: h for h in handles}
        self.named = named

    @classmethod
    def single(cls, view: ClusterView, *, name: str = DEFAULT_NAME,
               probe: Callable[[], bool] | None = None,
               close: Callable[[], None] = lambda: None) -> Fleet:
        """Today's one view, unnamed: answers read as they always have."""
        return cls([ClusterHandle(name, view, close=close, probe=probe)], named=False)

    @property
    def default(self) -> ClusterHandle:
        return next(iter(self.handles.values()))

    @property
    def names(self) -> list[str]:
        return list(self.handles)

    @property
    def multi(self) -> bool:
        return len(self.handles) > 1

    def __iter__(self) -> Iterator[ClusterHandle]:
        return iter(self.handles.values())

    def __len__(self) -> int:
        return len(self.handles)

    def get(self, name: str | None) -> ClusterHandle:
        """The cluster called ``name`` (None: the default). Raises UnknownCluster."""
        if name is None:
            return self.default
        found = self.handles.get(name)
        if found is None:
            raise UnknownCluster(f"no cluster {name!r}; clusters: {', '.join(self.names)}")
        return found

    def label(self, handle: ClusterHandle) -> str:
        """What a card says it read: the view's source, with the cluster's name first
        when the config names clusters."""
        if not self.named:
            return handle.source
        return f"cluster {handle.name} · {handle.source}"

    def ready(self) -> bool:
        """Readiness: any cluster ready (one down cluster must not take the bot out of
        service for the others)."""
        for h in self:
            if h.view is None:
                continue
            try:
                if h.probe is None or h.probe():
                    return True
            except Exception:
                log.warning("probe of cluster %s failed", h.name, exc_info=True)
        return False

    def close(self) -> None:
        """Each cluster's view and cache, and the Prometheus clients of all but the first
        (the bot closes that one: it is ``SlackBot.prometheus``)."""
        for i, h in enumerate(self):
            try:
                h.close()
                close_metrics = getattr(h.prometheus, "close", None)
                if i and close_metrics is not None:
                    close_metrics()
            except Exception:  # one cluster's close must not keep the others open
                log.warning("closing cluster %s", h.name, exc_info=True)
