"""What a Reader does for handlers.memo, without a view: unit tests of what is remembered
call the pure helpers (pod_facts, node_info, simulate) outside any diagnosis, where nothing
would be."""

from __future__ import annotations

from handlers.memo import Memos, use


class Diagnosing:
    """Fresh memos, current in this context while this object lives."""

    def __init__(self) -> None:
        self.memos = Memos()
        use(self)
