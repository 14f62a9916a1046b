"""Kubernetes timestamps and the ages shown to people ("3d4h", "12m")."""

from __future__ import annotations

from datetime import UTC, datetime


def parse_time(value: object) -> datetime | None:
    """An RFC 3339 timestamp as an aware datetime; None when absent or unreadable."""
    if not isinstance(value, str) or not value:
        return None
    try:
        t = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def seconds_since(now: datetime, stamp: object) -> int | None:
    then = parse_time(stamp)
    if then is None:
        return None
    now = now if now.tzinfo else now.replace(tzinfo=UTC)
    return max(int((now - then).total_seconds()), 0)


def age_text(seconds: float | None) -> str:
    """``3d4h``, ``2h5m``, ``12m``, ``<1m``; ``?`` when unknown."""
    if seconds is None:
        return "?"
    secs = int(seconds)
    if secs < 60:
        return "<1m"
    d, rem = divmod(secs, 86400)
    h, rem = divmod(rem, 3600)
    m = rem // 60
    return f"{d}d{h}h" if d else f"{h}h{m}m" if h else f"{m}m"


def span_text(seconds: float) -> str:
    """How long something lasted: ``42s`` under a minute, else as ``age_text``."""
    return f"{max(int(seconds), 0)}s" if seconds < 60 else age_text(seconds)
