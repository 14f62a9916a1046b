"""Links from a finding code to its runbook page (``docs/runbook/<CODE>.md``).

The base URL is a setting (``runbook_url`` / ``GPUBOT_RUNBOOK_URL``) so that a team can
point the links at its own copy of the docs (an internal wiki, a fork).
"""

from __future__ import annotations

import re

DEFAULT_BASE = "https://github.com/gpubot/gpubot/blob/main/docs/runbook/"
ENV = "GPUBOT_RUNBOOK_URL"

# Slack's link syntax <url|text> ends at '|' or '>': such a URL could not be linked safely.
_SAFE_URL = re.compile(r"https?://[^\s<>|\"`]+")


def valid_base(base: str) -> bool:
    return bool(_SAFE_URL.fullmatch(base))


def runbook_url(code: str, base: str | None = None) -> str:
    """The page of ``code`` under ``base`` (default: the project's docs)."""
    root = base or DEFAULT_BASE
    if not root.endswith("/"):
        root += "/"
    return f"{root}{code}.md"
