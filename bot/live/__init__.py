"""Live mode: a ``ClusterView`` over a running Kubernetes API server.

    open_live_view(kubeconfig=None, context=None, *, timeout=10.0, max_workers=8) -> LiveView
    LiveView(api_client, ...)          # handlers.view.ClusterView; .prefetch(), .stats
    WatchCache(api_client, kinds=...)  # list+watch mirror for the long-running bot
    KubeconfigError, LiveError, ...    # ViewErrors: see bot.live.errors

Importing this package is free: ``kubernetes`` (about half a second) is imported only when
``open_live_view`` runs, and urllib3 only when a name below is first used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .cache import DEFAULT_KINDS, WatchCache
    from .errors import (
        ApiBadResponse,
        ApiForbidden,
        ApiServerError,
        ApiThrottled,
        ApiUnauthorized,
        ApiUnreachable,
        KubeconfigError,
        LiveError,
    )
    from .kinds import KINDS, KindInfo
    from .transport import RetryPolicy
    from .view import LiveView, open_live_view

_EXPORTS = {
    "open_live_view": "view",
    "LiveView": "view",
    "WatchCache": "cache",
    "DEFAULT_KINDS": "cache",
    "RetryPolicy": "transport",
    "KINDS": "kinds",
    "KindInfo": "kinds",
    "KubeconfigError": "errors",
    "LiveError": "errors",
    "ApiUnreachable": "errors",
    "ApiUnauthorized": "errors",
    "ApiForbidden": "errors",
    "ApiThrottled": "errors",
    "ApiServerError": "errors",
    "ApiBadResponse": "errors",
}

__all__ = [
    "DEFAULT_KINDS",
    "KINDS",
    "ApiBadResponse",
    "ApiForbidden",
    "ApiServerError",
    "ApiThrottled",
    "ApiUnauthorized",
    "ApiUnreachable",
    "KindInfo",
    "KubeconfigError",
    "LiveError",
    "LiveView",
    "RetryPolicy",
    "WatchCache",
    "open_live_view",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
