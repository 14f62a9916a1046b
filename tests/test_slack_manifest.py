"""deploy/slack/manifest.yaml: the /gpu command, interactivity, Socket Mode, minimal scopes."""

from __future__ import annotations

from pathlib import Path

import yaml

from bot.slack.config import Settings

MANIFEST = Path(__file__).resolve().parents[1] / "deploy" / "slack" / "manifest.yaml"


def test_manifest_declares_what_the_bot_uses_and_no_more() -> None:
    m = yaml.safe_load(MANIFEST.read_text())
    commands = m["features"]["slash_commands"]
    assert [c["command"] for c in commands] == [Settings().command]
    assert all(len(c["description"]) <= 100 and len(c["usage_hint"]) <= 100 for c in commands)
    assert m["settings"]["interactivity"]["is_enabled"] is True
    assert m["settings"]["socket_mode_enabled"] is True
    assert sorted(m["oauth_config"]["scopes"]["bot"]) == [
        "app_mentions:read", "channels:read", "chat:write", "commands", "files:write",
        "groups:read", "usergroups:read"]
    assert "user" not in m["oauth_config"]["scopes"]
    for url in (commands[0]["url"], m["settings"]["interactivity"]["request_url"],
                m["settings"]["event_subscriptions"]["request_url"]):
        assert url.endswith("/slack/events")
