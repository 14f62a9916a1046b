"""Where a finding code's runbook is: a team's own page, a URL under a base, or the page
gpubot installs with itself.

Every code's card names its page (``handlers/knowledge/cards/<CODE>.yaml``, ``runbook:``);
the pages are ``docs/runbook/`` in a checkout, and ``bot/runbooks`` (a symbolic link to
it that a wheel build copies, pyproject.toml's package-data) inside the installed package.

- ``runbook_overrides`` (``GPUBOT_RUNBOOK_OVERRIDES="CODE=URL;CODE2=URL"``): these codes
  link to these pages (a team's wiki), whatever the base;
- ``runbook_base_url`` (``GPUBOT_RUNBOOK_BASE_URL``): every other code links to
  ``<base><page>`` (a published copy of ``docs/runbook/``);
- neither: no link; the CLI prints the installed page's path, Slack names the page as text
  (a link to a file on the bot's disk would be a broken link).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BASE_ENV = "GPUBOT_RUNBOOK_BASE_URL"
OVERRIDES_ENV = "GPUBOT_RUNBOOK_OVERRIDES"
PAGES = Path(__file__).resolve().parent / "runbooks"
SOURCE_DIR = "docs/runbook"  # where the pages are in gpubot's repository

# Slack's link syntax <url|text> ends at '|' or '>': such a URL could not be linked safely.
_SAFE_URL = re.compile(r"https?://[^\s<>|\"`]+")
_CODE = re.compile(r"^[A-Z][A-Z0-9_]*$")


def valid_base(base: str) -> bool:
    return bool(_SAFE_URL.fullmatch(base))


def page(code: str) -> str:
    """The file name of ``code``'s page: its card's, else ``<CODE>.md``."""
    from handlers.cards import card

    try:
        return card(code).runbook or f"{code}.md"
    except KeyError:
        return f"{code}.md"


@dataclass(frozen=True)
class Runbooks:
    """The runbook settings; hashable, so rendering environments can be cached per value."""

    base_url: str | None = None
    overrides: tuple[tuple[str, str], ...] = ()

    def url(self, code: str) -> str | None:
        """``code``'s page as a URL, or None when no setting gives one."""
        for c, url in self.overrides:
            if c == code:
                return url
        if not self.base_url:
            return None
        root = self.base_url if self.base_url.endswith("/") else self.base_url + "/"
        return root + page(code)

    def path(self, code: str) -> Path:
        """The installed page of ``code``."""
        return PAGES / page(code)

    def resolve(self, code: str) -> str:
        """What a terminal or a script gets: the URL, else the installed page's path."""
        return self.url(code) or str(self.path(code))

    @classmethod
    def of(cls, base_url: str | None, overrides: Mapping[str, str] | None) -> Runbooks:
        return cls(base_url or None, tuple(sorted((overrides or {}).items())))


class RunbookError(ValueError):
    """A malformed runbook setting; ``str()`` says which and why."""


def check_base(base: str | None, where: str) -> None:
    if base is not None and not valid_base(base):
        raise RunbookError(f"{where}: the runbook base must be an http(s) URL without spaces, "
                           f"quotes or <>|, got {base!r}")


def parse_overrides(value: Any, where: str) -> dict[str, str] | None:
    """``"CODE=URL;CODE2=URL"`` (or one per line) or a mapping ``{CODE: URL}`` -> {code: url}.

    Every code must be a known finding code (a misspelt one would never apply) and every
    URL one Slack can link. Empty: None."""
    if value is None or value == "" or value == {}:
        return None
    pairs: list[tuple[str, Any]] = []
    if isinstance(value, str):
        for part in value.replace("\n", ";").split(";"):
            if not part.strip():
                continue
            code, sep, url = part.partition("=")  # a URL may carry '=' in its query
            if not sep:
                raise RunbookError(f"{where}: {part.strip()!r} is not CODE=URL")
            pairs.append((code.strip(), url.strip()))
    elif isinstance(value, Mapping):
        pairs = [(str(k).strip(), v) for k, v in value.items()]
    else:
        raise RunbookError(f"{where}: expected CODE=URL;... or a mapping of codes to URLs, "
                           f"got {type(value).__name__}")
    from handlers.cards import codes

    known = codes()
    out: dict[str, str] = {}
    for code, url in pairs:
        if not _CODE.match(code) or code not in known:
            raise RunbookError(f"{where}: {code!r} is not a finding code{_did_you_mean(code)}")
        if not isinstance(url, str) or not valid_base(url):
            raise RunbookError(f"{where}: {code}'s runbook must be an http(s) URL without "
                               f"spaces, quotes or <>|, got {url!r}")
        out[code] = url
    return out or None


def _did_you_mean(code: str) -> str:
    import difflib

    from handlers.cards import codes

    close = difflib.get_close_matches(code.upper(), list(codes()), n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def from_env(environ: Mapping[str, str], base_url: str | None = None) -> Runbooks:
    """The CLI's runbooks: ``base_url`` (its flag), else the environment. Raises
    RunbookError."""
    base = base_url or environ.get(BASE_ENV) or None
    check_base(base, "--runbook-base-url" if base_url else BASE_ENV)
    return Runbooks.of(base, parse_overrides(environ.get(OVERRIDES_ENV), OVERRIDES_ENV))
