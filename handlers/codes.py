"""The finding-code catalogue (``shared/spec/finding-codes.md``), one card per code.

Codes are an API: ``--output json`` prints them, tests assert on them, alert routing and
templates key on them. A new root cause that needs a code gets a card of its own
(``handlers/knowledge/cards/<CODE>.yaml``, see ``handlers/cards.py``); never rename one.
"""

from __future__ import annotations

from handlers.cards import Card, Section, card, codes

__all__ = ["CODES", "Card", "Section", "code_rank", "title"]

# code -> its card, in the catalogue's order (section, then the card's order).
CODES = codes()


def code_rank(code: str) -> tuple[int, int]:
    return card(code).rank


def title(code: str) -> str:
    return card(code).title
