"""The words of a chain finding: its summary and fix, filled in with the node and pod it is
about (``Where``). Each code's words live beside the stage that owns it, registered with
``@words(CODE)``, so that a stage that finds the code in a log line it reads says it as the
code's owner does."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from handlers.model import Fix

if TYPE_CHECKING:
    from handlers.chain.fixtext import Where


@dataclass(frozen=True)
class Words:
    summary: str
    fix: Fix = field(default_factory=Fix)


WordsFn = Callable[["Where"], Words]
WORDS: dict[str, WordsFn] = {}


def words(code: str) -> Callable[[WordsFn], WordsFn]:
    """Register the summary and fix of ``code`` (filled in with a ``Where``)."""
    def register(fn: WordsFn) -> WordsFn:
        if code in WORDS:
            raise ValueError(f"words for {code} registered twice")
        WORDS[code] = fn
        return fn
    return register


def say(code: str, where: Where) -> Words:
    """The words of ``code`` about ``where``; a code no stage words is named as it is."""
    from handlers.chain import stages

    stages.load()
    fn = WORDS.get(code)
    return fn(where) if fn else Words(f"{code} on {where.node}.")
