"""Errors a handler raises for the user (the CLI turns them into exit code 1)."""

from __future__ import annotations

import difflib
from collections.abc import Collection, Iterable


class GpubotError(Exception):
    """An error fit for the user: ``str()`` says what went wrong."""


class TargetNotFound(GpubotError):
    """The named node/pod does not exist; ``suggestions`` holds close names (in the
    namespace asked about, or cluster-scoped), ``elsewhere`` the same name in other
    namespaces (``ns/name``)."""

    def __init__(self, message: str, suggestions: Iterable[str] = (),
                 elsewhere: Iterable[str] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.suggestions = list(suggestions)
        self.elsewhere = list(elsewhere)

    def __str__(self) -> str:
        if self.elsewhere:
            return f"{self.message}; it exists in {', '.join(self.elsewhere[:3])}"
        missing = [s for s in self.suggestions if s not in self.message]
        return f"{self.message}; did you mean {', '.join(missing)}?" if missing else self.message

    def within(self, namespaces: Collection[str]) -> TargetNotFound:
        """The same answer for someone who may only see ``namespaces``: it names no
        object outside them."""
        seen = [n for n in self.elsewhere if n.split("/", 1)[0] in namespaces]
        return TargetNotFound(self.message, self.suggestions, seen)


def close_names(name: str, candidates: Iterable[str], n: int = 3) -> list[str]:
    """Names that look like ``name`` (typos, a missing suffix), best first."""
    pool = sorted(set(candidates))
    close = difflib.get_close_matches(name, pool, n=n, cutoff=0.6)
    if len(close) < n:
        # A short name given for a long one (`gpu-7` for `gpu-node-7`): substring matches.
        close += [c for c in pool if name and name in c and c not in close][: n - len(close)]
    if len(close) < n and name:
        # A typo in a name given without its suffix (`ip-10-18-1-3` for
        # `ip-10-18-1-2.ec2.internal`): compare with the candidates cut to the same length.
        heads: dict[str, list[str]] = {}
        for c in pool:
            heads.setdefault(c[:len(name)], []).append(c)
        for head in difflib.get_close_matches(name, list(heads), n=n, cutoff=0.8):
            close += [c for c in heads[head] if c not in close]
    return close[:n]
