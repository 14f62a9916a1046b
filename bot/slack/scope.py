"""What a channel restricted to some namespaces may be told: answers and "not read"
lines name no object outside them (``GPUBOT_CHANNEL_NAMESPACES``)."""

from __future__ import annotations

from collections.abc import Collection, Iterable

from handlers.errors import TargetNotFound


def error_text(err: Exception, allowed: Collection[str] | None) -> str:
    """The user's error message as the channel may see it: a not-found answer names
    the target elsewhere only in namespaces the channel may query."""
    if allowed is not None and isinstance(err, TargetNotFound):
        return str(err.within(allowed))
    return str(err)


def visible_problems(problems: Iterable[object], allowed: Collection[str] | None) -> list[str]:
    """``view.problems`` as text, without those about objects in other namespaces (a
    problem without a ``namespace`` is about a file or a cluster-scoped object)."""
    out = []
    for problem in problems:
        ns = getattr(problem, "namespace", None)
        if allowed is None or ns is None or ns in allowed:
            out.append(str(problem))
    return out
