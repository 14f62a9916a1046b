"""The Slack front end: ``/gpu`` commands answered with threaded verdict cards.

    SlackBot(settings, view)      # the Bolt app and its listeners (app.py)
    BotServer(bot).start()        # waitress: /slack/events, /healthz, /readyz, /metrics
    load_settings(...)            # settings from env, a YAML file and flags (config.py)
    Renderer().render(diag, ...)  # Diagnosis -> Block Kit messages (blocks.py)

Importing this package imports nothing heavy; the names load on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .app import SlackBot
    from .blocks import Renderer
    from .config import ConfigError, Settings, load_settings
    from .server import BotServer

_EXPORTS = {"SlackBot": "app", "BotServer": "server", "Renderer": "blocks",
            "Settings": "config", "ConfigError": "config", "load_settings": "config"}

__all__ = ["BotServer", "ConfigError", "Renderer", "Settings", "SlackBot", "load_settings"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{module}", __name__), name)
