"""A running bot against the fake Slack, for the HTTP and Socket Mode tests.

    with BotHarness(snapshot="examples/plugin-crashloop-cuda-mismatch") as h:
        status, body = h.command("why-pending ml-team/train-0")
        card = h.slack.wait_for("chat.postMessage")[0]
"""

from __future__ import annotations

import itertools
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import urlencode

from bot.slack.app import SlackBot
from bot.slack.config import Settings
from bot.slack.server import BotServer
from handlers.view import ClusterView

from .server import FakeSlack
from .signing import signed_headers

ROOT = Path(__file__).resolve().parents[2]
SECRET = "test-signing-secret-8f2c"
BOT_TOKEN = "xoxb-test-bot-token-77aa"
APP_TOKEN = "xapp-1-test-app-token-99bb"
_ids = itertools.count(1)


def make_settings(slack: FakeSlack, **overrides: Any) -> Settings:
    base = Settings(mode="http", host="127.0.0.1", port=0, api_url=slack.api_url,
                    bot_token=BOT_TOKEN, app_token=APP_TOKEN, signing_secret=SECRET,
                    workers=4, queue_size=16, deadline=20.0, rate_limit=100, http_threads=8,
                    slack_retries=3)
    return replace(base, **overrides)


class BotHarness:
    def __init__(self, snapshot: str | Path | None = None, *, view: ClusterView | None = None,
                 approvals: Callable[[Settings], Any] | None = None, **settings: Any) -> None:
        self.slack = FakeSlack(socket_mode=settings.get("mode") == "socket")
        self._settings = settings
        if view is None:
            from bot.snapshot import load_snapshot

            path = snapshot or "examples/plugin-crashloop-cuda-mismatch"
            view = load_snapshot(str(ROOT / path))
        self.view = view
        self.approvals = approvals  # settings -> bot.slack.approvals.Approvals
        self.bot: SlackBot | None = None
        self.server: BotServer | None = None

    def start(self) -> BotHarness:
        self.slack.start()
        self.settings = make_settings(self.slack, **self._settings)
        self.bot = SlackBot(self.settings, self.view, approvals=self.approvals(self.settings)
                            if self.approvals else None)
        self.server = BotServer(self.bot).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop(timeout=5)
        self.slack.stop()

    def __enter__(self) -> BotHarness:
        return self.start()

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self.server is not None
        return self.server.url

    # -- requests -------------------------------------------------------------------------------

    def post(self, body: str, headers: dict[str, str], path: str = "/slack/events"
             ) -> tuple[int, Any, float]:
        """(status, JSON body or text, seconds taken)."""
        req = urllib.request.Request(self.url + path, data=body.encode(), headers=headers,
                                     method="POST")
        start = time.monotonic()
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as err:
            status, raw = err.code, err.read()
        took = time.monotonic() - start
        try:
            return status, json.loads(raw) if raw else None, took
        except ValueError:
            return status, raw.decode(), took

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(self.url + path, timeout=10) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode()

    def command_body(self, text: str, *, user: str = "U0USER1", channel: str = "C0CHAN1",
                     channel_name: str = "ml-team", trigger_id: str | None = None) -> str:
        n = next(_ids)
        return urlencode({
            "token": "legacy-verification-token", "team_id": "T0001", "team_domain": "fake",
            "channel_id": channel, "channel_name": channel_name, "user_id": user,
            "user_name": "someone", "command": self.settings.command, "text": text,
            "api_app_id": "A0001", "response_url": self.slack.response_url(f"cmd-{n}"),
            "trigger_id": trigger_id or f"{n}.1.trigger", "is_enterprise_install": "false",
        })

    def command(self, text: str, *, sign: bool = True, timestamp: int | None = None,
                extra_headers: dict[str, str] | None = None, **kw: Any) -> tuple[int, Any, float]:
        body = self.command_body(text, **kw)
        headers = signed_headers(SECRET if sign else "wrong-secret", body, timestamp)
        headers.update(extra_headers or {})
        return self.post(body, headers)

    def action_payload(self, action_id: str, value: str, *, message_ts: str,
                       text: str = "Re-check", user: str = "U0USER1",
                       channel: str = "C0CHAN1", channel_name: str = "ml-team",
                       trigger_id: str | None = None) -> dict[str, Any]:
        n = next(_ids)
        return {
            "type": "block_actions", "team": {"id": "T0001", "domain": "fake"},
            "user": {"id": user, "username": "someone", "team_id": "T0001"},
            "api_app_id": "A0001", "token": "legacy-verification-token",
            "container": {"type": "message", "message_ts": message_ts, "channel_id": channel,
                          "is_ephemeral": False},
            "trigger_id": trigger_id or f"{n}.2.trigger",
            "channel": {"id": channel, "name": channel_name},
            "message": {"type": "message", "ts": message_ts, "text": "card"},
            "response_url": self.slack.response_url(f"act-{n}"),
            "actions": [{"action_id": action_id, "block_id": "gpubot_card_actions",
                         "text": {"type": "plain_text", "text": text}, "value": value,
                         "type": "button", "action_ts": "1700000001.000001"}],
        }

    def action(self, action_id: str, value: str, **kw: Any) -> tuple[int, Any, float]:
        body = urlencode({"payload": json.dumps(self.action_payload(action_id, value, **kw))})
        return self.post(body, signed_headers(SECRET, body))
