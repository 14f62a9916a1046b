"""Block Kit pieces and Slack mrkdwn the approval cards share (actions, alert silences)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from bot.slack.mrkdwn import escape


def button(label: str, action_id: str, value: str, style: str, title: str, text: str,
           confirm: str) -> dict[str, Any]:
    return {"type": "button", "action_id": action_id, "value": value, "style": style,
            "text": {"type": "plain_text", "text": label, "emoji": False},
            "confirm": {"title": {"type": "plain_text", "text": title[:100]},
                        "text": {"type": "plain_text", "text": text[:300]},
                        "confirm": {"type": "plain_text", "text": confirm[:30]},
                        "deny": {"type": "plain_text", "text": "Cancel"},
                        "style": style}}


def section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text[:3000]}}


def mention(approver: str) -> str:
    return f"<!subteam^{escape(approver)}>" if approver.startswith("S") else (
        f"<@{escape(approver)}>")


def date(epoch: float) -> str:
    """Slack's date formatting (the reader's time zone), with a UTC fallback."""
    return f"<!date^{int(epoch)}^{{date_short_pretty}} {{time}}|{when(epoch)}>"


def when(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M UTC")


def hhmm(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%H:%M:%S UTC")
