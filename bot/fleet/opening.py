"""``gpubot serve``'s fleet: each configured cluster opened as the single cluster is (its
own live view, watch cache and warm-up, or a snapshot), in one process."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from bot.fleet import DEFAULT_NAME, ClusterHandle, Fleet
from handlers.view import ClusterView, ViewError

if TYPE_CHECKING:
    from bot.slack.config import Settings
    from handlers.runtime.source import MetricsSource

log = logging.getLogger("gpubot.fleet")

Opener = Callable[["Settings"], "tuple[ClusterView, Callable[[], bool] | None, Callable[[], None]]"]


def open_fleet(settings: Settings, open_cluster: Opener, *, first_must_open: bool = True
               ) -> Fleet:
    """One handle per configured cluster (``open_cluster``: ``bot.serve.open_cluster``);
    without ``clusters``, today's one cluster named after its context. A cluster that
    cannot be opened stays in the fleet with the reason, unless it is the first and
    ``first_must_open`` (serve: the store and actions live there): then
    ViewError. The CLI, which keeps nothing there, reports it as any other."""
    if not settings.clusters:
        view, probe, close = open_cluster(settings)
        return Fleet.single(view, name=settings.context or DEFAULT_NAME, probe=probe,
                            close=close)
    handles: list[ClusterHandle] = []
    try:
        for i, config in enumerate(settings.clusters):
            one = replace(settings, **config.source_settings(),
                          store_namespace=config.store_namespace or settings.store_namespace)
            if config.in_cluster:
                one = replace(one, kubeconfig=None, context=None)
            try:
                view, probe, close = open_cluster(one)
            except ViewError as err:
                if i == 0 and first_must_open:
                    raise ViewError(f"cluster {config.name}: {err}") from err
                log.error("cluster %s cannot be opened: %s", config.name, err)
                handles.append(ClusterHandle(config.name, None, error=str(err),
                                             store_namespace=one.store_namespace,
                                             context=config.context))
                continue
            handles.append(ClusterHandle(config.name, view, close=close, probe=probe,
                                         store_namespace=one.store_namespace,
                                         context=config.context))
            log.info("cluster %s: %s", config.name, view.source)
    except BaseException:
        for h in handles:
            h.close()
        raise
    return Fleet(handles)


def open_metrics(fleet: Fleet, settings: Settings,
                 open_one: Callable[[str], MetricsSource | None]) -> None:
    """Each cluster's Prometheus (its ``prometheus_url``; the first cluster falls back to
    the top-level one: a Prometheus answers for its own cluster only)."""
    urls = {c.name: c.prometheus_url for c in settings.clusters or ()}
    for i, handle in enumerate(fleet):
        url = urls.get(handle.name) or (settings.prometheus_url if i == 0 else None)
        if url and handle.prometheus is None:
            handle.prometheus = open_one(url)
