"""Escaping for Slack mrkdwn: the only three characters Slack decodes are ``& < >``.

Slack has no escape for ``*``, ``_``, ``~`` or backticks, so text from the cluster or the
user is shown literally by putting it in code (``code``/``pre``: formatting characters
are inert there) or in a plain_text object, and always with ``& < >`` escaped, which
makes ``<!channel>`` or ``<@U123>`` print as text instead of notifying anyone.
"""

from __future__ import annotations

import re

_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})
# A backtick cannot be escaped inside inline code; U+02CB looks the same and ends nothing.
_GRAVE = "\u02cb"
_FENCE = re.compile(r"`{3,}")


def escape(text: object) -> str:
    """``& < >`` as entities: safe anywhere in a mrkdwn or plain_text string."""
    return str(text).translate(_ESCAPES)


def code_raw(text: object) -> str:
    """Inline code, not yet escaped (templates escape on output)."""
    s = " ".join(str(text).split("\n")).replace("`", _GRAVE)
    return f"`{s}`" if s.strip() else "` `"


def pre_raw(text: object) -> str:
    """A code block, not yet escaped: runs of backticks inside cannot close it."""
    s = str(text).strip("\n")
    s = _FENCE.sub(lambda m: "`" + "\u200b`" * (len(m.group(0)) - 1), s)
    if s.endswith("`"):
        s += "\u200b"
    return f"```\n{s}\n```" if s.strip() else "```\n(empty)\n```"


def code(text: object) -> str:
    """Inline code, escaped: for user or cluster text inside an ephemeral mrkdwn message."""
    return escape(code_raw(text))


def pre(text: object) -> str:
    return escape(pre_raw(text))


def unescape(text: str) -> str:
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
