"""Durations as kubectl takes them (``--request-timeout``): ``5s``, ``1m``, ``1m30s``,
``500ms``, ``1h``; a bare number is seconds."""

from __future__ import annotations

import re

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|s|m|h)")


def parse_duration(text: str) -> float:
    """Seconds. Raises ValueError with a message fit for a usage error."""
    s = text.strip().lower()
    try:
        seconds = float(s)
    except ValueError:
        pos, seconds = 0, 0.0
        for m in _PART.finditer(s):
            if m.start() != pos:
                break
            seconds += float(m.group(1)) * _UNITS[m.group(2)]
            pos = m.end()
        if pos != len(s) or not s:
            raise ValueError(f"invalid duration {text!r}: use 5s, 1m, 1m30s or 500ms") from None
    if seconds <= 0 or seconds != seconds or seconds == float("inf"):
        raise ValueError(f"invalid duration {text!r}: it must be more than zero")
    return seconds
